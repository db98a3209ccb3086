import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SetteeCore
@testable import SetteeReplication
import Testing

/// A minimal JSON-over-HTTP client for driving `settee serve` processes in tests.
struct HTTP {
    static let auth = "Basic " + Base64.encode(Array("admin:secret".utf8))

    @discardableResult
    static func send(_ method: HTTPMethod, _ url: String, _ body: String? = nil,
                     timeout: TimeAmount = .seconds(60)) async throws -> (status: Int, json: JSON?) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: auth)
        request.headers.add(name: "Accept", value: "application/json")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await RemoteEndpoint.sharedClient.execute(request, timeout: timeout)
        let bytes = try await response.body.collect(upTo: 1 << 28)
        return (Int(response.status.code), try? JSON.parse(Array(bytes.readableBytesView)))
    }

    /// The body of a GET as text.
    static func raw(_ url: String) async throws -> String {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Authorization", value: auth)
        let response = try await RemoteEndpoint.sharedClient.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 24)
        return String(decoding: bytes.readableBytesView, as: UTF8.self)
    }

    /// Writes `count` small documents (`prefix0`…) with `_bulk_docs`.
    static func load(_ db: String, prefix: String, count: Int, start: Int = 0) async throws {
        var i = start
        while i < start + count {
            let n = min(1000, start + count - i)
            let docs = (i..<(i + n)).map { #"{"_id":"\#(prefix)\#(String(format: "%06d", $0))","n":\#($0),"text":"some text to make it ~100 bytes long, more or less"}"# }
            let r = try await send(.POST, db + "/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#)
            guard r.status == 201 else { throw ServerProcessError(message: "bulk load failed: \(r.status)") }
            i += n
        }
    }

    static func docCount(_ db: String) async throws -> Int {
        let r = try await send(.GET, db)
        return Int(r.json?["doc_count"]?.intValue ?? -1)
    }

    /// Each document's id, winning revision, deleted flag and sorted conflicts: equal on converged nodes.
    static func fingerprint(_ db: String) async throws -> [String] {
        let r = try await send(.GET, db + "/_changes?style=all_docs")
        var out: [String] = []
        for row in r.json?["results"]?.arrayValue ?? [] {
            guard let id = row["id"]?.stringValue else { continue }
            let revs = (row["changes"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue }.sorted()
            let doc = try await send(.GET, db + "/" + id + "?conflicts=true&deleted_conflicts=true&revs=true")
            let winner = doc.json?["_rev"]?.stringValue ?? "deleted"
            out.append("\(id) \(winner) \(revs) \(doc.json?["_conflicts"]?.jsonString ?? "-")")
        }
        return out.sorted()
    }
}

/// Replication between real `settee serve` processes over HTTP on loopback.
@Suite(.serialized) struct HTTPReplicationTests {
    func url(_ s: ServerProcess, _ db: String = "") -> String { "http://127.0.0.1:\(s.port)" + (db.isEmpty ? "" : "/" + db) }
    func authURL(_ s: ServerProcess, _ db: String) -> String { "http://admin:secret@127.0.0.1:\(s.port)/\(db)" }

    @Test func pushAndPullBetweenTwoServersConvergeWithConflicts() async throws {
        let dirA = TempDir(), dirB = TempDir()
        let a = try ServerProcess(dataDirectory: dirA.path), b = try ServerProcess(dataDirectory: dirB.path)
        defer { a.stop(); b.stop() }
        try await HTTP.send(.PUT, url(a, "db"))
        try await HTTP.load(url(a, "db"), prefix: "d", count: 300)
        try await HTTP.send(.PUT, url(a, "db/att"), #"{"_attachments":{"hello.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ="}}}"#)

        // Push from A (local name) to B (URL), creating the target.
        var r = try await HTTP.send(.POST, url(a, "_replicate"),
                                    #"{"source":"db","target":"\#(authURL(b, "db"))","create_target":true}"#)
        #expect(r.status == 200, "\(String(describing: r.json))")
        #expect(r.json?["ok"] == true)
        #expect(r.json?["history"]?[0]?["docs_written"] == .int(301))
        #expect(try await HTTP.docCount(url(b, "db")) == 301)
        let att = try await HTTP.send(.GET, url(b, "db/att") + "?attachments=true")
        #expect(att.json?["_attachments"]?["hello.txt"]?["data"] == "aGVsbG8gd29ybGQ=")

        // Concurrent edits of the same documents on both nodes, a delete and new documents on each.
        for i in 0..<10 {
            let id = "d" + String(format: "%06d", i)
            let docA = try await HTTP.send(.GET, url(a, "db/" + id)).json!
            let docB = try await HTTP.send(.GET, url(b, "db/" + id)).json!
            try await HTTP.send(.PUT, url(a, "db/" + id), #"{"_rev":"\#(docA["_rev"]!.stringValue!)","side":"a"}"#)
            try await HTTP.send(.PUT, url(b, "db/" + id), #"{"_rev":"\#(docB["_rev"]!.stringValue!)","side":"b","more":1}"#)
        }
        let d20 = try await HTTP.send(.GET, url(b, "db/d000020")).json!
        try await HTTP.send(.DELETE, url(b, "db/d000020?rev=" + d20["_rev"]!.stringValue!))
        try await HTTP.load(url(a, "db"), prefix: "a", count: 25)
        try await HTTP.load(url(b, "db"), prefix: "b", count: 35)

        // B pulls from A, then A pulls from B: both now hold the same trees.
        r = try await HTTP.send(.POST, url(b, "_replicate"), #"{"source":"\#(authURL(a, "db"))","target":"db"}"#)
        #expect(r.status == 200)
        r = try await HTTP.send(.POST, url(a, "_replicate"), #"{"source":"\#(authURL(b, "db"))","target":"db"}"#)
        #expect(r.status == 200)
        let fa = try await HTTP.fingerprint(url(a, "db")), fb = try await HTTP.fingerprint(url(b, "db"))
        #expect(fa == fb)
        #expect(fa.count == 361)
        #expect(fa.filter { $0.contains("_conflicts") || $0.contains("[\"") && !$0.hasSuffix("-") }.count == 10)

        // The replication counted into the node's Prometheus registry.
        let metrics = try await HTTP.raw(url(a, "_metrics"))
        #expect(metrics.contains("settee_replication_docs_written_total"))

        // Nothing new: a repeated replication finds nothing to do; its history counters add up across sessions
        // (CouchDB's), so they stay what the first run wrote.
        let written = r.json?["history"]?[0]?["docs_written"]
        r = try await HTTP.send(.POST, url(a, "_replicate"), #"{"source":"\#(authURL(b, "db"))","target":"db"}"#)
        #expect(r.json?["no_changes"] == true)
        #expect(r.json?["history"]?[0]?["docs_written"] == written)
        #expect((r.json?["history"]?.arrayValue?.count ?? 0) >= 2)

        // Errors are CouchDB-shaped.
        r = try await HTTP.send(.POST, url(a, "_replicate"), #"{"source":"nope","target":"db"}"#)
        #expect(r.status == 404)
        #expect(r.json?["error"] == "db_not_found")
        r = try await HTTP.send(.POST, url(a, "_replicate"), #"{"source":"db"}"#)
        #expect(r.status == 400)
        r = try await HTTP.send(.POST, url(a, "_replicate"),
                                #"{"source":"http://admin:wrong@127.0.0.1:\#(b.port)/db","target":"db"}"#)
        #expect(r.status == 401)
        // A source that cannot be read leaves no empty target behind.
        r = try await HTTP.send(.POST, url(a, "_replicate"),
                                #"{"source":"http://admin:wrong@127.0.0.1:\#(b.port)/db","target":"fresh","create_target":true}"#)
        #expect(r.status == 401)
        #expect(try await HTTP.send(.GET, url(a, "fresh")).status == 404)
    }

    @Test func cookieAuthenticationAndTheOpenRevsFallbackWork() async throws {
        let dirA = TempDir(), dirB = TempDir()
        let a = try ServerProcess(dataDirectory: dirA.path), b = try ServerProcess(dataDirectory: dirB.path)
        defer { a.stop(); b.stop() }
        try await HTTP.send(.PUT, url(a, "db"))
        try await HTTP.load(url(a, "db"), prefix: "c", count: 120)
        try await HTTP.send(.PUT, url(a, "db/att"), #"{"_attachments":{"a.txt":{"content_type":"text/plain","data":"aGk="}}}"#)
        // A source that (as far as the replicator knows) lacks _bulk_get, reached with a session cookie.
        let source = try RemoteEndpoint(url: url(a, "db"), authentication: .session(user: "admin", password: "secret"))
        source.session.lacksBulkGet = true
        let target = try RemoteEndpoint(url: authURL(b, "db"))
        var options = ReplicationOptions()
        options.createTarget = true
        let result = try await Replication(source: source, target: target, options: options).run()
        #expect(result.status.docsWritten == 121)
        #expect(source.session.cookie?.hasPrefix("AuthSession=") == true)
        let att = try await HTTP.send(.GET, url(b, "db/att") + "?attachments=true")
        #expect(att.json?["_attachments"]?["a.txt"]?["data"] == "aGk=")
        // The CLI with a document id filter.
        let cli = SpawnedProcess()
        cli.executableURL = URL(fileURLWithPath: builtProduct("settee"))
        cli.arguments = ["replicate", authURL(a, "db"), authURL(b, "picked"), "--create-target", "--doc-ids", "c000001,c000007",
                         "--quiet"]
        let out = Pipe()
        cli.standardOutput = out
        try cli.run()
        let report = try JSON.parse(Array(out.fileHandleForReading.readDataToEndOfFile()))
        cli.waitUntilExit()
        #expect(cli.terminationStatus == 0)
        #expect(report["docs_written"] == 2)
        #expect(try await HTTP.docCount(url(b, "picked")) == 2)

        // A continuous job that fails for good stays visible in _scheduler/jobs as failed.
        let r = try await HTTP.send(.POST, url(b, "_replicate"),
                                    #"{"source":"http://admin:nope@127.0.0.1:\#(a.port)/db","target":"picked","continuous":true}"#)
        #expect(r.status == 202)
        #expect(try await waitFor {
            let jobs = try await HTTP.send(.GET, url(b, "_scheduler/jobs")).json?["jobs"]?.arrayValue ?? []
            return jobs.contains { $0["state"] == "failed" && ($0["info"]?["error"]?.stringValue ?? "").contains("401") }
        })

        // Wrong credentials stop the replication with a clear 401.
        let wrong = try RemoteEndpoint(url: url(a, "db"), authentication: .session(user: "admin", password: "nope"))
        await #expect(throws: ReplicationError.self) { try await Replication(source: wrong, target: target).run() }
    }

    /// Attachments travel as CouchDB's replicator moves them: read with `open_revs` in multipart and written with a
    /// multipart `PUT ?new_edits=false`, bodies as the source stores them — a gzip-stored text stays gzip on a target
    /// that wouldn't compress it itself — and a later edit that keeps them doesn't send them again.
    @Test func attachmentsReplicateAsStoredThroughMultipart() async throws {
        let dirA = TempDir(), dirB = TempDir()
        let a = try ServerProcess(dataDirectory: dirA.path), b = try ServerProcess(dataDirectory: dirB.path)
        defer { a.stop(); b.stop() }
        try await HTTP.send(.PUT, url(a, "db"))
        try await HTTP.send(.PUT, url(b, "db"))
        // B stores what it is given as it is: no compression of its own.
        #expect(try await HTTP.send(.PUT, url(b, "_node/_local/_config/attachments/compression_level"), #""0""#).status == 200)
        let text = String(repeating: "All work and no play makes Jack a dull boy. ", count: 3000)
        let binary = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
        let put = try await HTTP.send(.PUT, url(a, "db/doc"), JSON.object([
            "n": 1,
            "_attachments": ["readme.txt": ["content_type": "text/plain", "data": .string(Base64.encode(Array(text.utf8)))],
                             "blob.bin": ["content_type": "application/octet-stream", "data": .string(Base64.encode(binary))]],
        ]).jsonString)
        #expect(put.status == 201)
        try await HTTP.load(url(a, "db"), prefix: "p", count: 30)

        let source = try RemoteEndpoint(url: authURL(a, "db")), target = try RemoteEndpoint(url: authURL(b, "db"))
        var result = try await Replication(source: source, target: target).run()
        #expect(result.status.docsWritten == 31)
        #expect(result.status.docWriteFailures == 0)
        let stored = try await HTTP.send(.GET, url(b, "db/doc") + "?att_encoding_info=true")
        let readme = stored.json?["_attachments"]?["readme.txt"]
        #expect(readme?["encoding"] == "gzip")
        #expect((readme?["encoded_length"]?.intValue ?? .max) < (readme?["length"]?.intValue ?? 0))
        #expect(readme?["length"] == .int(Int64(text.utf8.count)))
        #expect(stored.json?["_attachments"]?["blob.bin"]?["encoding"] == nil)
        // Same digests as the source's, and the same bytes back.
        let original = try await HTTP.send(.GET, url(a, "db/doc"))
        for name in ["readme.txt", "blob.bin"] {
            #expect(stored.json?["_attachments"]?[name]?["digest"] == original.json?["_attachments"]?[name]?["digest"])
        }
        let copy = try await HTTP.send(.GET, url(b, "db/doc") + "?attachments=true")
        #expect(copy.json?["_attachments"]?["readme.txt"]?["data"]?.stringValue == Base64.encode(Array(text.utf8)))
        #expect(copy.json?["_attachments"]?["blob.bin"]?["data"]?.stringValue == Base64.encode(binary))

        // An edit that keeps the attachments: the target has them (atts_since), so only the document travels.
        let rev = original.json!["_rev"]!.stringValue!
        let stubs = original.json!["_attachments"]!
        #expect(try await HTTP.send(.PUT, url(a, "db/doc"),
                                    JSON.object(["_rev": .string(rev), "n": 2, "_attachments": stubs]).jsonString).status == 201)
        result = try await Replication(source: source, target: target).run()
        #expect(result.status.docsWritten == 1)
        let edited = try await HTTP.send(.GET, url(b, "db/doc") + "?attachments=true&att_encoding_info=true")
        #expect(edited.json?["n"] == 2)
        #expect(edited.json?["_attachments"]?["readme.txt"]?["data"]?.stringValue == Base64.encode(Array(text.utf8)))
        #expect(try await HTTP.fingerprint(url(a, "db")) == HTTP.fingerprint(url(b, "db")))
    }

    @Test func aKilledReplicationResumesFromItsCheckpoint() async throws {
        let dirA = TempDir(), dirB = TempDir()
        let a = try ServerProcess(dataDirectory: dirA.path), b = try ServerProcess(dataDirectory: dirB.path)
        defer { a.stop(); b.stop() }
        try await HTTP.send(.PUT, url(a, "db"))
        try await HTTP.send(.PUT, url(b, "db"))
        let total = 30_000
        try await HTTP.load(url(a, "db"), prefix: "k", count: total)

        let cli = SpawnedProcess()
        cli.executableURL = URL(fileURLWithPath: builtProduct("settee"))
        cli.arguments = ["replicate", authURL(a, "db"), authURL(b, "db"), "--batch-size", "500", "--quiet"]
        cli.standardOutput = FileHandle.nullDevice
        try cli.run()
        var partial = 0
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            partial = try await HTTP.docCount(url(b, "db"))
            if partial >= 3000 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(cli.processIdentifier, SIGKILL)
        cli.waitUntilExit()
        // A `_bulk_docs` already received by the target still completes after the client dies: count once the
        // target has settled.
        var atKill = try await HTTP.docCount(url(b, "db"))
        for _ in 0..<50 {
            try await Task.sleep(for: .milliseconds(200))
            let now = try await HTTP.docCount(url(b, "db"))
            if now == atKill { break }
            atKill = now
        }
        try #require(atKill < total, "the replication finished before it could be killed")

        let resumed = SpawnedProcess()
        resumed.executableURL = URL(fileURLWithPath: builtProduct("settee"))
        resumed.arguments = ["replicate", authURL(a, "db"), authURL(b, "db"), "--batch-size", "500", "--quiet"]
        let out = Pipe()
        resumed.standardOutput = out
        try resumed.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        resumed.waitUntilExit()
        #expect(resumed.terminationStatus == 0)
        let report = try JSON.parse(Array(data))
        let written = Int(report["docs_written"]?.intValue ?? -1)
        let checked = Int(report["missing_checked"]?.intValue ?? -1)
        #expect(written == total - atKill)
        // Resumed from the checkpoint: only the batch in flight at the kill is looked at again.
        #expect(checked - written <= 500, "re-checked \(checked - written) revisions")
        #expect(checked < total)
        #expect(try await HTTP.docCount(url(b, "db")) == total)
    }

    @Test func aContinuousReplicationCatchesUpWhenThePeerComesBack() async throws {
        let dirA = TempDir(), dirB = TempDir()
        let a = try ServerProcess(dataDirectory: dirA.path)
        var b = try ServerProcess(dataDirectory: dirB.path)
        defer { a.stop(); b.stop() }
        let portB = b.port
        try await HTTP.send(.PUT, url(a, "db"))
        var r = try await HTTP.send(.POST, url(a, "_replicate"),
                                    #"{"source":"db","target":"\#(authURL(b, "db"))","continuous":true,"create_target":true}"#)
        #expect(r.status == 202)
        let localID = try #require(r.json?["_local_id"]?.stringValue)
        #expect(localID.hasSuffix("+continuous+create_target"))
        try await HTTP.load(url(a, "db"), prefix: "x", count: 50)
        #expect(try await waitFor { try await HTTP.docCount(url(b, "db")) == 50 })
        let tasks = try await HTTP.send(.GET, url(a, "_active_tasks")).json?.arrayValue ?? []
        #expect(tasks.contains { $0["type"] == "replication" && $0["replication_id"]?.stringValue == localID })

        b.kill9()
        try await HTTP.load(url(a, "db"), prefix: "y", count: 70)
        try await Task.sleep(for: .milliseconds(500))
        b = try ServerProcess(dataDirectory: dirB.path, port: portB)
        #expect(try await waitFor(seconds: 90) { try await HTTP.docCount(url(b, "db")) == 120 })

        r = try await HTTP.send(.POST, url(a, "_replicate"), #"{"replication_id":"\#(localID)","cancel":true}"#)
        #expect(r.status == 200)
        r = try await HTTP.send(.POST, url(a, "_replicate"), #"{"replication_id":"\#(localID)","cancel":true}"#)
        #expect(r.status == 404)
    }

    @Test func replicatorDatabaseJobsRunAndRecordTheirState() async throws {
        let dirA = TempDir(), dirB = TempDir()
        let a = try ServerProcess(dataDirectory: dirA.path)
        var b = try ServerProcess(dataDirectory: dirB.path)
        defer { a.stop(); b.stop() }
        try await HTTP.send(.PUT, url(a, "src"))
        try await HTTP.load(url(a, "src"), prefix: "r", count: 40)
        try await HTTP.send(.PUT, url(b, "_replicator"))
        try await HTTP.send(.PUT, url(b, "_replicator/once"),
                            #"{"source":"\#(authURL(a, "src"))","target":"copy","create_target":true}"#)
        try await HTTP.send(.PUT, url(b, "_replicator/live"),
                            #"{"source":"\#(authURL(a, "src"))","target":"live","create_target":true,"continuous":true}"#)
        #expect(try await waitFor {
            try await HTTP.send(.GET, url(b, "_replicator/once")).json?["_replication_state"] == "completed"
        })
        let once = try await HTTP.send(.GET, url(b, "_replicator/once")).json
        #expect(once?["_replication_stats"]?["docs_written"] == .int(40))
        #expect(try await HTTP.docCount(url(b, "copy")) == 40)
        #expect(try await waitFor { try await HTTP.docCount(url(b, "live")) == 40 })
        let docs = try await HTTP.send(.GET, url(b, "_scheduler/docs")).json
        #expect(docs?["docs"]?.arrayValue?.count == 2)

        // Restarted, the node picks its persistent continuous job up again; the completed one stays done.
        let port = b.port
        b.stop()
        try await HTTP.load(url(a, "src"), prefix: "s", count: 10)
        b = try ServerProcess(dataDirectory: dirB.path, port: port)
        #expect(try await waitFor { try await HTTP.docCount(url(b, "live")) == 50 })
        #expect(try await HTTP.docCount(url(b, "copy")) == 40)

        // An invalid job document is marked failed once, not rewritten over and over.
        try await HTTP.send(.PUT, url(b, "_replicator/bad"), #"{"source":"no_such_db","target":"x"}"#)
        #expect(try await waitFor {
            try await HTTP.send(.GET, url(b, "_replicator/bad")).json?["_replication_state"] == "failed"
        })
        try await Task.sleep(for: .seconds(1))
        let bad = try await HTTP.send(.GET, url(b, "_replicator/bad")).json
        #expect(bad?["_rev"]?.stringValue?.hasPrefix("2-") == true, "\(String(describing: bad?["_rev"]))")
        #expect(bad?["_replication_state_reason"] != nil)

        // Deleting the document stops the job.
        let live = try await HTTP.send(.GET, url(b, "_replicator/live")).json!
        try await HTTP.send(.DELETE, url(b, "_replicator/live?rev=" + live["_rev"]!.stringValue!))
        #expect(try await waitFor {
            (try await HTTP.send(.GET, url(b, "_active_tasks")).json?.arrayValue ?? []).isEmpty
        })
    }

    @Test func peersInARingAndInAMeshConverge() async throws {
        for topology in ["ring", "mesh"] {
            let dirs = [TempDir(), TempDir(), TempDir()]
            let ports = [freePort(), freePort(), freePort()]
            func peers(_ i: Int) -> [String] {
                let others = topology == "ring" ? [(i + 1) % 3] : [0, 1, 2].filter { $0 != i }
                return others.flatMap { ["--peer", "http://admin:secret@127.0.0.1:\(ports[$0])"] }
            }
            let nodes = try (0..<3).map {
                try ServerProcess(dataDirectory: dirs[$0].path, port: ports[$0],
                                  extraArguments: peers($0) + ["--peer-scan-interval", "1"])
            }
            defer { nodes.forEach { $0.stop() } }
            try await HTTP.send(.PUT, url(nodes[0], "shared"))
            // The database reaches every node (created there by a peer's scan) before anything is written.
            for node in nodes.dropFirst() {
                #expect(try await waitFor { try await HTTP.send(.GET, url(node, "shared")).status == 200 })
            }
            for (i, node) in nodes.enumerated() {
                try await HTTP.load(url(node, "shared"), prefix: "n\(i)-", count: 100)
                // Three concurrent creations of one document (explicit revisions, so none is refused as a
                // conflict by a node that already received another).
                let r = try await HTTP.send(.POST, url(node, "shared/_bulk_docs"),
                                            #"{"new_edits":false,"docs":[{"_id":"contested","_rev":"1-\#(i)\#(i)\#(i)","by":\#(i)}]}"#)
                #expect(r.status == 201)
            }
            let started = Date()
            #expect(try await waitFor(seconds: 60) {
                var counts: [Int] = []
                for node in nodes { counts.append(try await HTTP.docCount(url(node, "shared"))) }
                return counts == [301, 301, 301]
            }, "\(topology): every node gets every document")
            print("\(topology): converged in \(Date().timeIntervalSince(started)) s")
            // All three creations of "contested" survive as conflicts, with one winner everywhere.
            #expect(try await waitFor(seconds: 30) {
                let prints = try await nodes.asyncMap { try await HTTP.fingerprint(url($0, "shared")) }
                return prints[0] == prints[1] && prints[1] == prints[2]
            }, "\(topology): identical trees")
            let contested = try await HTTP.send(.GET, url(nodes[1], "shared/contested?conflicts=true")).json
            #expect(contested?["_conflicts"]?.arrayValue?.count == 2)
        }
    }
}

func waitFor(seconds: Double = 30, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if (try? await condition()) == true { return true }
        try await Task.sleep(for: .milliseconds(100))
    }
    return try await condition()
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for e in self { out.append(try await transform(e)) }
        return out
    }
}
