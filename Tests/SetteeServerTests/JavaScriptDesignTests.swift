import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SetteeCore
import SetteeTestSupport
import Testing

/// CouchDB's JavaScript design functions on a real `settee serve`, run by real `settee-js` processes (SpiderMonkey):
/// validation on every write path, filters, show/list/update functions, rewrites — and a function that loops or
/// allocates without bound fails alone, leaving the node serving.
@Suite(.serialized) struct JavaScriptDesignTests {
    static func send(_ client: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil) async throws -> (Int, JSON) {
        try await QueryRouteTests.send(client, method, uri, body)
    }

    static func raw(_ client: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil) async throws -> (Int, String, HTTPFields) {
        var headers = LiveServerTests.auth
        headers[.contentType] = "application/json"
        let response = try await client.execute(.init(uri, method: method, headers: headers,
                                                      body: body.map { ByteBuffer(string: $0) }))
        let text = response.body.map { String(buffer: $0) } ?? ""
        return (Int(response.status.code), text, response.headers)
    }

    @Test func validationRunsOnEveryWritePath() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/notes").0 == 201)
        let ddoc = #"""
        {"validate_doc_update": "function(newDoc, oldDoc, userCtx, secObj) { if (!newDoc._deleted && typeof newDoc.title !== 'string') throw({forbidden: 'title must be a string'}); if (newDoc.locked) throw({unauthorized: 'locked'}); }"}
        """#
        #expect(try await Self.send(client, .put, "/notes/_design/rules", ddoc).0 == 201)

        // Interactive writes.
        let bad = try await Self.send(client, .put, "/notes/a", #"{"title": 5}"#)
        #expect(bad.0 == 403)
        #expect(bad.1 == ["error": "forbidden", "reason": "title must be a string"])
        #expect(try await Self.send(client, .put, "/notes/a", #"{"title": "ok"}"#).0 == 201)
        #expect(try await Self.send(client, .put, "/notes/b", #"{"title": "x", "locked": true}"#).0 == 401)
        #expect(try await Self.send(client, .get, "/notes/b").0 == 404)

        // _bulk_docs: a refused document is a row; the others are written.
        let bulk = try await Self.send(client, .post, "/notes/_bulk_docs", #"{"docs":[{"_id":"c","title":"fine"},{"_id":"d"}]}"#)
        #expect(bulk.0 == 201)
        #expect(bulk.1[0]?["ok"] == true)
        #expect(bulk.1[1]?["error"] == "forbidden")
        #expect(try await Self.send(client, .get, "/notes/d").0 == 404)

        // Replicated revisions (new_edits=false) are validated too.
        let replicated = try await Self.send(client, .post, "/notes/_bulk_docs",
                                             #"{"new_edits":false,"docs":[{"_id":"e","_rev":"1-abc","title":7}]}"#)
        #expect(replicated.1[0]?["error"] == "forbidden")
        #expect(try await Self.send(client, .get, "/notes/e").0 == 404)

        // Deleting passes this function; design documents are not validated (admins write them).
        let a = try await Self.send(client, .get, "/notes/a")
        #expect(try await Self.send(client, .delete, "/notes/a?rev=\(a.1["_rev"]?.stringValue ?? "")").0 == 200)
        #expect(try await Self.send(client, .put, "/notes/_design/other", #"{"language":"javascript"}"#).0 == 201)
    }

    /// A `_bulk_docs` of 3,000 documents of ~1 KB goes to settee-js in several `validate_batch` lines (about a
    /// megabyte each): every verdict lands on its own document, with two functions (the first refusal wins), for new
    /// documents and for updates (whose `oldDoc` is the current revision).
    @Test func bulkValidationAnswersEachDocument() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/big").0 == 201)
        #expect(try await Self.send(client, .put, "/big/_design/a", #"""
        {"validate_doc_update": "function(n, o) { if (n.n % 7 === 0) throw({forbidden: 'sevens ' + n._id}); if (o && o.n !== n.n - 1) throw({forbidden: 'old ' + n._id}); }"}
        """#).0 == 201)
        #expect(try await Self.send(client, .put, "/big/_design/b", #"""
        {"validate_doc_update": "function(n, o, u) { if (n.n % 5 === 0) throw({unauthorized: 'fives ' + n._id + ' ' + u.db}); }"}
        """#).0 == 201)
        let pad = String(repeating: "x", count: 1_000)
        func body(_ n: (Int) -> Int, revs: [String: String] = [:]) -> String {
            let docs = (0..<3_000).map { i -> String in
                let rev = revs["d\(i)"].map { #","_rev":"\#($0)""# } ?? ""
                return #"{"_id":"d\#(i)"\#(rev),"n":\#(n(i)),"pad":"\#(pad)"}"#
            }
            return #"{"docs":[\#(docs.joined(separator: ","))]}"#
        }
        func expectRows(_ rows: JSON, n: (Int) -> Int) -> [String: String] {
            var revs: [String: String] = [:]
            for i in 0..<3_000 {
                let row = rows[i], id = "d\(i)", value = n(i)
                #expect(row?["id"] == .string(id))
                if value % 7 == 0 {
                    #expect(row?["error"] == "forbidden" && row?["reason"] == .string("sevens \(id)"), "\(id)")
                } else if value % 5 == 0 {
                    #expect(row?["error"] == "unauthorized" && row?["reason"] == .string("fives \(id) big"), "\(id)")
                } else {
                    #expect(row?["ok"] == true, "\(id)")
                    revs[id] = row?["rev"]?.stringValue
                }
            }
            return revs
        }
        let first = try await Self.send(client, .post, "/big/_bulk_docs", body { $0 })
        #expect(first.0 == 201)
        let revs = expectRows(first.1) { $0 }
        // Updates: n + 1; documents refused the first time are new now.
        let second = try await Self.send(client, .post, "/big/_bulk_docs", body({ $0 + 1 }, revs: revs))
        #expect(second.0 == 201)
        let updated = expectRows(second.1) { $0 + 1 }
        let info = try await Self.send(client, .get, "/big")
        let written = Set(revs.keys).union(updated.keys).count
        #expect(info.1["doc_count"] == .int(Int64(written + 2)))
    }

    @Test func filtersShowsListsUpdatesAndRewrites() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/app").0 == 201)
        let docs = (1...6).map { #"{"_id":"d\#($0)","n":\#($0),"kind":"\#($0 % 2 == 0 ? "even" : "odd")"}"# }
        #expect(try await Self.send(client, .post, "/app/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#).0 == 201)
        let ddoc = #"""
        {"views": {"by_n": {"map": "function(doc) { if (doc.n) emit(doc.n, doc.kind) }"}},
         "filters": {"kind": "function(doc, req) { return doc.kind === req.query.kind }"},
         "shows": {"hello": "function(doc, req) { return {body: 'Hello ' + (doc ? doc._id : 'nobody'), headers: {'X-Shown': 'yes'}} }"},
         "lists": {"csv": "function(head, req) { start({headers: {'Content-Type': 'text/csv'}}); var row; while (row = getRow()) { send(row.key + ',' + row.value + '\\n') } }"},
         "updates": {"bump": "function(doc, req) { if (!doc) return [null, 'missing']; doc.n = (doc.n || 0) + 1; return [doc, 'bumped ' + doc.n] }"},
         "rewrites": "function(req) { if (req.path[4] === 'hi') return '_show/hello/' + req.path[5]; }"}
        """#
        #expect(try await Self.send(client, .put, "/app/_design/fn", ddoc).0 == 201)

        // _changes?filter=ddoc/name with req.query, and filter=_view.
        let changes = try await Self.send(client, .get, "/app/_changes?filter=fn/kind&kind=even")
        #expect(changes.1["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["d2", "d4", "d6"])
        let viewFiltered = try await Self.send(client, .get, "/app/_changes?filter=_view&view=fn/by_n")
        #expect(viewFiltered.1["results"]?.arrayValue?.count == 6)
        #expect(try await Self.send(client, .get, "/app/_changes?filter=fn/nope").0 == 404)

        // _show with and without a document.
        let shown = try await Self.raw(client, .get, "/app/_design/fn/_show/hello/d1")
        #expect(shown.0 == 200)
        #expect(shown.1 == "Hello d1")
        #expect(shown.2[HTTPField.Name("X-Shown")!] == "yes")
        #expect(try await Self.raw(client, .get, "/app/_design/fn/_show/hello").1 == "Hello nobody")

        // _list over a view, with the view's parameters.
        let listed = try await Self.raw(client, .get, "/app/_design/fn/_list/csv/by_n?limit=3")
        #expect(listed.0 == 200)
        #expect(listed.1 == "1,odd\n2,even\n3,odd\n")
        #expect(listed.2[.contentType] == "text/csv")

        // _update saves the document it returns.
        let bumped = try await Self.raw(client, .put, "/app/_design/fn/_update/bump/d1")
        #expect(bumped.0 == 201)
        #expect(bumped.1 == "bumped 2")
        #expect(bumped.2[HTTPField.Name("X-Couch-Update-NewRev")!]?.hasPrefix("2-") == true)
        #expect(try await Self.send(client, .get, "/app/d1").1["n"] == 2)

        // _rewrite to a show function.
        let rewritten = try await Self.raw(client, .get, "/app/_design/fn/_rewrite/hi/d3")
        #expect(rewritten.0 == 200)
        #expect(rewritten.1 == "Hello d3")
        #expect(try await Self.send(client, .get, "/app/_design/fn/_rewrite/nowhere").0 == 404)
    }

    @Test func runawayFunctionsFailAloneAndTheNodeKeepsServing() async throws {
        let dir = TempDir()
        // A short time limit so the test doesn't wait CouchDB's default 5 s.
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/_node/_local/_config/couchdb/os_process_timeout", #""1000""#).0 == 200)
        #expect(try await Self.send(client, .put, "/loops").0 == 201)
        #expect(try await Self.send(client, .put, "/loops/doc", #"{"a":1}"#).0 == 201)
        let ddoc = #"""
        {"views": {"forever": {"map": "function(doc) { while (true) {} }"},
                   "hog": {"map": "function(doc) { var a = []; while (true) a.push(new Array(1000000).fill(doc)); }"},
                   "fine": {"map": "function(doc) { emit(doc._id, 1) }"}}}
        """#
        #expect(try await Self.send(client, .put, "/loops/_design/bad", ddoc).0 == 201)
        // One that doesn't compile is refused when written (compiling it is no endless call).
        let broken = try await Self.send(client, .put, "/loops/_design/broken", #"{"views": {"broken": {"map": "function(doc) { emit(doc._id "}}}"#)
        #expect(broken.0 == 400)
        #expect(broken.1["error"] == "compilation_error")
        let started = Date()
        let forever = try await Self.send(client, .get, "/loops/_design/bad/_view/forever")
        #expect(forever.0 == 500)
        #expect(forever.1["error"] == "os_process_error")
        #expect(Date().timeIntervalSince(started) < 10)
        let hog = try await Self.send(client, .get, "/loops/_design/bad/_view/hog")
        #expect(hog.0 == 500)
        // Other functions, and the node, carry on.
        let fine = try await Self.send(client, .get, "/loops/_design/bad/_view/fine")
        #expect(fine.0 == 200)
        #expect(fine.1["rows"]?[0]?["key"] == "doc")
        #expect(try await Self.send(client, .get, "/loops/doc").0 == 200)
    }

    /// The query-server processes end with the node, even when it is killed outright: each one's standard input
    /// reaches end-of-file because no other child inherited the pipe (two processes start at once for a view
    /// build, one per core, on different threads).
    @Test func queryServersDieWithAKilledNode() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/many").0 == 201)
        let docs = (0..<2_000).map { #"{"_id":"d\#($0)","n":\#($0)}"# }.joined(separator: ",")
        #expect(try await Self.send(client, .post, "/many/_bulk_docs", #"{"docs":[\#(docs)]}"#).0 == 201)
        #expect(try await Self.send(client, .put, "/many/_design/v", #"{"views":{"n":{"map":"function(d){emit(d.n,null)}"}}}"#).0 == 201)
        let view = try await Self.send(client, .get, "/many/_design/v/_view/n?limit=1")
        #expect(view.0 == 200)
        #expect(view.1["total_rows"] == 2_000)
        let node = server.process.processIdentifier
        let children = Self.childProcesses(of: node).filter { Self.commandLine(of: $0).contains("settee-js") }
        #expect(!children.isEmpty)
        server.kill9()
        let deadline = Date().addingTimeInterval(10)
        var alive = children
        while !alive.isEmpty && Date() < deadline {
            alive = alive.filter(Self.isRunning)
            if !alive.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(alive.isEmpty, "settee-js processes \(alive) outlived their node")
        for pid in alive { kill(pid, SIGKILL) }
    }

    static func childProcesses(of pid: pid_t) -> [pid_t] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.flatMap { task -> [pid_t] in
            let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
            return text.split(separator: " ").compactMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
    }

    static func commandLine(of pid: pid_t) -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return "" }
        return String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
    }

    /// Running: it exists and is not a zombie waiting for a parent (or an init) to reap it.
    static func isRunning(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(close, offsetBy: 2)...].prefix(1)
        return state != "Z" && state != "X"
    }
}
