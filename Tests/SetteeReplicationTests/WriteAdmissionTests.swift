import Foundation
import SetteeCore
import SetteeTestSupport
import Testing

/// Every way a document reaches a node's database passes the node's one write-admission step (`WriteRules`):
/// `validate_doc_update` and the `_users` rules, whatever carried the write. Real `settee serve` processes and the
/// real `settee` command line.
@Suite(.serialized) struct WriteAdmissionTests {
    func url(_ s: ServerProcess, _ path: String = "") -> String { "http://127.0.0.1:\(s.port)" + (path.isEmpty ? "" : "/" + path) }
    func authURL(_ s: ServerProcess, _ db: String) -> String { "http://admin:secret@127.0.0.1:\(s.port)/\(db)" }

    /// Refuses documents with `bad` unless the database's `_security` lets them in (members role `lenient`), and
    /// an attachment named `no.txt`.
    static let validator = #"""
        {"validate_doc_update": "function(newDoc, oldDoc, userCtx, secObj) { var roles = (secObj && secObj.members && secObj.members.roles) || []; if (newDoc.bad && roles.indexOf('lenient') < 0) throw({forbidden: 'no bad documents'}); if (newDoc._attachments && newDoc._attachments['no.txt']) throw({forbidden: 'no no.txt'}); }"}
        """#
    static let lenient = #"{"admins":{"roles":["_admin"]},"members":{"roles":["_admin","lenient"]}}"#

    /// A database with the validator.
    func guarded(_ s: ServerProcess, _ db: String) async throws {
        #expect(try await HTTP.send(.PUT, url(s, db)).status == 201)
        #expect(try await HTTP.send(.PUT, url(s, db + "/_design/rules"), Self.validator).status == 201)
    }

    /// A database holding one acceptable and one refused document (no validator there).
    func source(_ s: ServerProcess, _ db: String) async throws {
        #expect(try await HTTP.send(.PUT, url(s, db)).status == 201)
        let r = try await HTTP.send(.POST, url(s, db + "/_bulk_docs"),
                                    #"{"docs":[{"_id":"good","n":1},{"_id":"bad","bad":true}]}"#)
        #expect(r.status == 201)
    }

    func expectOnlyGood(_ s: ServerProcess, _ db: String, _ comment: Comment) async throws {
        #expect(try await HTTP.send(.GET, url(s, db + "/good")).status == 200, comment)
        #expect(try await HTTP.send(.GET, url(s, db + "/bad")).status == 404, comment)
    }

    @Test func replicationIntoALocalTargetRunsValidation() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        try await source(server, "src")

        // `_replicate` with the target named without a URL (the local path), and with a URL.
        for (target, spec) in [("byname", #""target":"byname""#),
                               ("byurl", #""target":"\#(authURL(server, "byurl"))""#)] {
            try await guarded(server, target)
            let r = try await HTTP.send(.POST, url(server, "_replicate"), #"{"source":"src",\#(spec)}"#)
            #expect(r.status == 200, "\(target): \(r.json?.jsonString ?? "")")
            let history = r.json?["history"]?[0]
            #expect(history?["docs_written"]?.intValue == 1, "\(target)")
            #expect(history?["doc_write_failures"]?.intValue == 1, "\(target)")
            try await expectOnlyGood(server, target, "\(target)")
        }

        // A `_replicator` job into a local target.
        try await guarded(server, "byjob")
        #expect(try await HTTP.send(.PUT, url(server, "_replicator/job"), #"{"source":"src","target":"byjob"}"#).status == 201)
        #expect(try await waitFor(seconds: 30) {
            try await HTTP.send(.GET, url(server, "_replicator/job")).json?["_replication_state"] == "completed"
        })
        try await expectOnlyGood(server, "byjob", "_replicator")

        // Attachments written over HTTP pass the same functions.
        let good = try await HTTP.send(.GET, url(server, "byname/good"))
        let rev = try #require(good.json?["_rev"]?.stringValue)
        let refused = try await HTTP.send(.PUT, url(server, "byname/good/no.txt?rev=\(rev)"), #""text""#)
        #expect(refused.status == 403)
        #expect(refused.json?["reason"] == "no no.txt")
        #expect(try await HTTP.send(.PUT, url(server, "byname/good/yes.txt?rev=\(rev)"), #""text""#).status == 201)
    }

    @Test func userDocumentsReplicatedIntoUsersAreHashed() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await HTTP.send(.PUT, url(server, "people")).status == 201)
        let user = #"{"_id":"org.couchdb.user:joe","type":"user","name":"joe","roles":[],"password":"plain-secret"}"#
        #expect(try await HTTP.send(.PUT, url(server, "people/org.couchdb.user:joe"), user).status == 201)
        let r = try await HTTP.send(.POST, url(server, "_replicate"), #"{"source":"people","target":"_users"}"#)
        #expect(r.status == 200, "\(r.json?.jsonString ?? "")")
        let stored = try await HTTP.send(.GET, url(server, "_users/org.couchdb.user:joe"))
        #expect(stored.status == 200)
        #expect(stored.json?["password"] == nil, "\(stored.json?.jsonString ?? "")")
        #expect(stored.json?["derived_key"]?.stringValue != nil)
        #expect(stored.json?["password_scheme"] == "pbkdf2")
        // And the hashed password works.
        let session = try await HTTP.send(.POST, url(server, "_session"), #"{"name":"joe","password":"plain-secret"}"#)
        #expect(session.status == 200, "\(session.json?.jsonString ?? "")")
        #expect(session.json?["name"] == "joe")
    }

    @Test func peersWriteThroughTheValidation() async throws {
        let dirs = [TempDir(), TempDir()]
        let a = try ServerProcess(dataDirectory: dirs[0].path)
        defer { a.stop() }
        // A holds a bad and a good document (no validator there); B has the database with its validator before it
        // first meets A. (Peers keep `_security` in step, so the validator can't tell the nodes apart by it.)
        try await source(a, "shared")
        do {
            let alone = try ServerProcess(dataDirectory: dirs[1].path)
            defer { alone.stop() }
            try await guarded(alone, "shared")
        }
        let b = try ServerProcess(dataDirectory: dirs[1].path,
                                  extraArguments: ["--peer", authURL(a, "").dropLast().description, "--peer-scan-interval", "1"])
        defer { b.stop() }
        // B pulls both; its validator lets the good one in and refuses the bad one.
        #expect(try await waitFor(seconds: 30) { try await HTTP.send(.GET, url(b, "shared/good")).status == 200 })
        // (B's design document reaches A meanwhile: the pull has run by the time A has it.)
        #expect(try await waitFor(seconds: 30) {
            try await HTTP.send(.GET, url(a, "shared/_design/rules")).status == 200
        })
        try await expectOnlyGood(b, "shared", "peer")
    }

    @Test func commandLineReplicateAndLoadRunValidation() async throws {
        let dir = TempDir(), files = TempDir()
        do {
            let server = try ServerProcess(dataDirectory: dir.path)
            defer { server.stop() }
            try await source(server, "src")
            try await guarded(server, "dst")
            try await guarded(server, "restored")
        }
        // `settee replicate` between two databases of a data directory.
        let replicate = try Self.run(["replicate", "--data", dir.path, "--quiet", "src", "dst"])
        #expect(replicate.status == 0, "\(replicate.output)")
        #expect(replicate.output.contains(#""doc_write_failures":1"#), "\(replicate.output)")
        // `settee load` of a dump holding the refused document.
        let dump = files.path + "/src.jsonl"
        let dumped = try Self.run(["dump", "--data", dir.path, "--output", dump, "src"])
        #expect(dumped.status == 0, "\(dumped.output)")
        let text = try String(contentsOfFile: dump, encoding: .utf8).replacingOccurrences(of: #""db":"src""#, with: #""db":"restored""#)
        try text.write(toFile: dump, atomically: true, encoding: .utf8)
        let loaded = try Self.run(["load", "--data", dir.path, "--quiet", dump])
        #expect(loaded.output.contains("no bad documents"), "\(loaded.output)")

        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        try await expectOnlyGood(server, "dst", "settee replicate")
        try await expectOnlyGood(server, "restored", "settee load")
    }

    /// Runs the `settee` command line; its exit status and everything it printed.
    static func run(_ args: [String]) throws -> (status: Int32, output: String) {
        let p = SpawnedProcess()
        p.executableURL = URL(fileURLWithPath: builtProduct("settee"))
        p.arguments = args
        let out = TempDir()
        let path = out.path + "/output"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        p.waitUntilExit()
        try handle.close()
        return (p.terminationStatus, (try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
    }
}

/// Design documents as CouchDB admits them: one deleted no longer validates, one whose functions don't compile is
/// refused when written, on every write path.
@Suite(.serialized) struct DesignDocumentAdmissionTests {
    func url(_ s: ServerProcess, _ path: String = "") -> String { "http://127.0.0.1:\(s.port)" + (path.isEmpty ? "" : "/" + path) }

    @Test func aDeletedDesignDocumentStopsValidating() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await HTTP.send(.PUT, url(server, "db")).status == 201)
        let created = try await HTTP.send(.PUT, url(server, "db/_design/rules"), WriteAdmissionTests.validator)
        let rev = try #require(created.json?["rev"]?.stringValue)
        #expect(try await HTTP.send(.PUT, url(server, "db/x"), #"{"bad":true}"#).status == 403)
        #expect(try await HTTP.send(.DELETE, url(server, "db/_design/rules?rev=\(rev)")).status == 200)
        #expect(try await HTTP.send(.PUT, url(server, "db/x"), #"{"bad":true}"#).status == 201)

        // Written again, and deleted through _bulk_docs: the same.
        let again = try await HTTP.send(.PUT, url(server, "db/_design/rules"), WriteAdmissionTests.validator)
        let rev2 = try #require(again.json?["rev"]?.stringValue)
        #expect(try await HTTP.send(.PUT, url(server, "db/y"), #"{"bad":true}"#).status == 403)
        let deleted = try await HTTP.send(.POST, url(server, "db/_bulk_docs"),
                                          #"{"docs":[{"_id":"_design/rules","_rev":"\#(rev2)","_deleted":true}]}"#)
        #expect(deleted.json?[0]?["ok"] == true)
        #expect(try await HTTP.send(.PUT, url(server, "db/y"), #"{"bad":true}"#).status == 201)
    }

    @Test func designDocumentsWhoseFunctionsDontCompileAreRefused() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        #expect(try await HTTP.send(.PUT, url(server, "db")).status == 201)
        let broken = #"{"views":{"v":{"map":"function(doc) { emit(doc._id"}}}"#
        let r = try await HTTP.send(.PUT, url(server, "db/_design/broken"), broken)
        #expect(r.status == 400)
        #expect(r.json?["error"] == "compilation_error")
        #expect(r.json?["reason"]?.stringValue?.hasPrefix("Compilation of the map function in the 'v' view failed") == true,
                "\(r.json?.jsonString ?? "")")
        #expect(try await HTTP.send(.GET, url(server, "db/_design/broken")).status == 404)

        let badReduce = try await HTTP.send(.PUT, url(server, "db/_design/red"),
                                            #"{"views":{"v":{"map":"function(doc) { emit(1, 1); }","reduce":"function(k, v) { return sum(v"}}}"#)
        #expect(badReduce.status == 400)
        #expect(badReduce.json?["reason"]?.stringValue?.hasPrefix("Compilation of the reduce function in the 'v' view failed") == true)
        let unknown = try await HTTP.send(.PUT, url(server, "db/_design/builtin"),
                                          #"{"views":{"v":{"map":"function(doc) { emit(1, 1); }","reduce":"_nope"}}}"#)
        #expect(unknown.status == 400)
        #expect(unknown.json?["error"] == "invalid_design_doc")
        // CouchDB 3.5's built-ins, each accepted.
        for (i, reduce) in ["_sum", "_count", "_stats", "_approx_count_distinct", "_top_3", "_bottom_2", "_first", "_last"].enumerated() {
            let ok = try await HTTP.send(.PUT, url(server, "db/_design/builtin\(i)"),
                                         #"{"views":{"v":{"map":"function(doc) { emit(1, 1); }","reduce":"\#(reduce)"}}}"#)
            #expect(ok.status == 201, "\(reduce)")
        }

        // _bulk_docs answers the row; a good design document beside it is written.
        let bulk = try await HTTP.send(.POST, url(server, "db/_bulk_docs"), #"""
            {"docs":[{"_id":"_design/broken","views":{"v":{"map":"function(doc) {"}}},
                     {"_id":"_design/fine","views":{"v":{"map":"function(doc) { emit(doc._id, 1); }","reduce":"_count"}}}]}
            """#)
        #expect(bulk.json?[0]?["error"] == "compilation_error", "\(bulk.json?.jsonString ?? "")")
        #expect(bulk.json?[1]?["ok"] == true)

        // A replicated one (new_edits=false) too, as CouchDB validates replicated design documents.
        let replicated = try await HTTP.send(.POST, url(server, "db/_bulk_docs"), #"""
            {"new_edits":false,"docs":[{"_id":"_design/r","_rev":"1-abc","views":{"v":{"map":"nonsense("}}}]}
            """#)
        #expect(replicated.json?[0]?["error"] == "compilation_error", "\(replicated.json?.jsonString ?? "")")
    }
}
