import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SetteeStore
import SetteeCore
import SetteeTestSupport
import Testing

/// Couchbase Lite C 3.2.4's own replicator (`cbl-sync`, ../shared/cblite) against a `settee serve` process over
/// `ws://…/{db}/_blipsync`: push, pull, updates and deletions both ways, continuous mode, 10,000 documents, a
/// reader-only user refused on push, and blobs both ways (a blob is a CouchDB attachment, an attachment a blob).
///
/// `cbl-sync` is built with gcc into a temporary folder at test time (`tools/build.sh`). The tests skip, saying
/// why, only where the library is absent or cannot load on this machine.
@Suite(.serialized) struct CouchbaseLiteSyncTests {
    /// The Couchbase Lite C folder: `$SETTEE_CBLITE`, else `../shared/cblite` beside the checkout, else /work/shared/cblite.
    static let libraryFolder: String? = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates = [ProcessInfo.processInfo.environment["SETTEE_CBLITE"],
                          root.deletingLastPathComponent().appendingPathComponent("shared/cblite").path,
                          "/work/shared/cblite"].compactMap { $0 }
        return candidates.first { FileManager.default.fileExists(atPath: $0 + "/tools/build.sh") }
    }()

    /// `cbl-sync`, built once per test run, or why it can't run here.
    static let tool: Result<String, ServerProcessError> = {
        guard let folder = libraryFolder else {
            return .failure(ServerProcessError(message: "Couchbase Lite C is not at ../shared/cblite (or $SETTEE_CBLITE)"))
        }
        let out = NSTemporaryDirectory() + "settee-cbl-tools-" + UUID().uuidString
        do {
            let printed = try runTool("/bin/bash", [folder + "/tools/build.sh", out])
            let path = printed.split(separator: "\n").last.map(String.init) ?? out
            let tool = path + "/cbl-sync"
            // A local-only run: loads the library and opens a database.
            let probe = NSTemporaryDirectory() + "settee-cbl-probe-" + UUID().uuidString
            defer { try? FileManager.default.removeItem(atPath: probe) }
            _ = try runTool(tool, ["--db", probe, "--list"])
            return .success(tool)
        } catch let error as ServerProcessError {
            return .failure(error)
        } catch {
            return .failure(ServerProcessError(message: "\(error)"))
        }
    }()

    static var available: Bool {
        if case .success = tool { return true }
        if case .failure(let error) = tool { print("CouchbaseLiteSyncTests skipped: cbl-sync cannot run here: \(error)") }
        return false
    }

    static let auth: HTTPFields = [.authorization: "Basic " + Base64.encode(Array("admin:secret".utf8)),
                                   .contentType: "application/json"]

    /// What one `cbl-sync` run printed: its events, and the documents it listed.
    struct Run {
        let events: [JSON]
        var documents: [String: JSON] {
            var out: [String: JSON] = [:]
            for event in events where event["event"]?.stringValue == "doc" {
                if let id = event["id"]?.stringValue { out[id] = event }
            }
            return out
        }
        var done: JSON? { events.last { $0["event"]?.stringValue == "replicator_done" } }
    }

    /// Runs `cbl-sync` with `arguments` against `db` on `server`; a non-zero exit throws with its output.
    static func sync(_ server: ServerProcess, _ db: String, client: String, user: String = "admin",
                     password: String = "secret", _ arguments: [String]) async throws -> Run {
        let tool = try tool.get()
        let args = ["--db", client, "--url", "ws://127.0.0.1:\(server.port)/\(db)", "--user", user, "--password", password,
                    "--timeout", "300"] + arguments
        let output = try await offThePool { try runTool(tool, args) }
        return Run(events: output.split(separator: "\n").compactMap { try? JSON.parse(String($0)) })
    }

    /// Runs `cbl-sync` expecting it to fail (a non-zero exit); returns what it printed.
    static func failingSync(_ server: ServerProcess, _ db: String, client: String, _ arguments: [String]) async throws -> Run {
        do {
            _ = try await sync(server, db, client: client, arguments)
        } catch let error as ServerProcessError {
            return Run(events: error.message.split(separator: "\n").compactMap { line in
                (line.firstIndex(of: "{")).flatMap { try? JSON.parse(String(line[$0...])) }
            })
        }
        Issue.record("cbl-sync \(arguments) succeeded")
        return Run(events: [])
    }

    static func http(_ server: ServerProcess, _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil,
                     headers: HTTPFields = auth) async throws -> (Int, JSON?) {
        let client = TestClient(host: "127.0.0.1", port: server.port, configuration: .init(timeout: .seconds(60)))
        client.connect()
        defer { Task { try? await client.shutdown() } }
        let response = try await client.execute(.init(uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }))
        let bytes = response.body.map { Array($0.readableBytesView) } ?? []
        return (Int(response.status.code), try? JSON.parse(bytes))
    }

    /// A GET's status, headers and raw body.
    static func raw(_ server: ServerProcess, _ uri: String) async throws -> (status: Int, headers: HTTPFields, body: [UInt8]) {
        let client = TestClient(host: "127.0.0.1", port: server.port, configuration: .init(timeout: .seconds(60)))
        client.connect()
        defer { Task { try? await client.shutdown() } }
        let response = try await client.execute(.init(uri, method: .get, headers: auth, body: nil))
        return (Int(response.status.code), response.headers, response.body.map { Array($0.readableBytesView) } ?? [])
    }

    /// PUTs raw bytes (an attachment) with a content type; returns the status and the answer.
    static func putBytes(_ server: ServerProcess, _ uri: String, _ bytes: [UInt8], type: String) async throws -> (Int, JSON?) {
        let client = TestClient(host: "127.0.0.1", port: server.port, configuration: .init(timeout: .seconds(60)))
        client.connect()
        defer { Task { try? await client.shutdown() } }
        var headers = auth
        headers[.contentType] = type
        let response = try await client.execute(.init(uri, method: .put, headers: headers, body: ByteBuffer(bytes: bytes)))
        return (Int(response.status.code), try? JSON.parse(response.body.map { Array($0.readableBytesView) } ?? []))
    }

    /// Couchbase Lite's name for bytes: `sha1-` + base64 of their SHA-1.
    static func sha1(_ bytes: [UInt8]) -> String { "sha1-" + Base64.encode(Array(Insecure.SHA1.hash(data: bytes))) }

    /// `count` seeded random bytes (incompressible, like a photo).
    static func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 8)
        while bytes.count < count { withUnsafeBytes(of: generator.next()) { bytes += $0 } }
        return Array(bytes.prefix(count))
    }

    /// Writes `bytes` to a file named `name` in `folder`; returns its path.
    static func file(_ folder: TempDir, _ name: String, _ bytes: [UInt8]) throws -> String {
        let path = folder.path + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(.enabled(if: available)) func pushPullUpdateAndDeleteBothWays() async throws {
        let dir = TempDir(), a = TempDir(), b = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/cbl").0 == 201)

        // Push: 100 documents created by Couchbase Lite arrive with their bodies and revision ids.
        let pushed = try await Self.sync(server, "cbl", client: a.path, ["--create", "100", "--push", "--list"])
        #expect(pushed.done?["ok"]?.boolValue == true)
        let (_, all) = try await Self.http(server, .get, "/cbl/_all_docs?include_docs=true")
        #expect(all?["total_rows"]?.intValue == 100)
        let (_, first) = try await Self.http(server, .get, "/cbl/doc-000001")
        #expect(first?["n"]?.intValue == 1 && first?["type"]?.stringValue == "cbl")
        #expect(first?["_rev"]?.stringValue == pushed.documents["doc-000001"]?["rev"]?.stringValue)

        // Pull: documents written over CouchDB's API reach a fresh Couchbase Lite database, with the pushed ones.
        let docs = (1...5).map { #"{"_id":"couch-\#($0)","from":"couchdb","i":\#($0)}"# }.joined(separator: ",")
        #expect(try await Self.http(server, .post, "/cbl/_bulk_docs", #"{"docs":[\#(docs)]}"#).0 == 201)
        let pulled = try await Self.sync(server, "cbl", client: b.path, ["--pull", "--list"])
        #expect(pulled.done?["ok"]?.boolValue == true)
        #expect(pulled.documents.count == 105)
        #expect(pulled.documents["couch-3"]?["body"]?["from"]?.stringValue == "couchdb")
        #expect(pulled.documents["doc-000050"]?["body"]?["n"]?.intValue == 50)

        // Update and delete from Couchbase Lite: pushed to Settee.
        _ = try await Self.sync(server, "cbl", client: a.path, ["--update-all", "--delete", "doc-000002", "--push"])
        let (_, updated) = try await Self.http(server, .get, "/cbl/doc-000003")
        #expect(updated?["n"]?.intValue == 1003)
        #expect(try await Self.http(server, .get, "/cbl/doc-000002").0 == 404)

        // Update and delete over CouchDB's API: pulled into Couchbase Lite.
        let (_, couch1) = try await Self.http(server, .get, "/cbl/couch-1")
        let rev1 = couch1?["_rev"]?.stringValue ?? ""
        #expect(try await Self.http(server, .put, "/cbl/couch-1", #"{"_rev":"\#(rev1)","from":"couchdb","i":100}"#).0 == 201)
        let (_, couch2) = try await Self.http(server, .get, "/cbl/couch-2")
        #expect(try await Self.http(server, .delete, "/cbl/couch-2?rev=\(couch2?["_rev"]?.stringValue ?? "")").0 == 200)
        let again = try await Self.sync(server, "cbl", client: b.path, ["--pull", "--list"])
        #expect(again.documents["couch-1"]?["body"]?["i"]?.intValue == 100)
        #expect(again.documents["couch-2"] == nil)
        #expect(again.documents["doc-000002"] == nil)
        #expect(again.documents["doc-000003"]?["body"]?["n"]?.intValue == 1003)
        #expect(again.documents.count == 103)
    }

    @Test(.enabled(if: available)) func continuousSyncStopsWhenIdle() async throws {
        let dir = TempDir(), a = TempDir(), b = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/live").0 == 201)
        let pushed = try await Self.sync(server, "live", client: a.path, ["--create", "20", "--continuous"])
        #expect(pushed.done?["ok"]?.boolValue == true && pushed.done?["went_idle"]?.boolValue == true)
        let pulled = try await Self.sync(server, "live", client: b.path, ["--pull", "--continuous", "--list"])
        #expect(pulled.done?["went_idle"]?.boolValue == true)
        #expect(pulled.documents.count == 20)
    }

    @Test(.enabled(if: available)) func tenThousandDocumentsBothWays() async throws {
        let dir = TempDir(), a = TempDir(), b = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/big").0 == 201)
        let pushed = try await Self.sync(server, "big", client: a.path, ["--create", "10000", "--push"])
        #expect(pushed.done?["ok"]?.boolValue == true)
        let (_, info) = try await Self.http(server, .get, "/big")
        #expect(info?["doc_count"]?.intValue == 10_000)
        let pulled = try await Self.sync(server, "big", client: b.path, ["--pull"])
        #expect(pulled.done?["ok"]?.boolValue == true)
        #expect(pulled.done?["documents_ok"]?.intValue == 10_000)
    }

    @Test(.enabled(if: available)) func readerOnlyUserPullsButCannotPush() async throws {
        let dir = TempDir(), a = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/ro").0 == 201)
        #expect(try await Self.http(server, .put, "/_users/org.couchdb.user:reader",
                                    #"{"name":"reader","password":"pw","roles":[],"type":"user"}"#).0 == 201)
        #expect(try await Self.http(server, .put, "/ro/_security",
                                    #"{"readers":{"names":["reader"]},"members":{"names":["someone"]}}"#).0 == 200)
        #expect(try await Self.http(server, .put, "/ro/seed", #"{"x":1}"#).0 == 201)
        let pulled = try await Self.sync(server, "ro", client: a.path, user: "reader", password: "pw", ["--pull", "--list"])
        #expect(pulled.documents["seed"] != nil)
        await #expect(throws: ServerProcessError.self) {
            _ = try await Self.sync(server, "ro", client: a.path, user: "reader", password: "pw", ["--create", "3", "--push"])
        }
        let (_, info) = try await Self.http(server, .get, "/ro")
        #expect(info?["doc_count"]?.intValue == 1)
    }

    /// Both sides edit the same revision: the push is refused with 409 (as Sync Gateway refuses it), Couchbase Lite
    /// pulls the server's revision and resolves the conflict, and its resolution reaches Settee and a third client.
    @Test(.enabled(if: available)) func conflictingEditsResolveTheSameEverywhere() async throws {
        let dir = TempDir(), a = TempDir(), b = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/cf").0 == 201)
        _ = try await Self.sync(server, "cf", client: a.path, ["--create", "2", "--push"])
        let (_, doc) = try await Self.http(server, .get, "/cf/doc-000001")
        let rev = doc?["_rev"]?.stringValue ?? ""
        #expect(try await Self.http(server, .put, "/cf/doc-000001", #"{"_rev":"\#(rev)","n":555,"server":true}"#).0 == 201)
        // Couchbase Lite edits its copy of the same revision: the push of that document is refused as a conflict.
        let refused = try await Self.failingSync(server, "cf", client: a.path, ["--update-all", "--push"])
        #expect(refused.done?["documents_failed"]?.intValue == 1)
        let conflict = refused.events.first { $0["event"]?.stringValue == "document" && $0["id"]?.stringValue == "doc-000001" }
        #expect(conflict?["error"]?["code"]?.intValue == 409)
        // Pull (Couchbase Lite resolves), then push the resolution.
        _ = try await Self.sync(server, "cf", client: a.path, ["--pull"])
        let resolved = try await Self.sync(server, "cf", client: a.path, ["--push", "--list"])
        let winner = try #require(resolved.documents["doc-000001"]?["rev"]?.stringValue)
        let (_, atServer) = try await Self.http(server, .get, "/cf/doc-000001?conflicts=true")
        #expect(atServer?["_rev"]?.stringValue == winner)
        #expect(atServer?["_conflicts"] == nil)
        let third = try await Self.sync(server, "cf", client: b.path, ["--pull", "--list"])
        #expect(third.documents["doc-000001"]?["rev"]?.stringValue == winner)
        #expect(third.documents["doc-000001"]?["body"] == resolved.documents["doc-000001"]?["body"])
    }

    /// A pull cut off part way (the client gives up after a second) resumes from its checkpoint: the next run
    /// pulls only what the first did not.
    @Test(.enabled(if: available)) func interruptedPullResumesFromItsCheckpoint() async throws {
        let dir = TempDir(), a = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/resume").0 == 201)
        for batch in 0..<20 {
            let docs = (0..<1000).map { #"{"_id":"r-\#(batch)-\#($0)","batch":\#(batch),"i":\#($0),"text":"some text to pull"}"# }
            #expect(try await Self.http(server, .post, "/resume/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#).0 == 201)
        }
        let first = try await Self.failingSync(server, "resume", client: a.path, ["--pull", "--timeout", "1"])
        let pulledFirst = first.done?["documents_ok"]?.intValue ?? 0
        try #require(first.done?["timed_out"]?.boolValue == true, "the first pull finished within a second; nothing to resume")
        let second = try await Self.sync(server, "resume", client: a.path, ["--pull", "--list"])
        #expect(second.documents.count == 20_000)
        let pulledSecond = second.done?["documents_ok"]?.intValue ?? 0
        #expect(pulledSecond < 20_000, "the second pull started over (first pulled \(pulledFirst))")
        #expect(pulledFirst + pulledSecond >= 20_000)
    }

    /// Writes over BLIP pass the database's write rules: a `validate_doc_update` refusal reaches Couchbase Lite as
    /// that document's 403, and the other documents are written.
    @Test(.enabled(if: available)) func validateDocUpdateRefusesAPushedDocument() async throws {
        let dir = TempDir(), a = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/v").0 == 201)
        let rule = #"function(newDoc, oldDoc, userCtx) { if (newDoc.n === 3) throw({forbidden: 'no threes'}); }"#
        #expect(try await Self.http(server, .put, "/v/_design/rules", #"{"validate_doc_update":"\#(rule)"}"#).0 == 201)
        let run = try await Self.failingSync(server, "v", client: a.path, ["--create", "5", "--push"])
        let refused = run.events.first { $0["event"]?.stringValue == "document" && $0["error"] != nil }
        #expect(refused?["id"]?.stringValue == "doc-000003")
        #expect(refused?["error"]?["code"]?.intValue == 403)
        #expect(try await Self.http(server, .get, "/v/doc-000003").0 == 404)
        #expect(try await Self.http(server, .get, "/v/doc-000004").0 == 200)
    }

    /// A 2.5 MB document crosses both ways: many BLIP frames, compressed, paced by acknowledgements on both sides.
    @Test(.enabled(if: available)) func largeDocumentCrossesBothWays() async throws {
        let dir = TempDir(), a = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/from").0 == 201)
        #expect(try await Self.http(server, .put, "/to").0 == 201)
        var generator = SeededGenerator(seed: 46)
        let items = (0..<40_000).map { i -> String in
            let word = String((0..<20).map { _ in "abcdefghij".randomElement(using: &generator)! })
            return #"{"i":\#(i),"r":\#(Int.random(in: 0..<1_000_000, using: &generator)),"s":"\#(word)"}"#
        }
        #expect(try await Self.http(server, .put, "/from/huge", #"{"items":[\#(items.joined(separator: ","))]}"#).0 == 201)
        let pulled = try await Self.sync(server, "from", client: a.path, ["--pull", "--list"])
        #expect(pulled.documents["huge"]?["body"]?["items"]?.arrayValue?.count == 40_000)
        _ = try await Self.sync(server, "to", client: a.path, ["--push"])
        let (_, original) = try await Self.http(server, .get, "/from/huge")
        let (_, copy) = try await Self.http(server, .get, "/to/huge")
        #expect(copy?["items"] == original?["items"])
        #expect(copy?["_rev"] == original?["_rev"])
    }

    /// Couchbase Lite clients on two Settee nodes that replicate with each other over CouchDB's protocol: edits made
    /// on either side (a Couchbase Lite push, a CouchDB-API write, a deletion) reach every database with the same
    /// revisions.
    @Test(.enabled(if: available)) func couchbaseLiteAndCouchDBProtocolClientsConverge() async throws {
        let dirA = TempDir(), dirB = TempDir(), a = TempDir(), b = TempDir()
        let nodeA = try ServerProcess(dataDirectory: dirA.path)
        defer { nodeA.stop() }
        let nodeB = try ServerProcess(dataDirectory: dirB.path)
        defer { nodeB.stop() }
        #expect(try await Self.http(nodeA, .put, "/shared").0 == 201)
        #expect(try await Self.http(nodeB, .put, "/shared").0 == 201)
        func replicate() async throws {
            let urlA = "http://admin:secret@127.0.0.1:\(nodeA.port)/shared"
            let urlB = "http://admin:secret@127.0.0.1:\(nodeB.port)/shared"
            #expect(try await Self.http(nodeB, .post, "/_replicate", #"{"source":"\#(urlA)","target":"shared"}"#).0 == 200)
            #expect(try await Self.http(nodeA, .post, "/_replicate", #"{"source":"\#(urlB)","target":"shared"}"#).0 == 200)
        }
        // Couchbase Lite pushes to A; a CouchDB-API client writes to B.
        _ = try await Self.sync(nodeA, "shared", client: a.path, ["--create", "10", "--push"])
        #expect(try await Self.http(nodeB, .put, "/shared/from-couch", #"{"via":"couchdb"}"#).0 == 201)
        try await replicate()
        // The second Couchbase Lite client pulls everything from B, edits, deletes and pushes back to B.
        let pulled = try await Self.sync(nodeB, "shared", client: b.path, ["--pull", "--list"])
        #expect(pulled.documents.count == 11)
        _ = try await Self.sync(nodeB, "shared", client: b.path, ["--update-all", "--delete", "doc-000005", "--push"])
        try await replicate()
        // The first client pulls from A and sees B's client's edits; A and B agree document by document.
        let final = try await Self.sync(nodeA, "shared", client: a.path, ["--pull", "--list"])
        #expect(final.documents.count == 10)
        #expect(final.documents["doc-000005"] == nil)
        #expect(final.documents["doc-000001"]?["body"]?["n"]?.intValue == 1001)
        #expect(final.documents["from-couch"]?["body"]?["n"]?.intValue == 1000)
        let (_, allA) = try await Self.http(nodeA, .get, "/shared/_all_docs")
        let (_, allB) = try await Self.http(nodeB, .get, "/shared/_all_docs")
        #expect(allA?["rows"] == allB?["rows"])
        for (id, doc) in final.documents {
            let (_, atA) = try await Self.http(nodeA, .get, "/shared/\(id)")
            #expect(atA?["_rev"]?.stringValue == doc["rev"]?.stringValue, "\(id)")
        }
    }

    // MARK: Blobs and attachments

    /// A blob Couchbase Lite pushes is the CouchDB attachment `blob_/attachment` with its bytes and content type;
    /// another Couchbase Lite client pulls the same body back, and Settee's Swift API reads the same blob.
    @Test(.enabled(if: available)) func pushedBlobIsACouchDBAttachmentWithTheSameBytes() async throws {
        let dir = TempDir(), a = TempDir(), b = TempDir(), files = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/blobs").0 == 201)
        let picture = Self.randomBytes(3000, seed: 46), note = Array("hello blob, hello attachment".utf8)
        let pushed = try await Self.sync(server, "blobs", client: a.path, [
            "--blob", "photo:" + (try Self.file(files, "pic.png", picture)),
            "--blob", "memo:" + (try Self.file(files, "note.txt", note)), "--push", "--list"])
        #expect(pushed.done?["documents_ok"]?.intValue == 2)
        let attached = pushed.events.filter { $0["event"]?.stringValue == "blob_attached" }
        #expect(attached.first { $0["id"] == "photo" }?["digest"]?.stringValue == Self.sha1(picture))

        for (id, bytes, type) in [("photo", picture, "image/png"), ("memo", note, "text/plain")] {
            let (status, headers, body) = try await Self.raw(server, "/blobs/\(id)/blob_%2Fattachment")
            #expect(status == 200 && body == bytes, "\(id)")
            #expect(headers[.contentType] == type)
            let (_, doc) = try await Self.http(server, .get, "/blobs/\(id)?attachments=true")
            let attachment = doc?["_attachments"]?["blob_/attachment"]
            #expect(attachment?["content_type"]?.stringValue == type)
            #expect(attachment?["data"]?.stringValue.flatMap(Base64.decode) == bytes)
            // The blob in the body names the stored attachment by CouchDB's digest, as the Swift API stores blobs.
            #expect(doc?["attachment"]?["@type"] == "blob" && doc?["attachment"]?["length"]?.intValue == Int64(bytes.count))
            #expect(doc?["attachment"]?["digest"] == attachment?["digest"])
            #expect(doc?["attachment"]?["digest"]?.stringValue?.hasPrefix("md5-") == true)
        }
        // Pulled by a fresh client: the very body Couchbase Lite pushed (SHA-1 names), the bytes fetched from Settee.
        let pulled = try await Self.sync(server, "blobs", client: b.path, ["--pull", "--list"])
        #expect(pulled.done?["documents_ok"]?.intValue == 2)
        for id in ["photo", "memo"] {
            #expect(pulled.documents[id]?["body"] != nil && pulled.documents[id]?["body"] == pushed.documents[id]?["body"], "\(id)")
            #expect(pulled.documents[id]?["rev"] == pushed.documents[id]?["rev"])
        }
        server.stop()
        let database = try Database(name: "blobs", config: DatabaseConfiguration(directory: dir.path))
        let blob = try database.defaultCollection().document(id: "photo")?.blob(forKey: "attachment")
        #expect(blob?.content == Data(picture) && blob?.contentType == "image/png")
        database.close()
    }

    /// Attachments written over CouchDB's API reach Couchbase Lite as it reads attachments (its `_attachments`,
    /// SHA-1 digests, the bytes fetched with `getAttachment`); pushed on to another database, they arrive intact,
    /// which proves Couchbase Lite held the bytes.
    @Test(.enabled(if: available)) func attachmentWrittenOverCouchDBReachesCouchbaseLite() async throws {
        let dir = TempDir(), a = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/atts").0 == 201)
        #expect(try await Self.http(server, .put, "/copy").0 == 201)
        let chart = Self.randomBytes(5000, seed: 7)
        let readme = Array(String(repeating: "text that compresses, so it is stored gzipped. ", count: 40).utf8)
        let (_, created) = try await Self.http(server, .put, "/atts/report", #"{"title":"q3"}"#)
        let (_, second) = try await Self.putBytes(server, "/atts/report/chart.png?rev=\(created?["rev"]?.stringValue ?? "")", chart, type: "image/png")
        #expect(try await Self.putBytes(server, "/atts/report/readme.txt?rev=\(second?["rev"]?.stringValue ?? "")", readme,
                                        type: "text/plain").0 == 201)
        let pulled = try await Self.sync(server, "atts", client: a.path, ["--pull", "--list"])
        let body = try #require(pulled.documents["report"]?["body"])
        #expect(body["title"] == "q3")
        #expect(body["_attachments"]?["chart.png"] == ["content_type": "image/png", "digest": .string(Self.sha1(chart)),
                                                       "length": .int(Int64(chart.count)), "revpos": 2, "stub": true])
        #expect(body["_attachments"]?["readme.txt"]?["digest"]?.stringValue == Self.sha1(readme))
        #expect(body["_attachments"]?["readme.txt"]?["length"]?.intValue == Int64(readme.count))

        _ = try await Self.sync(server, "copy", client: a.path, ["--push"])
        #expect(try await Self.raw(server, "/copy/report/chart.png").body == chart)
        #expect(try await Self.raw(server, "/copy/report/readme.txt").body == readme)
        let (_, copied) = try await Self.http(server, .get, "/copy/report")
        #expect(copied?["_rev"] == (try await Self.http(server, .get, "/atts/report")).1?["_rev"])
    }

    /// A 3 MiB blob and sixteen of 512 KiB — `getAttachment` replies of many frames, many at once, paced by
    /// acknowledgements both ways (counted as LiteCore counts them, or a paused reply stalls) — cross both ways
    /// intact.
    @Test(.enabled(if: available)) func largeAndManyBlobsCrossBothWays() async throws {
        let dir = TempDir(), a = TempDir(), b = TempDir(), files = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/large").0 == 201)
        #expect(try await Self.http(server, .put, "/again").0 == 201)
        var blobs = ["big": Self.randomBytes(3 << 20, seed: 3)]
        for i in 1...16 { blobs["part-\(i)"] = Self.randomBytes(512 << 10, seed: UInt64(100 + i)) }
        var arguments: [String] = []
        for (id, bytes) in blobs { arguments += ["--blob", id + ":" + (try Self.file(files, id + ".bin", bytes))] }
        let pushed = try await Self.sync(server, "large", client: a.path, arguments + ["--push"])
        #expect(pushed.done?["documents_ok"]?.intValue == 17)
        for (id, bytes) in blobs { #expect(try await Self.raw(server, "/large/\(id)/blob_%2Fattachment").body == bytes, "\(id)") }
        let pulled = try await Self.sync(server, "large", client: b.path, ["--pull", "--list"])
        #expect(pulled.done?["documents_ok"]?.intValue == 17)
        #expect(pulled.documents["big"]?["body"]?["attachment"]?["digest"]?.stringValue == Self.sha1(blobs["big"]!))
        _ = try await Self.sync(server, "again", client: b.path, ["--push"])
        for (id, bytes) in blobs { #expect(try await Self.raw(server, "/again/\(id)/blob_%2Fattachment").body == bytes, "\(id)") }
    }

    /// A blob whose bytes don't match its digest (the client's copy was altered) and one the client no longer has:
    /// each revision fails alone (400, 412), nothing of it is stored, the other documents are, and the node goes on.
    @Test(.enabled(if: available)) func blobWithTheWrongBytesOrNoBytesIsRefused() async throws {
        let dir = TempDir(), a = TempDir(), files = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await Self.http(server, .put, "/bad").0 == 201)
        let altered = Self.randomBytes(4000, seed: 11), gone = Self.randomBytes(2000, seed: 12)
        // Saved locally, then the client's blob store is tampered with before the push.
        let tool = try Self.tool.get()
        let local = ["--db", a.path, "--create", "1", "--blob", "altered:" + (try Self.file(files, "a.bin", altered)),
                     "--blob", "gone:" + (try Self.file(files, "g.bin", gone))]
        _ = try await offThePool { try runTool(tool, local) }
        let store = a.path + "/db.cblite2/Attachments/"
        func blobFile(_ bytes: [UInt8]) -> String { store + Self.sha1(bytes).dropFirst(5).replacingOccurrences(of: "/", with: "_") + ".blob" }
        try FileManager.default.removeItem(atPath: blobFile(altered))
        try Data(altered.reversed()).write(to: URL(fileURLWithPath: blobFile(altered)))
        try FileManager.default.removeItem(atPath: blobFile(gone))

        let run = try await Self.failingSync(server, "bad", client: a.path, ["--push"])
        let failures = Dictionary(run.events.filter { $0["event"]?.stringValue == "document" && $0["error"] != nil }
            .map { ($0["id"]?.stringValue ?? "", $0["error"]?["code"]?.intValue ?? 0) }, uniquingKeysWith: { a, _ in a })
        #expect(failures == ["altered": 400, "gone": 412])
        #expect(try await Self.http(server, .get, "/bad/altered").0 == 404)
        #expect(try await Self.http(server, .get, "/bad/gone").0 == 404)
        #expect(try await Self.http(server, .get, "/bad/doc-000001").0 == 200)
        #expect(try await Self.http(server, .put, "/bad/after", #"{"still":"up"}"#).0 == 201)
    }
}
