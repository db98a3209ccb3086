import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SetteeCore
import SetteeTestSupport
import Testing

@testable import SetteeServer

/// Sync Gateway's channels and sync function on a Settee database, over real HTTP: the sync function runs on every
/// write, routes documents into channels and grants access; readers who are not admins see only their channels.
/// The sync functions are Sync Gateway's documented examples.
@Suite("Sync function and channels")
struct SyncFunctionTests {
    static let adminAuth: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password)]

    static func auth(_ user: String) -> HTTPFields { [.authorization: basicAuth(user, "pw")] }

    /// A node with an admin, `_users` holding `users`, and database `db` open to them as members.
    static func withSyncNode(users: [String], _ body: @escaping @Sendable (Couch) async throws -> Void) async throws {
        let dir = TempDataDir()
        var config = ServerConfiguration(dataDirectory: dir.path, port: 0, admin: testAdmin)
        config.security.pbkdf2Iterations = 1000
        let node = try Node(configuration: config)
        try await withServer(node: node, mode: .live) { plain in
            var c = plain
            c.defaultHeaders = adminAuth
            if try await c.get("/_users").status == .notFound { #expect(try await c.request(.put, "/_users").status == .created) }
            for user in users {
                let r = try await c.put("/_users/org.couchdb.user:\(user)",
                                        #"{"name":"\#(user)","type":"user","roles":[],"password":"pw"}"#)
                #expect(r.status == .created, "\(r.text)")
            }
            try await c.createDB("db")
            let names = users.map { "\"\($0)\"" }.joined(separator: ",")
            #expect(try await c.put("/db/_security", #"{"members":{"names":[\#(names)]}}"#).status == .ok)
            try await body(c)
        }
        node.closeAll()
        _ = dir
    }

    static func setSync(_ c: Couch, _ source: String) async throws -> HTTPResult {
        try await c.request(.put, "/db/_config/sync", body: Array(source.utf8), headers: [.contentType: "application/javascript"])
    }

    static func changedIDs(_ r: HTTPResult) -> [String] {
        r["results"]?.arrayValue?.compactMap { $0["removed"] == nil ? $0["id"]?.stringValue : nil } ?? []
    }

    static func removedIDs(_ r: HTTPResult) -> [String] {
        r["results"]?.arrayValue?.compactMap { $0["removed"] != nil ? $0["id"]?.stringValue : nil } ?? []
    }

    // MARK: Routing and reads

    @Test func theDefaultFunctionRoutesDocChannelsAndReadsFollowThem() async throws {
        try await Self.withSyncNode(users: ["alice"]) { c in
            // Without a sync function the database is CouchDB's: alice reads everything.
            try await c.putDoc("/db/before", #"{"channels":["b"]}"#)
            #expect(try await c.get("/db/before", headers: Self.auth("alice")).status == .ok)

            #expect(try await Self.setSync(c, ChannelIndex.defaultFunction).status == .created)
            #expect(try await c.get("/db/_config/sync").text == ChannelIndex.defaultFunction)
            #expect(try await c.put("/db/_user/alice", #"{"admin_channels":["a"]}"#).status == .created)
            try await c.putDoc("/db/inA", #"{"channels":["a"],"n":1}"#)
            try await c.putDoc("/db/inB", #"{"channels":"b","n":2}"#)
            try await c.putDoc("/db/inAB", #"{"channels":["a","b"],"n":3}"#)
            try await c.putDoc("/db/public", #"{"channels":["!"]}"#)
            try await c.putDoc("/db/nowhere", #"{"n":4}"#)
            let att = try await c.request(.put, "/db/inB/note.txt?rev=" + (c.get("/db/inB")["_rev"]?.stringValue ?? ""),
                                          body: Array("secret".utf8), headers: [.contentType: "text/plain"])
            #expect(att.status == .created)
            try await c.putDoc("/db/_design/v", #"{"views":{"all":{"map":"function(doc){emit(doc._id,1)}"},"count":{"map":"function(doc){emit(doc._id,1)}","reduce":"_count"},"linked":{"map":"function(doc){if(doc.n==1) emit(1,{_id:'inB'})}"}}}"#)

            let alice = Self.auth("alice")
            let feed = try await c.get("/db/_changes", headers: alice)
            #expect(Self.changedIDs(feed) == ["inA", "inAB", "public"])
            #expect(try await c.get("/db/inA", headers: alice).status == .ok)
            #expect(try await c.get("/db/public", headers: alice).status == .ok)
            for hidden in ["inB", "nowhere", "before"] {
                let r = try await c.get("/db/\(hidden)", headers: alice)
                #expect(r.status == .forbidden, "\(hidden): \(r.text)")
            }
            #expect(try await c.get("/db/inB/note.txt", headers: alice).status == .forbidden)
            #expect(rowIDs(try await c.get("/db/_all_docs", headers: alice).json) == ["inA", "inAB", "public"])
            let keyed = try await c.post("/db/_all_docs", #"{"keys":["inA","inB"]}"#, headers: alice)
            #expect(keyed["rows"]?[0]?["id"] == "inA")
            #expect(keyed["rows"]?[1]?["error"] == "not_found")
            let ranged = try await c.get("/db/_all_docs?startkey=%22inAB%22&limit=1", headers: alice)
            #expect(rowIDs(ranged.json) == ["inAB"])
            let bulk = try await c.post("/db/_bulk_get", #"{"docs":[{"id":"inA"},{"id":"inB"}]}"#, headers: alice)
            #expect(bulk["results"]?[0]?["docs"]?[0]?["ok"]?["n"] == 1)
            #expect(bulk["results"]?[1]?["docs"]?[0]?["error"]?["error"] == "forbidden")
            let inBRev = try await c.get("/db/inB")["_rev"]?.stringValue ?? ""
            let diff = try await c.post("/db/_revs_diff", #"{"inB":["\#(inBRev)"]}"#, headers: alice)
            #expect(diff["inB"]?["missing"]?[0]?.stringValue == inBRev, "a hidden document is answered as unknown")
            // Views and _find: rows of her documents only, skip and limit counted among them.
            #expect(rowIDs(try await c.get("/db/_design/v/_view/all", headers: alice).json) == ["inA", "inAB", "public"])
            #expect(rowIDs(try await c.get("/db/_design/v/_view/all?skip=1&limit=1", headers: alice).json) == ["inAB"])
            #expect(rowIDs(try await c.get("/db/_design/v/_view/count?reduce=false", headers: alice).json) == ["inA", "inAB", "public"])
            let linked = try await c.get("/db/_design/v/_view/linked?include_docs=true", headers: alice)
            #expect(linked["rows"]?[0]?["doc"] == .null, "a linked document outside her channels is not included")
            let found = try await c.post("/db/_find", #"{"selector":{"_id":{"$gt":null}},"fields":["_id"]}"#, headers: alice)
            #expect(found["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } == ["inA", "inAB", "public"])
            // What can't be filtered by document is for admins only.
            for path in ["/db/_design/v", "/db/_design/v/_view/count", "/db/_design_docs", "/db/_design/v/_info"] {
                #expect(try await c.get(path, headers: alice).status == .forbidden, "\(path)")
            }
            #expect(try await c.post("/db/_query", #"{"statement":"SELECT * FROM db"}"#, headers: alice).status == .forbidden)
            // Admins see everything; anyone may ask for some channels.
            #expect(Self.changedIDs(try await c.get("/db/_changes")).count == 7)
            #expect(try await c.get("/db/_design/v/_view/count").status == .ok)
            let byChannel = try await c.get("/db/_changes?filter=sync_gateway/bychannel&channels=b")
            #expect(Self.changedIDs(byChannel) == ["inAB", "inB"])
            // A reader asking for channels gets those of them it has.
            let aliceA = try await c.get("/db/_changes?filter=sync_gateway/bychannel&channels=a,b", headers: alice)
            #expect(Self.changedIDs(aliceA) == ["inA", "inAB"])
            let aliceB = try await c.get("/db/_changes?filter=sync_gateway/bychannel&channels=b", headers: alice)
            #expect(Self.changedIDs(aliceB).isEmpty, "alice has no channel b")
            let me = try await c.get("/db/_user/alice")
            #expect(me["all_channels"] == ["!", "a"])

            // Removing the sync function gives CouchDB's model back.
            #expect(try await c.delete("/db/_config/sync").status == .ok)
            #expect(try await c.get("/db/inB", headers: alice).status == .ok)
        }
    }

    // MARK: Sync Gateway's documented examples

    /// Sync Gateway's "writers" example: required properties, the creator and writers checked against `oldDoc`,
    /// the writers given access to the document's channels.
    static let writersExample = """
        function (doc, oldDoc) {
          if (doc._deleted) {
            requireUser(oldDoc.writers);
            return;
          }
          if (!doc.title || !doc.creator || !doc.channels || !doc.writers) {
            throw({forbidden: "Missing required properties"});
          } else if (doc.writers.length == 0) {
            throw({forbidden: "No writers"});
          }
          if (oldDoc == null) {
            requireUser(doc.creator);
          } else {
            requireUser(oldDoc.writers);
            if (doc.creator != oldDoc.creator) {
              throw({forbidden: "Can't change creator"});
            }
          }
          channel(doc.channels);
          access(doc.writers, doc.channels);
        }
        """

    @Test func syncGatewaysWritersExampleValidatesAndGrants() async throws {
        try await Self.withSyncNode(users: ["alice", "bob", "carol"]) { c in
            #expect(try await Self.setSync(c, Self.writersExample).status == .created)
            let alice = Self.auth("alice"), bob = Self.auth("bob"), carol = Self.auth("carol")
            // Refused writes: 403 with the function's message, nothing stored.
            let missing = try await c.put("/db/list1", #"{"title":"x"}"#, headers: alice)
            expectError(missing, .forbidden, "forbidden", reason: "Missing required properties")
            let notMe = try await c.put("/db/list1", #"{"title":"x","creator":"bob","channels":["l1"],"writers":["bob"]}"#,
                                        headers: alice)
            expectError(notMe, .forbidden, "forbidden", reason: "sg wrong user")
            #expect(try await c.get("/db/list1").status == .notFound)
            // Accepted: alice creates list1, writers alice and bob get its channel.
            let made = try await c.put("/db/list1", #"{"title":"x","creator":"alice","channels":["l1"],"writers":["alice","bob"]}"#,
                                       headers: alice)
            #expect(made.status == .created, "\(made.text)")
            let rev = made["rev"]?.stringValue ?? ""
            #expect(Self.changedIDs(try await c.get("/db/_changes", headers: bob)) == ["list1"])
            #expect(Self.changedIDs(try await c.get("/db/_changes", headers: carol)).isEmpty)
            // oldDoc checks: carol is no writer; bob may not change the creator; bob may edit.
            let byCarol = try await c.put("/db/list1?rev=\(rev)", #"{"title":"y","creator":"alice","channels":["l1"],"writers":["carol"]}"#,
                                          headers: carol)
            expectError(byCarol, .forbidden, "forbidden", reason: "sg wrong user")
            let creator = try await c.put("/db/list1?rev=\(rev)", #"{"title":"y","creator":"bob","channels":["l1"],"writers":["bob"]}"#,
                                          headers: bob)
            expectError(creator, .forbidden, "forbidden", reason: "Can't change creator")
            let edited = try await c.put("/db/list1?rev=\(rev)", #"{"title":"y","creator":"alice","channels":["l1"],"writers":["bob"]}"#,
                                         headers: bob)
            #expect(edited.status == .created, "\(edited.text)")
            // alice is no longer a writer: she lost the channel, and her feed says the document left it.
            #expect(try await c.get("/db/list1", headers: alice).status == .forbidden)
            // Deletion: only the writers of the current revision.
            let rev2 = edited["rev"]?.stringValue ?? ""
            expectError(try await c.delete("/db/list1?rev=\(rev2)", headers: alice), .forbidden, "forbidden")
            #expect(try await c.delete("/db/list1?rev=\(rev2)", headers: bob).status == .ok)
            // _bulk_docs: each write judged alone.
            let bulk = try await c.post("/db/_bulk_docs", #"""
                {"docs":[{"_id":"ok","title":"t","creator":"carol","channels":["c"],"writers":["carol"]},
                         {"_id":"bad","title":"t"}]}
                """#, headers: carol)
            #expect(bulk.json[0]?["ok"] == true)
            #expect(bulk.json[1]?["error"] == "forbidden")
            #expect(bulk.json[1]?["reason"] == "Missing required properties")
            #expect(try await c.get("/db/bad").status == .notFound)
        }
    }

    /// Sync Gateway's role examples: `role()` grants a role to users, a role's `admin_channels` reach its members,
    /// `requireRole`, `requireAccess` and `requireAdmin` guard writes, and `expiry()` is accepted.
    @Test func rolesAndRequireHelpers() async throws {
        try await Self.withSyncNode(users: ["alice", "bob"]) { c in
            let source = """
                function (doc, oldDoc, meta) {
                  if (doc.type == "team") {
                    requireAdmin();
                    role(doc.members, "role:" + doc._id);
                    return;
                  }
                  if (doc.type == "post") {
                    requireRole(doc.team);
                    channel("team-" + doc.team);
                    expiry(3600);
                    return;
                  }
                  if (doc.type == "comment") {
                    requireAccess(doc.on);
                    channel(doc.on);
                    return;
                  }
                  throw({forbidden: "unknown type"});
                }
                """
            #expect(try await Self.setSync(c, source).status == .created)
            #expect(try await c.put("/db/_role/red", #"{"admin_channels":["team-red"]}"#).status == .created)
            let alice = Self.auth("alice"), bob = Self.auth("bob")
            expectError(try await c.put("/db/red", #"{"type":"team","members":["alice"]}"#, headers: alice), .forbidden, "forbidden",
                        reason: "sg admin required")
            try await c.putDoc("/db/red", #"{"type":"team","members":["alice"]}"#)
            expectError(try await c.put("/db/p1", #"{"type":"post","team":"red"}"#, headers: bob), .forbidden, "forbidden",
                        reason: "sg missing role")
            #expect(try await c.put("/db/p1", #"{"type":"post","team":"red"}"#, headers: alice).status == .created)
            // expiry(3600): the document is purged an hour from now (Couchbase Lite's document expiration).
            let expires = try c.node.database("db").defaultCollection().getDocumentExpiration(id: "p1")
            #expect(expires.map { abs($0.timeIntervalSinceNow - 3600) < 60 } == true)
            // alice has role red (from the team document), so channel team-red (the role's admin_channels).
            #expect(Self.changedIDs(try await c.get("/db/_changes", headers: alice)) == ["p1"])
            #expect(Self.changedIDs(try await c.get("/db/_changes", headers: bob)).isEmpty)
            expectError(try await c.put("/db/c1", #"{"type":"comment","on":"team-red"}"#, headers: bob), .forbidden, "forbidden",
                        reason: "sg missing channel access")
            #expect(try await c.put("/db/c1", #"{"type":"comment","on":"team-red"}"#, headers: alice).status == .created)
            let me = try await c.get("/db/_user/alice")
            #expect(me["roles"] == ["red"])
            #expect(me["all_channels"] == ["!", "team-red"])
            expectError(try await c.put("/db/x", #"{"type":"other"}"#, headers: alice), .forbidden, "forbidden", reason: "unknown type")
        }
    }

    // MARK: Grants and revocations

    @Test func grantsAndRevocationsReachAReadersFeed() async throws {
        try await Self.withSyncNode(users: ["alice"]) { c in
            let source = """
                function (doc, oldDoc) {
                  channel(doc.channels);
                  if (doc.type == "grant") access(doc.user, doc.grants);
                }
                """
            #expect(try await Self.setSync(c, source).status == .created)
            let alice = Self.auth("alice")
            for i in 0..<5 { try await c.putDoc("/db/secret\(i)", #"{"channels":["s"]}"#) }
            let first = try await c.get("/db/_changes", headers: alice)
            #expect(Self.changedIDs(first).isEmpty)
            let since = first["last_seq"]?.stringValue ?? "0"
            // A longpoll waiting on alice's feed (on a connection of its own) wakes when a document grants her
            // channel s, with s's documents written before it (backfill: their sequences are older than `since`).
            let second = TestClient(host: "127.0.0.1", port: c.client.port!, configuration: .init(timeout: .seconds(30)))
            second.connect()
            async let waited = second.execute(.init("/db/_changes?feed=longpoll&timeout=10000&since=\(since)", method: .get,
                                                    headers: alice))
            try await Task.sleep(for: .milliseconds(300))
            let grant = try await c.putDoc("/db/grant", #"{"type":"grant","user":"alice","grants":["s"]}"#)
            let response = try await waited
            try await second.shutdown()
            let woke = HTTPResult(status: response.status, headers: response.headers,
                                  bytes: response.body.map { Array($0.readableBytesView) } ?? [])
            #expect(Set(Self.changedIDs(woke)) == Set((0..<5).map { "secret\($0)" }))
            let after = woke["last_seq"]?.stringValue ?? "0"
            #expect(Self.changedIDs(try await c.get("/db/_changes?since=\(after)", headers: alice)).isEmpty,
                    "the backfill is not sent again")
            // A document leaving channel s: alice is told it was removed.
            let rev = try await c.get("/db/secret0")["_rev"]?.stringValue ?? ""
            try await c.putDoc("/db/secret0?rev=\(rev)", #"{"channels":["other"]}"#)
            let removal = try await c.get("/db/_changes?since=\(after)&include_docs=true", headers: alice)
            #expect(Self.removedIDs(removal) == ["secret0"])
            #expect(removal["results"]?[0]?["removed"] == ["s"])
            #expect(removal["results"]?[0]?["doc"]?["_removed"] == true)
            // The grant revoked: the channel's documents stop reaching her.
            #expect(try await c.delete("/db/grant?rev=\(grant)").status == .ok)
            #expect(try await c.get("/db/secret1", headers: alice).status == .forbidden)
            #expect(rowIDs(try await c.get("/db/_all_docs", headers: alice).json).isEmpty)
            try await c.putDoc("/db/secret9", #"{"channels":["s"]}"#)
            let later = try await c.get("/db/_changes?since=\(after)", headers: alice)
            #expect(Self.changedIDs(later).isEmpty)
            // A reader since before the revocation is told the channel's documents are gone (Sync Gateway's
            // revocation), once: a reader since after it is not.
            let revoked = later["results"]?.arrayValue?.filter { $0["revoked"] == true }.compactMap { $0["id"]?.stringValue } ?? []
            #expect(Set(revoked).isSuperset(of: ["secret1", "secret2", "secret3", "secret4"]), "\(later.text)")
            let quiet = try await c.get("/db/_changes?since=\(later["last_seq"]?.stringValue ?? "0")", headers: alice)
            #expect(quiet["results"]?.arrayValue?.isEmpty == true, "\(quiet.text)")
            // An admin grant through the API: backfill again.
            let before = later["last_seq"]?.stringValue ?? "0"
            #expect(try await c.put("/db/_user/alice", #"{"admin_channels":["s"]}"#).status == .created)
            let granted = try await c.get("/db/_changes?since=\(before)", headers: alice)
            #expect(Set(Self.changedIDs(granted)) == ["secret1", "secret2", "secret3", "secret4", "secret9"])
        }
    }

    // MARK: Bad sync functions

    @Test func badSyncFunctionsRefuseWritesAndTheNodeKeepsServing() async throws {
        try await Self.withSyncNode(users: []) { c in
            #expect(try await c.put("/_node/_local/_config/couchdb/os_process_timeout", #""1000""#).status == .ok)
            let broken = try await Self.setSync(c, "function (doc) { channel(doc.channels ")
            expectError(broken, .badRequest, "compilation_error")
            #expect(try await c.get("/db/_config/sync").status == .notFound, "a function that does not compile is not set")
            expectError(try await Self.setSync(c, "   "), .badRequest, "bad_request")

            // An exception: that write fails with 500, nothing stored.
            #expect(try await Self.setSync(c, "function (doc) { channel(doc.owner.name); }").status == .created)
            let thrown = try await c.put("/db/d1", #"{"x":1}"#)
            #expect(thrown.status == .internalServerError)
            #expect(thrown["error"] == "sync_function_error")
            #expect(try await c.get("/db/d1").status == .notFound)
            #expect(try await c.put("/db/d2", #"{"owner":{"name":"a"}}"#).status == .created)

            // An endless loop: stopped at the time limit, the write refused, the node serving.
            #expect(try await Self.setSync(c, "function (doc) { while (true) {} }").status == .created)
            let started = Date()
            let looped = try await c.put("/db/d3", #"{"x":1}"#)
            #expect(looped.status == .internalServerError)
            #expect(Date().timeIntervalSince(started) < 10)
            #expect(try await c.get("/db/d3").status == .notFound)
            #expect(try await c.get("/db/d2").status == .ok)
            try await c.createDB("other")
            try await c.putDoc("/other/fine", #"{"x":1}"#)
            // One that eats memory: stopped at the heap limit, the write refused, the node serving.
            #expect(try await Self.setSync(c, "function (doc) { var a = []; while (true) a.push(new Array(1000000).fill(doc)); }").status == .created)
            #expect(try await c.put("/db/d5", #"{"x":1}"#).status == .internalServerError)
            #expect(try await c.get("/db/d5").status == .notFound)
            #expect(try await c.get("/other/fine").status == .ok)

            // A function that throws a string refuses as forbidden; fixing it lets writes through.
            #expect(try await Self.setSync(c, #"function (doc) { if (!doc.ok) throw("not ok"); }"#).status == .created)
            expectError(try await c.put("/db/d4", #"{"x":1}"#), .forbidden, "forbidden", reason: "not ok")
            #expect(try await c.put("/db/d4", #"{"ok":true}"#).status == .created)
        }
    }

    // MARK: Revisions a reader may not see

    /// Each revision served is checked by its own channels: an older revision, a losing conflict, an attachment
    /// stub naming another document's bytes are not a way around the current revision's.
    @Test func everyServedRevisionIsCheckedByItsOwnChannels() async throws {
        try await Self.withSyncNode(users: ["bob"]) { c in
            #expect(try await Self.setSync(c, ChannelIndex.defaultFunction).status == .created)
            #expect(try await c.put("/db/_user/bob", #"{"admin_channels":["public"]}"#).status == .created)
            let bob = Self.auth("bob")
            let first = try await c.putDoc("/db/salary", #"{"channels":["hr"],"amount":100000}"#)
            let att = try await c.request(.put, "/db/salary/payslip.txt?rev=\(first)", body: Array("100000".utf8),
                                          headers: [.contentType: "text/plain"])
            let withAttachment = att["rev"]?.stringValue ?? ""
            let digest = try await c.get("/db/salary")["_attachments"]?["payslip.txt"]?["digest"]?.stringValue ?? ""
            let current = try await c.putDoc("/db/salary?rev=\(withAttachment)", #"{"channels":["public"],"amount":0}"#)
            #expect(try await c.get("/db/salary", headers: bob)["amount"] == 0)
            #expect(try await c.get("/db/salary?rev=\(first)", headers: bob).status == .forbidden)
            #expect(try await c.get("/db/salary/payslip.txt?rev=\(withAttachment)", headers: bob).status == .forbidden)
            let open = try await c.get("/db/salary?open_revs=[%22\(first)%22,%22\(current)%22]", headers: bob)
            #expect(open.json[0]?["missing"]?.stringValue == first)
            #expect(open.json[1]?["ok"]?["amount"] == 0)
            let bulk = try await c.post("/db/_bulk_get", #"{"docs":[{"id":"salary","rev":"\#(first)"}]}"#, headers: bob)
            #expect(bulk["results"]?[0]?["docs"]?[0]?["error"]?["error"] == "forbidden")
            // A missing document is still 404.
            #expect(try await c.get("/db/nothing", headers: bob).status == .notFound)
            // A stub naming another document's attachment by its digest is refused to a reader.
            let stolen = try await c.put("/db/mine?new_edits=false", #"""
                {"_rev":"1-abc","channels":["public"],"_attachments":{"f":{"stub":true,"digest":"\#(digest)","length":6}}}
                """#, headers: bob)
            #expect(stolen.status == .preconditionFailed, "\(stolen.text)")
            #expect(try await c.get("/db/mine/f", headers: bob).status == .notFound)
        }
    }

    /// Promise jobs a refused write leaves behind can't reach the next write's outcome; a function that decides
    /// asynchronously (returns a promise) is refused; re-creating a deleted document sees the tombstone as `oldDoc`.
    @Test func asynchronousCallbacksAndTombstonesCantRouteAroundTheFunction() async throws {
        try await Self.withSyncNode(users: ["mallory"]) { c in
            let source = """
                function (doc, oldDoc) {
                  Promise.resolve().then(function () { channel(doc.leak); });
                  if (doc.bad) throw({forbidden: "no"});
                  if (oldDoc && oldDoc._deleted && doc.owner != "admin") throw({forbidden: "a deleted list stays deleted"});
                  channel(doc.channels);
                }
                """
            #expect(try await Self.setSync(c, source).status == .created)
            let bulk = try await c.post("/db/_bulk_docs", #"""
                {"docs":[{"_id":"a","bad":true,"leak":["secret"]},{"_id":"b","channels":["open"]}]}
                """#)
            #expect(bulk.json[0]?["error"] == "forbidden")
            #expect(bulk.json[1]?["ok"] == true)
            #expect(Self.changedIDs(try await c.get("/db/_changes?filter=sync_gateway/bychannel&channels=secret")).isEmpty,
                    "the refused write's callback put nothing in channel secret")
            #expect(try await Self.setSync(c, "async function (doc) { channel(doc.channels); }").status == .created)
            expectError(try await c.put("/db/c", #"{"channels":["open"]}"#), .internalServerError, "sync_function_error")
            #expect(try await Self.setSync(c, source).status == .created)
            let list = try await c.putDoc("/db/list", #"{"owner":"admin","channels":["lists"]}"#)
            #expect(try await c.delete("/db/list?rev=\(list)").status == .ok)
            let again = try await c.put("/db/list", #"{"owner":"mallory","channels":["lists"]}"#, headers: Self.auth("mallory"))
            expectError(again, .forbidden, "forbidden", reason: "a deleted list stays deleted")
        }
    }

    /// A revocation's rows share its sequence: a page of the feed never ends among them. `_resync` tells a reader
    /// since before which documents it routed out of the reader's channels. A hidden conflict's attachment can't be
    /// copied by naming it as a stub over that revision.
    @Test func revocationsPageWholeResyncRemovalsArriveAndHiddenStubsStayHidden() async throws {
        try await Self.withSyncNode(users: ["alice"]) { c in
            #expect(try await Self.setSync(c, ChannelIndex.defaultFunction).status == .created)
            #expect(try await c.put("/db/_user/alice", #"{"admin_channels":["x","a"]}"#).status == .created)
            let alice = Self.auth("alice")
            for i in 0..<5 { try await c.putDoc("/db/x\(i)", #"{"channels":["x"]}"#) }
            let before = try await c.get("/db/_changes", headers: alice)["last_seq"]?.stringValue ?? "0"
            #expect(try await c.put("/db/_user/alice", #"{"admin_channels":["a"]}"#).status == .ok)
            let page = try await c.get("/db/_changes?since=\(before)&limit=2", headers: alice)
            let revoked = page["results"]?.arrayValue?.filter { $0["revoked"] == true }.count
            #expect(revoked == 5, "\(page.text)")

            // Resync: a new function routes every document to "elsewhere"; alice, since before, is told.
            #expect(try await c.put("/db/_user/alice", #"{"admin_channels":["x","a"]}"#).status == .ok)
            let held = try await c.get("/db/_changes", headers: alice)["last_seq"]?.stringValue ?? "0"
            #expect(try await Self.setSync(c, #"function (doc) { channel("elsewhere"); }"#).status == .created)
            #expect(try await c.post("/db/_resync", "").status == .ok)
            let told = try await c.get("/db/_changes?since=\(held)", headers: alice)
            #expect(Set(Self.removedIDs(told)) == Set((0..<5).map { "x\($0)" }), "\(told.text)")

            // A losing conflict in a channel alice lacks, with an attachment: naming it as a stub over that
            // revision does not copy it into one she reads.
            #expect(try await Self.setSync(c, ChannelIndex.defaultFunction).status == .created)
            try await c.putDoc("/db/d", #"{"channels":["a"]}"#)
            let secret = try await c.put("/db/d?new_edits=false", #"""
                {"_rev":"1-ffffffffffffffffffffffffffffffff","channels":["secret"],
                 "_attachments":{"photo":{"content_type":"text/plain","data":"c2VjcmV0"}}}
                """#)
            #expect(secret.status == .created, "\(secret.text)")
            let copied = try await c.put("/db/d", #"""
                {"_rev":"1-ffffffffffffffffffffffffffffffff","channels":["a"],"_attachments":{"photo":{"stub":true}}}
                """#, headers: alice)
            #expect(copied.status == .forbidden, "\(copied.text)")
        }
    }

    // MARK: Configuration

    /// `settee serve --config FILE` with Sync Gateway's `databases` shape sets the function (creating the database).
    @Test func theConfigurationFileSetsASyncFunction() async throws {
        let dir = TempDataDir()
        let path = dir.path + "/settee.json"
        try Data(#"{"databases": {"app": {"sync": "function (doc) { channel(doc.team); }"}}}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        let server = try ServerProcess(dataDirectory: dir.path + "/data", extraArguments: ["--config", path])
        defer { server.stop() }
        let client = LiveServerTests.client(server)
        let sync = try await client.execute(.init("/app/_config/sync", method: .get, headers: LiveServerTests.auth))
        #expect(sync.status == .ok)
        #expect(sync.body.map { String(buffer: $0) } == "function (doc) { channel(doc.team); }")
        #expect(try await LiveServerTests.send(client, .put, "/app/d", #"{"team":"red"}"#).0 == 201)
        let red = try await LiveServerTests.send(client, .get, "/app/_changes?filter=sync_gateway/bychannel&channels=red")
        #expect(red.1?["results"]?.arrayValue?.count == 1)
    }

    // MARK: Resync

    @Test func resyncRoutesDocumentsWrittenBeforeTheFunction() async throws {
        try await Self.withSyncNode(users: ["alice"]) { c in
            for i in 0..<30 { try await c.putDoc("/db/old\(i)", #"{"channels":["\#(i % 2 == 0 ? "even" : "odd")"]}"#) }
            #expect(try await Self.setSync(c, ChannelIndex.defaultFunction).status == .created)
            #expect(try await c.put("/db/_user/alice", #"{"admin_channels":["even"]}"#).status == .created)
            let alice = Self.auth("alice")
            #expect(Self.changedIDs(try await c.get("/db/_changes", headers: alice)).isEmpty,
                    "documents written before the sync function are in no channel")
            let before = try await c.get("/db/_changes", headers: alice)["last_seq"]?.stringValue ?? "0"
            let resync = try await c.post("/db/_resync", "")
            #expect(resync["documents"] == 30)
            #expect(Self.changedIDs(try await c.get("/db/_changes", headers: alice)).count == 15)
            // A reader since before the resync gets its channels' documents again (their sequences are older).
            #expect(Self.changedIDs(try await c.get("/db/_changes?since=\(before)", headers: alice)).count == 15)
        }
    }
}
