import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SetteeCore
import SetteeTestSupport
import Testing

/// Views declared with SQL++ in design documents, queried at `/{db}/_design/{ddoc}/_view/{view}` of a real
/// `settee serve`, with CouchDB's parameters and response shapes.
@Suite(.serialized) struct ViewRouteTests {
    static func send(_ client: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil) async throws -> (Int, JSON) {
        try await QueryRouteTests.send(client, method, uri, body)
    }

    static func enc(_ json: String) -> String {
        json.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? json
    }

    @Test func designDocumentViewsOverHTTP() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/people").0 == 201)
        let docs = [
            #"{"_id":"p1","type":"person","name":"Ann","city":"Oslo","age":31}"#,
            #"{"_id":"p2","type":"person","name":"bob","city":"Oslo","age":45}"#,
            #"{"_id":"p3","type":"person","name":"Carl","city":"Bergen","age":27}"#,
            #"{"_id":"p4","type":"person","name":"ann","city":"Bergen","age":60}"#,
            #"{"_id":"b1","type":"blog","title":"Mobile","body":"Couchbase Lite runs on mobile devices"}"#,
            #"{"_id":"b2","type":"blog","title":"Server","body":"Couchbase Server runs in the data center"}"#,
        ]
        #expect(try await Self.send(client, .post, "/people/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#).0 == 201)

        // A JavaScript view runs in settee-js, beside the SQL++ ones.
        let js = try await Self.send(client, .put, "/people/_design/js", #"{"views":{"v":{"map":"function(doc){ if (doc.type == 'person') emit(doc.name, doc.age) }","reduce":"function(keys, values, rereduce) { return sum(values) }"}}}"#)
        #expect(js.0 == 201)
        let jsView = try await Self.send(client, .get, "/people/_design/js/_view/v?reduce=false")
        #expect(jsView.0 == 200)
        #expect(jsView.1["total_rows"] == 4)
        #expect(jsView.1["rows"]?.arrayValue?.map { $0["key"] } == ["ann", "Ann", "bob", "Carl"])
        #expect(jsView.1["rows"]?[0]?["value"] == 60)
        let jsSum = try await Self.send(client, .get, "/people/_design/js/_view/v")
        #expect(jsSum.1["rows"] == [["key": nil, "value": 163]])
        // A map function that doesn't compile is refused when the design document is written, as CouchDB refuses it.
        let jsBroken = try await Self.send(client, .put, "/people/_design/jsbad", #"{"views":{"v":{"map":"function(doc){ emit(doc._id"}}}"#)
        #expect(jsBroken.0 == 400)
        #expect(jsBroken.1["error"] == "compilation_error")
        #expect(try await Self.send(client, .get, "/people/_design/jsbad/_view/v").0 == 404)
        // Malformed SQL++ definitions are refused with the reason.
        let badExpr = try await Self.send(client, .put, "/people/_design/bad", #"{"views":{"v":{"map":{"key":"name ="}}}}"#)
        #expect(badExpr.0 == 400)
        let badReduce = try await Self.send(client, .put, "/people/_design/bad", #"{"views":{"v":{"map":{"key":"name"},"reduce":"function(k,v){return 1}"}}}"#)
        #expect(badReduce.0 == 400)

        let ddoc = #"""
        {"views":{
          "by_city_name":{"map":{"key":"[city, name]","value":"age","where":"type = 'person'"},"reduce":"_count"},
          "ages":{"map":{"key":"city","value":"age","where":"type = 'person'"},"reduce":"_stats"},
          "names":{"map":{"key":"name","where":"type = 'person'"}},
          "text":{"map":{"text":"body","value":"title"}}}}
        """#
        #expect(try await Self.send(client, .put, "/people/_design/app", ddoc).0 == 201)

        // Map rows: CouchDB collation ("ann" < "Ann" < "bob" < "Carl"), total_rows/offset, include_docs.
        let names = try await Self.send(client, .get, "/people/_design/app/_view/names?include_docs=true")
        #expect(names.0 == 200)
        #expect(names.1["total_rows"] == 4)
        #expect(names.1["offset"] == 0)
        #expect(names.1["rows"]?.arrayValue?.map { $0["key"] } == ["ann", "Ann", "bob", "Carl"])
        #expect(names.1["rows"]?[0]?["id"] == "p4")
        #expect(names.1["rows"]?[0]?["value"] == .null)
        #expect(names.1["rows"]?[0]?["doc"]?["age"] == 60)
        let page = try await Self.send(client, .get, "/people/_design/app/_view/names?startkey=\(Self.enc(#""b""#))&limit=1")
        #expect(page.1["rows"]?.arrayValue?.map { $0["key"] } == ["bob"])
        #expect(page.1["offset"] == 2)
        let desc = try await Self.send(client, .get, "/people/_design/app/_view/names?descending=true&skip=1&limit=2")
        #expect(desc.1["rows"]?.arrayValue?.map { $0["key"] } == ["bob", "Ann"])
        let keys = try await Self.send(client, .post, "/people/_design/app/_view/names", #"{"keys":["Carl","zed","ann"]}"#)
        #expect(keys.1["rows"]?.arrayValue?.map { $0["id"] } == ["p3", "p4"])

        // Reduce: whole view, group_level, group, reduce=false.
        let total = try await Self.send(client, .get, "/people/_design/app/_view/by_city_name")
        #expect(total.1["rows"] == [["key": nil, "value": 4]])
        let byCity = try await Self.send(client, .get, "/people/_design/app/_view/by_city_name?group_level=1")
        #expect(byCity.1["rows"] == [["key": ["Bergen"], "value": 2], ["key": ["Oslo"], "value": 2]])
        let exact = try await Self.send(client, .get, "/people/_design/app/_view/by_city_name?group=true&startkey=\(Self.enc(#"["Oslo"]"#))")
        #expect(exact.1["rows"]?.arrayValue?.count == 2)
        let mapOnly = try await Self.send(client, .get, "/people/_design/app/_view/by_city_name?reduce=false&key=\(Self.enc(#"["Oslo","bob"]"#))")
        #expect(mapOnly.1["rows"] == [["id": "p2", "key": ["Oslo", "bob"], "value": 45]])
        let stats = try await Self.send(client, .get, "/people/_design/app/_view/ages?group=true&key=\(Self.enc(#""Oslo""#))")
        #expect(stats.1["rows"]?[0]?["value"] == ["sum": 76, "count": 2, "min": 31, "max": 45, "sumsqr": 2986])

        // Incremental: an update and a delete show up in the next query.
        let p1 = try await Self.send(client, .get, "/people/p1")
        let rev = p1.1["_rev"]?.stringValue ?? ""
        #expect(try await Self.send(client, .delete, "/people/p1?rev=\(rev)").0 == 200)
        #expect(try await Self.send(client, .get, "/people/_design/app/_view/by_city_name").1["rows"]?[0]?["value"] == 3)

        // Full text: matches as UTF-8 byte ranges, snippets.
        let text = try await Self.send(client, .get, "/people/_design/app/_view/text?full_text=\(Self.enc("lite mobile"))&snippets=true")
        #expect(text.0 == 200)
        #expect(text.1["rows"]?.arrayValue?.count == 1)
        #expect(text.1["rows"]?[0]?["id"] == "b1")
        #expect(text.1["rows"]?[0]?["value"] == "Mobile")
        #expect(text.1["rows"]?[0]?["matches"] == [["range": [10, 4], "term": 0], ["range": [23, 6], "term": 1]])
        #expect(text.1["rows"]?[0]?["snippet"]?.stringValue?.contains("<b>Lite</b>") == true)

        // Query parameters in a POST body; design documents are not mapped (unless options.include_design).
        let posted = try await Self.send(client, .post, "/people/_design/app/_view/names",
                                         #"{"startkey":"b","limit":1,"include_docs":true}"#)
        #expect(posted.1["rows"]?.arrayValue?.map { $0["key"] } == ["bob"])
        #expect(posted.1["rows"]?[0]?["doc"]?["_id"] == "p2")
        #expect(try await Self.send(client, .put, "/people/_design/ids", #"{"views":{"all":{"map":{"key":"META().id"}}}}"#).0 == 201)
        let ids = try await Self.send(client, .get, "/people/_design/ids/_view/all")
        #expect(ids.1["rows"]?.arrayValue?.contains { $0["id"]?.stringValue?.hasPrefix("_design/") == true } == false)
        #expect(ids.1["total_rows"] == 5)  // p2, p3, p4, b1, b2
        let seqd = try await Self.send(client, .get, "/people/_design/app/_view/by_city_name?update_seq=true")
        #expect(seqd.1["update_seq"]?.stringValue?.split(separator: "-").first.flatMap { Int($0) } != nil)  // CouchDB 3's "N-…"
        #expect(try await Self.send(client, .get, "/people/_design/app/_view/names?full_text=ann").1["error"] == "query_parse_error")

        let designDocs = try await Self.send(client, .get, "/people/_design_docs")
        #expect(designDocs.1["rows"]?.arrayValue?.map { $0["id"] } == ["_design/app", "_design/ids", "_design/js"])

        // Bad queries: CouchDB's errors.
        let reversed = try await Self.send(client, .get, "/people/_design/app/_view/names?startkey=\(Self.enc(#""z""#))&endkey=\(Self.enc(#""a""#))")
        #expect(reversed.0 == 400)
        #expect(reversed.1["error"] == "query_parse_error")
        #expect(try await Self.send(client, .get, "/people/_design/app/_view/names?group=true").0 == 400)
        #expect(try await Self.send(client, .get, "/people/_design/app/_view/names?limit=-1").0 == 400)
        #expect(try await Self.send(client, .get, "/people/_design/app/_view/names?startkey=nope").0 == 400)
        #expect(try await Self.send(client, .get, "/people/_design/app/_view/text?full_text=x&reduce=true").1["error"] == "query_parse_error")
        let missingView = try await Self.send(client, .get, "/people/_design/app/_view/nope")
        #expect(missingView.0 == 404)
        #expect(missingView.1["reason"] == "missing_named_view")
        #expect(try await Self.send(client, .get, "/people/_design/none/_view/names").0 == 404)

        // A replicated design document with a JavaScript view runs like one written here.
        let replicated = #"{"new_edits":false,"docs":[{"_id":"_design/couch","_rev":"1-abc","views":{"v":{"map":"function(doc){emit(doc._id)}"}}}]}"#
        #expect(try await Self.send(client, .post, "/people/_bulk_docs", replicated).0 == 201)
        let jsQuery = try await Self.send(client, .get, "/people/_design/couch/_view/v?limit=1")
        #expect(jsQuery.0 == 200)
        let live = try await Self.send(client, .get, "/people/_all_docs?startkey=%22_design0%22")
        #expect(jsQuery.1["total_rows"]?.intValue == live.1["rows"]?.arrayValue.map { Int64($0.count) })
        #expect(jsQuery.1["rows"]?[0]?["key"] == jsQuery.1["rows"]?[0]?["id"])

        // Editing the design document rebuilds the view; _view_cleanup drops indexes of removed views.
        let app = try await Self.send(client, .get, "/people/_design/app")
        let appRev = app.1["_rev"]?.stringValue ?? ""
        let edited = #"{"_rev":"\#(appRev)","views":{"names":{"map":{"key":"lower(name)","where":"type = 'person'"}}}}"#
        #expect(try await Self.send(client, .put, "/people/_design/app", edited).0 == 201)
        let lowered = try await Self.send(client, .get, "/people/_design/app/_view/names")
        #expect(lowered.1["rows"]?.arrayValue?.map { $0["key"] } == ["ann", "bob", "carl"])
        #expect(try await Self.send(client, .post, "/people/_view_cleanup", "{}").0 == 202)
        let info = try await Self.send(client, .get, "/people/_design/app/_info")
        #expect(info.0 == 200)
        #expect(info.1["view_index"]?["views"] == 1)
    }
}
