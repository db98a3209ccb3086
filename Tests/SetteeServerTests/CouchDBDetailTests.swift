import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SetteeCore
import SetteeTestSupport
import Testing

/// Small differences from CouchDB that client libraries' test suites trip on (issue 44), each checked against a
/// real `settee serve` over real sockets: query strings split at `;`, `_explain` of a query no index serves,
/// `last_seq` of a descending feed, the `last-event-id` option, rewrite rules that climb to the database, and an
/// empty gzip-marked body.
@Suite(.serialized) struct CouchDBDetailTests {
    static func send(_ client: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil) async throws -> (Int, JSON) {
        let (status, json) = try await LiveServerTests.send(client, method, uri, body)
        return (status, json ?? .null)
    }

    /// A node with database `db` holding documents `a`, `b`, `c` (sequences 1, 2, 3).
    static func nodeWithDocuments() async throws -> (TempDir, ServerProcess, TestClient) {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await send(client, .put, "/db").0 == 201)
        for id in ["a", "b", "c"] {
            #expect(try await send(client, .put, "/db/\(id)", #"{"city":"Paris","rank":1,"name":"\#(id)"}"#).0 == 201)
        }
        return (dir, server, client)
    }

    static func seq(_ value: JSON?) -> Int? {
        guard let text = value?.stringValue ?? value.map(\.jsonString) else { return nil }
        return Int(text.prefix { $0.isNumber })
    }

    /// `;` separates query parameters as `&` does (mochiweb's `parse_qs`), for `_index` and every other route.
    /// Bad `_index` list parameters stay a 500 `invalid_list_index_params`, as CouchDB's `mango_error` has it.
    @Test func semicolonsSeparateQueryParametersLikeAmpersands() async throws {
        let (dir, server, client) = try await Self.nodeWithDocuments()
        defer { server.stop(); _ = dir }
        for field in ["city", "rank", "name"] {
            #expect(try await Self.send(client, .post, "/db/_index", #"{"index":{"fields":["\#(field)"]},"name":"\#(field)"}"#).0 == 200)
        }
        let semicolons = try await Self.send(client, .get, "/db/_index?limit=2;skip=1")
        #expect(semicolons.0 == 200)
        #expect(semicolons.1["total_rows"] == 4)
        #expect(semicolons.1["indexes"]?.arrayValue?.count == 2)
        #expect(semicolons.1 == (try await Self.send(client, .get, "/db/_index?limit=2&skip=1")).1)
        let docs = try await Self.send(client, .get, "/db/_all_docs?startkey=%22a%22;limit=1;skip=1;include_docs=true")
        #expect(docs.1["rows"]?.arrayValue?.map { $0["id"]?.stringValue } == ["b"])
        #expect(docs.1["rows"]?[0]?["doc"]?["name"] == "b")
        let bad = try await Self.send(client, .get, "/db/_index?limit=0")
        #expect(bad.0 == 500)
        #expect(bad.1["error"] == "invalid_list_index_params")
    }

    /// `_explain` of a query no index can serve (a sort on an unindexed field) answers 200 as CouchDB 3.5 does:
    /// no index, each candidate with why it can't be used, the selector's hints; `_find` still refuses it.
    @Test func explainAnswersForAQueryNoIndexCanServe() async throws {
        let (dir, server, client) = try await Self.nodeWithDocuments()
        defer { server.stop(); _ = dir }
        #expect(try await Self.send(client, .post, "/db/_index", #"{"index":{"fields":["city"]},"ddoc":"by-city","name":"city"}"#).0 == 200)
        let query = #"{"selector":{"rank":{"$gt":0}},"sort":["name"]}"#
        let find = try await Self.send(client, .post, "/db/_find", query)
        #expect(find.0 == 400)
        #expect(find.1["error"] == "no_usable_index")

        let (status, explain) = try await Self.send(client, .post, "/db/_explain", query)
        #expect(status == 200)
        #expect(explain["dbname"] == "db")
        #expect(explain["index"] == .null)
        #expect(explain["mrargs"] == nil)
        #expect(explain["covering"] == nil)
        #expect(explain["selector_hints"]?[0]?["indexable_fields"] == ["rank"])
        let candidates = explain["index_candidates"]?.arrayValue ?? []
        #expect(candidates.count == 2)
        func analysis(_ name: String) -> JSON? { candidates.first { $0["index"]?["name"]?.stringValue == name }?["analysis"] }
        #expect(analysis("_all_docs")?["usable"] == false)
        #expect(analysis("_all_docs")?["reasons"] == [["name": "sort_order_mismatch"]])
        #expect(analysis("city")?["usable"] == false)
        #expect(analysis("city")?["reasons"] == [["name": "field_mismatch"]])
        #expect(analysis("city")?["ranking"] == 1)
        // A query an index serves still explains that index.
        let served = try await Self.send(client, .post, "/db/_explain", #"{"selector":{"city":"Paris"}}"#)
        #expect(served.1["index"]?["name"] == "city")
        #expect(served.1["mrargs"] != nil)
    }

    /// A descending feed's `last_seq` is its last row's sequence (the oldest), as CouchDB's changes enumerator
    /// keeps it, not the database's newest.
    @Test func descendingChangesEndAtTheLastRowsSequence() async throws {
        let (dir, server, client) = try await Self.nodeWithDocuments()
        defer { server.stop(); _ = dir }
        let all = try await Self.send(client, .get, "/db/_changes?descending=true")
        #expect(all.1["results"]?.arrayValue?.map { $0["id"]?.stringValue } == ["c", "b", "a"])
        #expect(Self.seq(all.1["last_seq"]) == 1)
        let two = try await Self.send(client, .get, "/db/_changes?descending=true&limit=2")
        #expect(Self.seq(two.1["last_seq"]) == 2)
        let forward = try await Self.send(client, .get, "/db/_changes")
        #expect(Self.seq(forward.1["last_seq"]) == 3)
    }

    /// `?last-event-id=` stands for `since` (CouchDB's `parse_changes_query`), as the `Last-Event-ID` header does
    /// for an eventsource feed.
    @Test func lastEventIDQueryParameterStandsForSince() async throws {
        let (dir, server, client) = try await Self.nodeWithDocuments()
        defer { server.stop(); _ = dir }
        let normal = try await Self.send(client, .get, "/db/_changes?last-event-id=2")
        #expect(normal.1["results"]?.arrayValue?.map { $0["id"]?.stringValue } == ["c"])
        let events = try await client.execute(.init("/db/_changes?feed=eventsource&last-event-id=2&timeout=200",
                                                     method: .get, headers: LiveServerTests.auth))
        let text = String(buffer: events.body ?? ByteBuffer())
        #expect(text.contains(#""id":"c""#))
        #expect(!text.contains(#""id":"a""#) && !text.contains(#""id":"b""#))
    }

    /// A rule may climb from its design document to the database with two `..` (`"to": "/../../doc"` is relative
    /// to the design document, as `"../../doc"` is); a rule with a third is refused, as `[chttpd] secure_rewrites`
    /// refuses it.
    @Test func rewriteRulesClimbTwoLevelsToTheirDatabase() async throws {
        let (dir, server, client) = try await Self.nodeWithDocuments()
        defer { server.stop(); _ = dir }
        let rules = #"[{"from":"abs","to":"/../../a"},{"from":"rel","to":"../../b"},{"from":"up/:id","to":"../../:id"}]"#
        #expect(try await Self.send(client, .put, "/db/_design/app", #"{"rewrites":\#(rules)}"#).0 == 201)
        #expect(try await Self.send(client, .get, "/db/_design/app/_rewrite/abs").1["_id"] == "a")
        #expect(try await Self.send(client, .get, "/db/_design/app/_rewrite/rel").1["_id"] == "b")
        #expect(try await Self.send(client, .get, "/db/_design/app/_rewrite/up/c").1["_id"] == "c")
        let deep = #"[{"from":"x","to":"../../../db/a"}]"#
        #expect(try await Self.send(client, .put, "/db/_design/deep", #"{"rewrites":\#(deep)}"#).0 == 201)
        let refused = try await Self.send(client, .get, "/db/_design/deep/_rewrite/x")
        #expect(refused.0 == 500)
        #expect(refused.1["error"] == "insecure_rewrite_rule")
    }

    /// An empty body marked `Content-Encoding: gzip` is an empty body: `PUT /db/doc/att` stores an empty attachment,
    /// as CouchDB does.
    @Test func emptyGzipMarkedBodyStoresAnEmptyAttachment() async throws {
        let (dir, server, client) = try await Self.nodeWithDocuments()
        defer { server.stop(); _ = dir }
        var headers = LiveServerTests.auth
        headers[.contentType] = "text/plain"
        headers[.contentEncoding] = "gzip"
        let put = try await client.execute(.init("/db/empty/att.txt", method: .put, headers: headers, body: ByteBuffer()))
        #expect(put.status == .created)
        let doc = try await Self.send(client, .get, "/db/empty")
        #expect(doc.1["_attachments"]?["att.txt"]?["length"] == 0)
        let att = try await client.execute(.init("/db/empty/att.txt", method: .get, headers: LiveServerTests.auth))
        #expect(att.status == .ok)
        #expect(att.body?.readableBytes ?? 0 == 0)
    }
}
