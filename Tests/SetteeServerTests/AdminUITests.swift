import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

/// The admin UI at `/_utils` over real sockets: sign-in, CSRF, every page's forms and the errors they show.
/// (The browser tests in SetteeBrowserTests drive the same pages in headless Chromium.)
@Suite("Admin UI") struct AdminUITests {
    /// A signed-in browser session: the session cookie and the page's CSRF token.
    struct Session {
        let c: Couch
        var cookie: String
        var token = ""

        var headers: HTTPFields { [.cookie: cookie, .accept: "text/html,application/xhtml+xml"] }

        func get(_ path: String) async throws -> HTTPResult { try await c.get(path, headers: headers) }

        func post(_ path: String, _ fields: [(String, String)], origin: String? = nil, token: String? = nil) async throws -> HTTPResult {
            var h = headers
            h[.contentType] = "application/x-www-form-urlencoded"
            if let origin { h[.origin] = origin }
            let all = fields + [("_csrf", token ?? self.token)]
            let body = all.map { "\(AdminUI.encodeQuery($0.0))=\(AdminUI.encodeQuery($0.1))" }.joined(separator: "&")
            return try await c.request(.post, path, body: Array(body.utf8), headers: h)
        }

        static func csrf(in html: String) -> String? {
            guard let r = html.range(of: #"name="_csrf" value="[0-9a-f]+""#, options: .regularExpression) else { return nil }
            return String(html[r].dropLast().split(separator: "\"").last ?? "")
        }
    }

    static func signIn(_ c: Couch, name: String = testAdmin.username, password: String = testAdmin.password) async throws -> Session {
        let r = try await c.request(.post, "/_utils/login?next=%2F_utils%2F", body: Array("name=\(name)&password=\(password)".utf8),
                                    headers: [.contentType: "application/x-www-form-urlencoded"])
        #expect(r.status == .seeOther, "\(r.text)")
        #expect(r.header(.location) == "/_utils/")
        let cookie = try #require(r.header(.setCookie)?.split(separator: ";").first.map(String.init))
        var s = Session(c: c, cookie: cookie)
        let page = try await s.get("/_utils/")
        #expect(page.status == .ok)
        s.token = try #require(Session.csrf(in: page.text))
        return s
    }

    static func location(_ r: HTTPResult) -> String { r.header(.location) ?? "" }

    @Test func signInIsRequiredAndWrongPasswordsAreShown() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let r = try await c.get("/_utils/db/x?skip=10")
            #expect(r.status == .seeOther)
            #expect(Self.location(r) == "/_utils/login?next=%2F_utils%2Fdb%2Fx%3Fskip%3D10")
            let bare = try await c.get("/_utils")
            #expect(Self.location(bare) == "/_utils/")
            let form = try await c.get("/_utils/login")
            #expect(form.status == .ok)
            #expect(form.text.contains(#"id="login-form""#))
            let wrong = try await c.request(.post, "/_utils/login", body: Array("name=admin&password=nope".utf8),
                                            headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(wrong.status == .unauthorized)
            #expect(wrong.text.contains("Name or password is incorrect."))
            #expect(wrong.header(.setCookie) == nil)
            // An open redirect through `next` is refused.
            let evil = try await c.request(.post, "/_utils/login?next=https%3A%2F%2Fevil.example%2F",
                                           body: Array("name=\(testAdmin.username)&password=\(testAdmin.password)".utf8),
                                           headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(Self.location(evil) == "/_utils/")
            let crossSite = try await c.request(.post, "/_utils/login",
                                                body: Array("name=\(testAdmin.username)&password=\(testAdmin.password)".utf8),
                                                headers: [.contentType: "application/x-www-form-urlencoded", .origin: "http://evil.example"])
            #expect(crossSite.status == .forbidden)
            let sandboxed = try await c.request(.post, "/_utils/login",
                                                body: Array("name=\(testAdmin.username)&password=\(testAdmin.password)".utf8),
                                                headers: [.contentType: "application/x-www-form-urlencoded", .origin: "null"])
            #expect(sandboxed.status == .forbidden)
            #expect(sandboxed.header(.setCookie) == nil)
            let s = try await Self.signIn(c)
            let home = try await s.get("/_utils/")
            #expect(home.text.contains(#"id="signed-in-as">\#(testAdmin.username)</a>"#))
            #expect(home.header(HTTPField.Name("Content-Security-Policy")!)?.contains("script-src 'self'") == true)
            // Signing out revokes the cookie.
            let out = try await s.post("/_utils/logout", [])
            #expect(Self.location(out) == "/_utils/login")
            #expect(try await s.get("/_utils/").status == .seeOther)
        }
    }

    @Test func formsNeedTheTokenAndTheSameOrigin() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let s = try await Self.signIn(c)
            let missing = try await s.post("/_utils/databases", [("name", "one")], token: "")
            #expect(missing.status == .forbidden)
            let forged = try await s.post("/_utils/databases", [("name", "one")], token: String(repeating: "0", count: 40))
            #expect(forged.status == .forbidden)
            let crossSite = try await s.post("/_utils/databases", [("name", "one")], origin: "http://evil.example")
            #expect(crossSite.status == .forbidden)
            #expect(try await c.get("/one", headers: [.authorization: basicAuth(testAdmin.username, testAdmin.password)]).status == .notFound)
            #expect(missing.header(.contentType)?.hasPrefix("text/html") == true, "UI errors are pages")
            #expect(missing.text.contains("did not come from this node"))
            // Sandboxed frames send `Origin: null`: refused too.
            #expect(try await s.post("/_utils/databases", [("name", "one")], origin: "null").status == .forbidden)
            // The token belongs to the signed-in user, so it survives the cookie being re-issued (a second session
            // of the same user has the same one), and another user's token does not work.
            let second = try await Self.signIn(c)
            #expect(second.token == s.token)
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password), .contentType: "application/json"]
            _ = try await c.request(.put, "/_users", headers: admin)
            _ = try await c.put("/_users/org.couchdb.user:eve", #"{"name": "eve", "password": "pw", "roles": [], "type": "user"}"#, headers: admin)
            let eve = try await Self.signIn(c, name: "eve", password: "pw")
            #expect(eve.token != s.token)
            var mixed = s
            mixed.token = eve.token
            #expect(try await mixed.post("/_utils/databases", [("name", "two")]).status == .forbidden)
            let created = try await s.post("/_utils/databases", [("name", "one")])
            #expect(created.status == .seeOther)
            #expect(Self.location(created).hasPrefix("/_utils/db/one?notice="))
            let again = try await s.post("/_utils/databases", [("name", "one")])
            #expect(Self.location(again).contains("error=412"))
            let bad = try await s.post("/_utils/databases", [("name", "Bad Name")])
            #expect(Self.location(bad).contains("error=400"))
        }
    }

    @Test func documentsAreCreatedEditedAndConflictsShown() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let s = try await Self.signIn(c)
            _ = try await s.post("/_utils/databases", [("name", "shop")])
            let saved = try await s.post("/_utils/db/shop/save", [("doc", #"{"_id": "apple", "price": 1}"#)])
            #expect(saved.status == .seeOther)
            #expect(Self.location(saved).hasPrefix("/_utils/db/shop/doc/apple?notice=Saved"))
            let page = try await s.get("/_utils/db/shop/doc/apple")
            #expect(page.text.contains("&quot;price&quot;: 1"))
            let rev = try #require(page.text.range(of: #"id="doc-rev">1-[0-9a-f]+"#, options: .regularExpression)
                .map { String(page.text[$0].split(separator: ">").last!) })
            // A save without the current _rev is a conflict: 409, the typed text kept, the store unchanged.
            let stale = try await s.post("/_utils/db/shop/save", [("doc", #"{"_id": "apple", "price": 2}"#), ("id", "apple")])
            #expect(stale.status == .conflict)
            #expect(stale.text.contains("409 conflict: Document update conflict."))
            #expect(stale.text.contains("&quot;price&quot;: 2"))
            let malformed = try await s.post("/_utils/db/shop/save", [("doc", #"{"_id": "apple","#), ("id", "apple")])
            #expect(malformed.status == .badRequest)
            #expect(malformed.text.contains("That is not valid JSON"))
            let notObject = try await s.post("/_utils/db/shop/save", [("doc", "[1,2]")])
            #expect(notObject.status == .badRequest)
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password)]
            #expect(try await c.get("/shop/apple", headers: admin)["price"] == .int(1))
            let updated = try await s.post("/_utils/db/shop/save", [("doc", #"{"_id": "apple", "_rev": "\#(rev)", "price": 3}"#), ("id", "apple")])
            #expect(updated.status == .seeOther)
            #expect(try await c.get("/shop/apple", headers: admin)["price"] == .int(3))
            // Browse: the list shows it, ids with markup are escaped.
            _ = try await s.post("/_utils/db/shop/save", [("doc", #"{"_id": "<b>x</b>"}"#)])
            let list = try await s.get("/_utils/db/shop")
            #expect(list.text.contains(#"data-id="apple""#))
            #expect(list.text.contains("&lt;b&gt;x&lt;/b&gt;"))
            #expect(!list.text.contains("<b>x</b>"))
            // Delete writes a tombstone.
            let current = try await c.get("/shop/apple", headers: admin)["_rev"]?.stringValue ?? ""
            let deleted = try await s.post("/_utils/db/shop/doc/apple/delete", [("rev", current)])
            #expect(Self.location(deleted).hasPrefix("/_utils/db/shop?notice=Deleted"))
            #expect(try await c.get("/shop/apple", headers: admin).status == .notFound)
            // Compaction from the list page.
            let compacted = try await s.post("/_utils/db/shop/compact", [])
            #expect(Self.location(compacted).contains("notice=Compaction"), "\(Self.location(compacted))")
            // Paging.
            for i in 0..<30 { _ = try await c.put("/shop/p\(i < 10 ? "0" : "")\(i)", "{}", headers: admin) }
            let first = try await s.get("/_utils/db/shop?limit=10")
            #expect(first.text.contains(#"id="next-page""#))
            #expect(!first.text.contains(#"id="prev-page""#))
            let second = try await s.get("/_utils/db/shop?limit=10&skip=10")
            #expect(second.text.contains(#"id="prev-page""#))
        }
    }

    @Test func conflictsAreDrawnAndResolved() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let s = try await Self.signIn(c)
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password), .contentType: "application/json"]
            _ = try await c.request(.put, "/db", headers: admin)
            let r1 = try await c.put("/db/doc", #"{"v": 0}"#, headers: admin)["rev"]?.stringValue ?? ""
            let d1 = String(r1.split(separator: "-")[1])
            let bulk = #"{"new_edits": false, "docs": [{"_id": "doc", "_rev": "2-aaaa", "v": "A", "_revisions": {"start": 2, "ids": ["aaaa", "\#(d1)"]}}, {"_id": "doc", "_rev": "2-bbbb", "v": "B", "_revisions": {"start": 2, "ids": ["bbbb", "\#(d1)"]}}, {"_id": "doc", "_rev": "3-cccc", "_deleted": true, "_revisions": {"start": 3, "ids": ["cccc", "9999", "\#(d1)"]}}]}"#
            #expect(try await c.post("/db/_bulk_docs", bulk, headers: admin).status == .created)
            let tree = try await s.get("/_utils/db/db/tree/doc")
            #expect(tree.status == .ok)
            #expect(tree.text.contains(#"data-rev="2-bbbb" data-state="winner""#))
            #expect(tree.text.contains(#"data-rev="2-aaaa" data-state="conflict""#))
            #expect(tree.text.contains(#"data-rev="3-cccc" data-state="deleted""#))
            #expect(tree.text.contains(#"data-rev="\#(r1)" data-state="ancestor""#))
            #expect(tree.text.contains(#"id="conflict-summary">1 conflicting"#))
            // The differences between the live leaves, member by member.
            #expect(tree.text.contains(#"<table class="list" id="diffs">"#))
            #expect(tree.text.contains("<td><code>v</code></td><td>B</td><td>A</td>"))
            let docPage = try await s.get("/_utils/db/db/doc/doc")
            #expect(docPage.text.contains(#"id="conflicts""#))
            // A stale choice (not a live leaf) is refused without writing.
            let stale = try await s.post("/_utils/db/db/tree/doc/resolve", [("keep", "3-cccc")])
            #expect(Self.location(stale).contains("error="))
            // Keep the loser: the other live leaf gets a tombstone, and the kept one wins.
            let kept = try await s.post("/_utils/db/db/tree/doc/resolve", [("keep", "2-aaaa")])
            #expect(Self.location(kept).contains("notice=Resolved"), "\(Self.location(kept))")
            let now = try await c.get("/db/doc?conflicts=true", headers: admin)
            #expect(now["_rev"] == .string("2-aaaa"))
            #expect(now["_conflicts"] == nil)
            let after = try await s.get("/_utils/db/db/tree/doc")
            #expect(after.text.contains(#"id="no-conflicts""#))
            // A merge writes the edited body on top of the kept leaf.
            let body2 = #"{"new_edits": false, "docs": [{"_id": "doc", "_rev": "2-dddd", "v": "D", "_revisions": {"start": 2, "ids": ["dddd", "\#(d1)"]}}]}"#
            _ = try await c.post("/db/_bulk_docs", body2, headers: admin)
            let merged = try await s.post("/_utils/db/db/tree/doc/resolve", [("keep", "2-dddd"), ("body", #"{"v": "A+D"}"#)])
            #expect(Self.location(merged).contains("notice=Resolved"))
            let final = try await c.get("/db/doc?conflicts=true", headers: admin)
            #expect(final["v"] == .string("A+D"))
            #expect(final["_conflicts"] == nil)
            #expect(final["_rev"]?.stringValue?.hasPrefix("3-") == true)
        }
    }

    @Test func queriesIndexesChangesAndMetricsPages() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let s = try await Self.signIn(c)
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password), .contentType: "application/json"]
            _ = try await c.request(.put, "/travel", headers: admin)
            for (i, city) in ["Paris", "Rome", "Paris"].enumerated() {
                _ = try await c.put("/travel/h\(i)", #"{"type": "hotel", "city": "\#(city)", "name": "H\#(i)"}"#, headers: admin)
            }
            let created = try await s.post("/_utils/db/travel/indexes", [("name", "byCity"), ("type", "value"), ("expressions", "city")])
            #expect(Self.location(created).contains("notice=Index%20byCity"), "\(Self.location(created))")
            let broken = try await s.post("/_utils/db/travel/indexes", [("name", "bad"), ("type", "value"), ("expressions", "city =")])
            #expect(broken.status == .badRequest)
            #expect(broken.text.contains("query_parse_error"))
            let fts = try await s.post("/_utils/db/travel/indexes", [("name", "names"), ("type", "fulltext"), ("expressions", "name"),
                                                                     ("language", "en"), ("ignoreAccents", "on")])
            #expect(fts.status == .seeOther)
            let list = try await s.get("/_utils/db/travel/indexes")
            #expect(list.text.contains(#"data-index="byCity""#))
            #expect(list.text.contains(#"data-index="names""#))
            let q = "SELECT name FROM _ WHERE city = $city ORDER BY name"
            let result = try await s.get("/_utils/db/travel/query?q=\(AdminUI.encodeQuery(q))&params=\(AdminUI.encodeQuery(#"{"city": "Paris"}"#))")
            #expect(result.status == .ok)
            #expect(result.text.contains(#"<span id="row-count">2</span>"#))
            #expect(result.text.contains("<td>H0</td>") && result.text.contains("<td>H2</td>"))
            #expect(result.text.contains("byCity"), "the plan names the index")
            let bad = try await s.get("/_utils/db/travel/query?q=SELEC")
            #expect(bad.status == .badRequest)
            #expect(bad.text.contains(#"id="error""#))
            let badParams = try await s.get("/_utils/db/travel/query?q=SELECT+1&params=%5B1%5D")
            #expect(badParams.status == .badRequest)
            let dropped = try await s.post("/_utils/db/travel/indexes/delete", [("name", "byCity")])
            #expect(Self.location(dropped).contains("notice=Dropped"))
            let changes = try await s.get("/_utils/db/travel/changes")
            #expect(changes.text.contains("feed=eventsource"))
            #expect(changes.text.contains(">h2</a>"))
            // Local documents have no tree: a 404 page, not a 200 with an error.
            _ = try await c.put("/travel/_local/cp", "{}", headers: admin)
            let localTree = try await s.get("/_utils/db/travel/tree/_local%2Fcp")
            #expect(localTree.status == .notFound)
            #expect(try await s.get("/_utils/db/travel/doc/_local%2Fcp").text.contains(#"id="tree-link""#) == false)
            // Permissions: the _security object, edited as JSON.
            let sec = try await s.get("/_utils/db/travel/security")
            #expect(sec.text.contains(#"id="security-json""#))
            let savedSec = try await s.post("/_utils/db/travel/security", [("security", #"{"members": {"names": ["bob"], "roles": []}}"#)])
            #expect(Self.location(savedSec).contains("notice=Saved"))
            #expect(try await c.get("/travel/_security", headers: admin)["members"]?["names"]?[0] == .string("bob"))
            let badSec = try await s.post("/_utils/db/travel/security", [("security", "[1]")])
            #expect(badSec.status == .badRequest)
            // Jump to an id: the list starts there.
            let jumped = try await s.get("/_utils/db/travel?startkey=h1")
            #expect(jumped.text.contains(#"data-id="h1""#) && !jumped.text.contains(#"data-id="h0""#))
            #expect(try await c.get("/_utils/assets/favicon.svg").header(.contentType) == "image/svg+xml")
            let metrics = try await s.get("/_utils/metrics")
            #expect(metrics.text.contains("settee_http_requests_total"))
            #expect(try await s.get("/_utils/db/nope").status == .notFound)
            #expect(try await s.get("/_utils/nope").status == .notFound)
        }
    }

    /// The Views page lists JavaScript and SQL++ views with their source and runs one with CouchDB's parameters;
    /// a view that fails (a map function that doesn't compile, a bad key) shows CouchDB's error.
    @Test func mangoQueriesRunFromTheQueryPage() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let s = try await Self.signIn(c)
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password), .contentType: "application/json"]
            _ = try await c.request(.put, "/travel", headers: admin)
            for (i, city) in ["Paris", "Rome", "Paris"].enumerated() {
                _ = try await c.put("/travel/h\(i)", #"{"type": "hotel", "city": "\#(city)", "stars": \#(i + 3)}"#, headers: admin)
            }
            let empty = try await s.get("/_utils/db/travel/query")
            #expect(empty.text.contains(#"id="mango-form""#))
            // Without an index: _all_docs and CouchDB's warning.
            let q = AdminUI.encodeQuery(#"{"selector": {"city": "Paris"}}"#)
            let scan = try await s.get("/_utils/db/travel/query?mango=\(q)")
            #expect(scan.status == .ok)
            #expect(scan.text.contains(#"<span id="mango-count">2</span>"#), "\(scan.text)")
            #expect(scan.text.contains(#"<span id="mango-index">_all_docs</span>"#))
            #expect(scan.text.contains(#"id="mango-warning""#))
            #expect(scan.text.contains(#"href="/_utils/db/travel/doc/h2""#))
            // With a json index, the page names it.
            _ = try await c.request(.post, "/travel/_index", body: Array(#"{"index": {"fields": ["city"]}, "ddoc": "by-city", "name": "city"}"#.utf8),
                                    headers: admin)
            let indexed = try await s.get("/_utils/db/travel/query?mango=\(q)")
            #expect(indexed.text.contains(#"<span id="mango-index">_design/by-city / city</span>"#))
            #expect(!indexed.text.contains(#"id="mango-warning""#))
            // Errors are CouchDB's, with its status.
            let bad = try await s.get("/_utils/db/travel/query?mango=\(AdminUI.encodeQuery(#"{"selector": {"city": {"$foo": 1}}}"#))")
            #expect(bad.status == .badRequest)
            #expect(bad.text.contains("invalid_operator") || bad.text.contains("Invalid operator"))
            let notJSON = try await s.get("/_utils/db/travel/query?mango=nope")
            #expect(notJSON.status == .badRequest)
            #expect(notJSON.text.contains(#"id="mango-error""#))
        }
    }

    @Test func partitionedViewsRunWithAPartition() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let s = try await Self.signIn(c)
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password), .contentType: "application/json"]
            _ = try await c.request(.put, "/orders?partitioned=true", headers: admin)
            for (i, who) in ["ann", "bob", "ann"].enumerated() {
                _ = try await c.put("/orders/\(who):\(i)", #"{"total": \#(i + 1)}"#, headers: admin)
            }
            let design = #"{"views": {"totals": {"map": {"key": "total", "value": "total"}}}}"#
            #expect(try await c.put("/orders/_design/app", design, headers: admin).status == .created)
            let global = try await s.get("/_utils/db/orders/views?view=app%2Ftotals")
            #expect(global.status == .badRequest, "a partitioned view needs a partition")
            let ann = try await s.get("/_utils/db/orders/views?view=app%2Ftotals&partition=ann")
            #expect(ann.status == .ok)
            #expect(ann.text.contains(#"<span id="row-count">2</span>"#), "\(ann.text)")
            #expect(ann.text.contains(#"value="ann""#), "the form keeps the partition")
        }
    }

    @Test func viewsAreListedAndRun() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let s = try await Self.signIn(c)
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password), .contentType: "application/json"]
            _ = try await c.request(.put, "/travel", headers: admin)
            let empty = try await s.get("/_utils/db/travel/views")
            #expect(empty.status == .ok)
            #expect(empty.text.contains(#"id="no-views""#))
            for (i, city) in ["Paris", "Rome", "Paris"].enumerated() {
                _ = try await c.put("/travel/h\(i)", #"{"type": "hotel", "city": "\#(city)", "stars": \#(i + 3)}"#, headers: admin)
            }
            let design = #"""
            {"views": {"by_city": {"map": "function(doc) { if (doc.type === 'hotel') emit(doc.city, doc.stars); }", "reduce": "_sum"},
                       "declared": {"map": {"key": "city", "value": "stars"}}}}
            """#
            // (A design document whose map function doesn't compile is refused when written, as by CouchDB.)
            let broken = #"{"views": {"broken": {"map": "function(doc) { emit(doc.city "}}}"#
            #expect(try await c.put("/travel/_design/app", broken, headers: admin).status == .badRequest)
            #expect(try await c.put("/travel/_design/app", design, headers: admin).status == .created)
            let list = try await s.get("/_utils/db/travel/views")
            #expect(list.status == .ok)
            #expect(list.text.contains(#"data-view="app/by_city""#))
            #expect(list.text.contains(#"data-view="app/declared""#))
            #expect(list.text.contains("emit(doc.city, doc.stars)"), "the map function's source is shown")
            #expect(list.text.contains("_sum"))
            #expect(list.text.contains(#">Views</a>"#))
            // Reduced, then rows with their documents, then a key.
            let reduced = try await s.get("/_utils/db/travel/views?view=app%2Fby_city&group_level=1")
            #expect(reduced.status == .ok)
            #expect(reduced.text.contains(#"<span id="row-count">2</span>"#), "\(reduced.text)")
            #expect(reduced.text.contains("<td>&quot;Paris&quot;</td><td>8</td>"))
            let rows = try await s.get("/_utils/db/travel/views?view=app%2Fby_city&reduce=false&include_docs=true&limit=2")
            #expect(rows.text.contains(#"<span id="row-count">2</span>"#))
            #expect(rows.text.contains("total_rows 3"))
            #expect(rows.text.contains(#"href="/_utils/db/travel/doc/h0""#))
            #expect(rows.text.contains("<th>doc</th>"))
            let keyed = try await s.get("/_utils/db/travel/views?view=app%2Fby_city&reduce=false&key=%22Rome%22")
            #expect(keyed.text.contains(#"<span id="row-count">1</span>"#))
            #expect(keyed.text.contains(#"value="&quot;Rome&quot;""#), "the form keeps what was typed")
            let declared = try await s.get("/_utils/db/travel/views?view=app%2Fdeclared&key=%22Paris%22")
            #expect(declared.text.contains(#"<span id="row-count">2</span>"#))
            // Errors: CouchDB's, with its status.
            let badKey = try await s.get("/_utils/db/travel/views?view=app%2Fby_city&key=Rome")
            #expect(badKey.status == .badRequest)
            #expect(badKey.text.contains(#"id="error""#))
            let missing = try await s.get("/_utils/db/travel/views?view=app%2Fnope")
            #expect(missing.status == .notFound)
            let malformed = try await s.get("/_utils/db/travel/views?view=nope")
            #expect(malformed.status == .badRequest)
        }
    }

    @Test func replicationsStartAndFinish() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let s = try await Self.signIn(c)
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password), .contentType: "application/json"]
            _ = try await c.request(.put, "/src", headers: admin)
            for i in 0..<20 { _ = try await c.put("/src/d\(i)", #"{"i": \#(i)}"#, headers: admin) }
            let started = try await s.post("/_utils/replication", [("source", "src"), ("target", "dst"), ("create_target", "on"), ("id", "copy")])
            #expect(Self.location(started).contains("notice=Started"), "\(Self.location(started))")
            var state = ""
            for _ in 0..<600 {
                let docs = try await c.get("/_scheduler/docs", headers: admin)
                state = docs["docs"]?[0]?["state"]?.stringValue ?? ""
                if state == "completed" || state == "failed" { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(state == "completed")
            let page = try await s.get("/_utils/replication")
            #expect(page.text.contains(#"data-doc="copy""#))
            #expect(page.text.contains(#"<span class="badge completed">completed</span>"#))
            #expect(try await c.get("/dst", headers: admin)["doc_count"] == .int(20))
            let removed = try await s.post("/_utils/replication/delete", [("id", "copy")])
            #expect(Self.location(removed).contains("notice=Stopped"))
        }
    }

    @Test func assetsAreCachedAndNonAdminsSeeTheirErrors() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let css = try await c.get("/_utils/assets/app.css")
            #expect(css.status == .ok)
            #expect(css.header(.contentType)?.hasPrefix("text/css") == true)
            #expect(css.header(.cacheControl)?.contains("max-age=31536000") == true)
            let etag = try #require(css.header(.eTag))
            #expect(try await c.get("/_utils/assets/app.css", headers: [.ifNoneMatch: etag]).status == .notModified)
            #expect(try await c.get("/_utils/assets/app.js").text.contains("EventSource"))
            #expect(try await c.get("/_utils/assets/nope.js").status == .notFound)
            // A plain user signs in; admin-only pages show the API's error instead of data.
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password), .contentType: "application/json"]
            _ = try await c.request(.put, "/_users", headers: admin)
            _ = try await c.put("/_users/org.couchdb.user:bob", #"{"name": "bob", "password": "pw", "roles": [], "type": "user"}"#, headers: admin)
            let bob = try await Self.signIn(c, name: "bob", password: "pw")
            let home = try await bob.get("/_utils/")
            #expect(home.text.contains(#"id="error""#))
            let create = try await bob.post("/_utils/databases", [("name", "bobs")])
            #expect(Self.location(create).contains("error=401"))
            // Bob changes his password: the current one is checked, then he signs in with the new one.
            let account = try await bob.get("/_utils/account")
            #expect(account.text.contains(#"<td id="account-name">bob</td>"#))
            #expect(account.text.contains(#"id="password-form""#))
            let wrongCurrent = try await bob.post("/_utils/account", [("current", "nope"), ("password", "pw2"), ("confirm", "pw2")])
            #expect(wrongCurrent.status == .forbidden)
            let mismatch = try await bob.post("/_utils/account", [("current", "pw"), ("password", "pw2"), ("confirm", "pw3")])
            #expect(mismatch.status == .badRequest)
            let changed = try await bob.post("/_utils/account", [("current", "pw"), ("password", "pw2"), ("confirm", "pw2")])
            #expect(Self.location(changed).hasPrefix("/_utils/login?notice=Password"), "\(Self.location(changed))")
            #expect(try await c.get("/_session", headers: [.authorization: basicAuth("bob", "pw")]).status == .unauthorized)
            let bob2 = try await Self.signIn(c, name: "bob", password: "pw2")
            let adminAccount = try await Self.signIn(c).get("/_utils/account")
            #expect(!adminAccount.text.contains(#"id="password-form""#), "the configured admin's password is set at start")
            let own = try await bob2.get("/_utils/db/_users/doc/org.couchdb.user%3Abob")
            #expect(own.status == .ok, "a user reads their own _users document in the UI as through the API")
            #expect(own.text.contains("org.couchdb.user:bob"))
        }
    }

    /// A page's context reads as one flat dictionary did: the layout's values, the model's, the database header's,
    /// then the URL's flash messages; a nil optional of the model is missing, so the URL's error shows instead.
    @Test func pageContextResolvesLikeOneFlatContext() {
        let header = DatabaseHeader(db: "shop", dbHref: "/_utils/db/shop", dbDocs: "1", dbDeleted: "0", dbSize: "1 KiB", dbSeq: "1")
        func context(_ model: SecurityPage) -> UIPageContext<SecurityPage> {
            UIPageContext(title: "T", csrf: "c", user: "u", canSignOut: true, asset: "a", chrome: true, nav: "security",
                          database: header, model: model, notice: "from the URL", error: "from the URL")
        }
        let plain = context(SecurityPage(json: "{}"))
        #expect(plain.child(named: "title") as? String == "T")
        #expect(plain.child(named: "json") as? String == "{}")
        #expect(plain.child(named: "dbHref") as? String == "/_utils/db/shop")
        #expect(plain.child(named: "nav_security") as? Bool == true)
        #expect(plain.child(named: "nav_query") == nil)
        #expect(plain.child(named: "notice") as? String == "from the URL")
        #expect(plain.child(named: "error") as? String == "from the URL")
        #expect(plain.child(named: "nothing") == nil)
        #expect(context(SecurityPage(json: "{}", error: "the page's")).child(named: "error") as? String == "the page's")
    }
}

@Suite("Revision tree view") struct RevisionTreeViewTests {
    @Test func layoutAndWinner() {
        let view = RevisionTreeView(leaves: [
            ("3-c", false, 3, ["c", "b", "a"]),
            ("2-d", false, 2, ["d", "a"]),
            ("4-e", true, 4, ["e", "f", "b", "a"]),
        ])
        #expect(view.nodes.count == 6)
        // Live beats deleted even at a lower generation; then higher generation.
        #expect(view.winner == "3-c")
        #expect(view.conflicts == ["2-d"])
        #expect(view.deletedLeaves == ["4-e"])
        let svg = view.svg { "/x?rev=\($0)" }
        #expect(svg.contains(#"data-rev="4-e" data-state="deleted""#))
        #expect(svg.contains(#"data-rev="1-a" data-state="ancestor""#))
        #expect(svg.hasPrefix("<svg"))
        // Branches get their own rows; a chain stays on one.
        #expect(view.nodes["1-a"]!.y == 0)
        #expect(view.nodes["2-b"]!.y == 0)
        #expect(view.nodes["3-c"]!.y == 0, "the winner's branch is on top")
        #expect(Set(["2-d", "4-e"].map { view.nodes[$0]!.y }) == [1, 2])
        #expect(view.nodes["4-e"]!.x == 3)
    }

    @Test func allDeletedPicksTheHighestTombstone() {
        let view = RevisionTreeView(leaves: [("2-a", true, 2, ["a", "r"]), ("3-b", true, 3, ["b", "x", "r"])])
        #expect(view.winner == "3-b")
        #expect(view.conflicts.isEmpty)
    }
}

@Suite("Writes need JSON and attachments are sandboxed") struct CrossSiteWriteTests {
    @Test func postsThatWriteNeedApplicationJSON() async throws {
        try await withServer(admin: true, mode: .live) { c in
            let admin: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password)]
            var json = admin
            json[.contentType] = "application/json"
            _ = try await c.request(.put, "/db", headers: admin)
            for type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
                var h = admin
                h[.contentType] = type
                let post = try await c.request(.post, "/db", body: Array(#"{"a": 1}"#.utf8), headers: h)
                expectError(post, .unsupportedMediaType, "bad_content_type")
                let bulk = try await c.request(.post, "/db/_bulk_docs", body: Array(#"{"docs": [{"a": 1}]}"#.utf8), headers: h)
                expectError(bulk, .unsupportedMediaType, "bad_content_type")
            }
            let none = try await c.request(.post, "/db/_bulk_docs", body: Array(#"{"docs": [{"a": 1}]}"#.utf8), headers: admin)
            expectError(none, .unsupportedMediaType, "bad_content_type")
            #expect(try await c.get("/db", headers: admin)["doc_count"] == .int(0), "nothing was written")
            json[.contentType] = "application/json; charset=utf-8"
            #expect(try await c.request(.post, "/db", body: Array(#"{"a": 1}"#.utf8), headers: json).status == .created)
        }
    }

    @Test func attachmentsAreServedSandboxed() async throws {
        try await withServer(admin: true, mode: .live) { c in
            var h: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password)]
            _ = try await c.request(.put, "/db", headers: h)
            h[.contentType] = "text/html"
            let put = try await c.request(.put, "/db/page/evil.html", body: Array("<script>alert(1)</script>".utf8), headers: h)
            #expect(put.status == .created)
            let get = try await c.get("/db/page/evil.html", headers: [.authorization: basicAuth(testAdmin.username, testAdmin.password)])
            #expect(get.header(.contentType) == "text/html")
            #expect(get.header(HTTPField.Name("Content-Security-Policy")!) == "sandbox")
            #expect(get.header(HTTPField.Name("X-Content-Type-Options")!) == "nosniff")
        }
    }
}
