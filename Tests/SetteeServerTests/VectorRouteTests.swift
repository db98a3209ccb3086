import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SetteeCore
import SetteeTestSupport
import Testing

/// Vector indexes over HTTP against a real `settee serve`: `_index` definitions, `_query` with a `$vector`
/// parameter, and the lazy updater (`_pending` / `_vectors`).
@Suite(.serialized) struct VectorRouteTests {
    static func send(_ client: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil) async throws -> (Int, JSON) {
        try await QueryRouteTests.send(client, method, uri, body)
    }

    @Test func vectorIndexAndQueriesOverHTTP() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/colors").0 == 201)
        let docs = [("red", [1, 0, 0]), ("green", [0, 1, 0]), ("blue", [0, 0, 1]), ("pink", [1, 0, 0.7]),
                    ("white", [1, 1, 1]), ("black", [0, 0, 0])].map { name, v in
            #"{"_id":"\#(name)","color":"\#(name)","vector":[\#(v.map { "\($0)" }.joined(separator: ","))]}"#
        }
        #expect(try await Self.send(client, .post, "/colors/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#).0 == 201)

        // Bad definitions are 400s with the reason; a good one is created and listed with its options.
        let bad = try await Self.send(client, .put, "/colors/_indexes/v", #"{"type":"vector","expressions":["vector"],"dimensions":1,"centroids":2}"#)
        #expect(bad.0 == 400)
        #expect(bad.1["reason"]?.stringValue?.contains("dimensions 1") == true)
        let created = try await Self.send(client, .put, "/colors/_indexes/v",
                                          #"{"type":"vector","expressions":["vector"],"dimensions":3,"centroids":2,"metric":"euclidean","encoding":"none"}"#)
        #expect(created.0 == 201)
        let described = try await Self.send(client, .get, "/colors/_indexes/v")
        #expect(described.1["type"] == "vector")
        #expect(described.1["metric"] == "euclidean")
        #expect(described.1["vectors"] == 6)
        #expect(described.1["trained"] == false)

        // Nearest neighbours through _query with a $vector parameter.
        let q = #"{"query":"SELECT META().id AS id, APPROX_VECTOR_DISTANCE(vector, $vector) AS d FROM _ ORDER BY APPROX_VECTOR_DISTANCE(vector, $vector) LIMIT 2","params":{"vector":[1,0,0.6]}}"#
        let result = try await Self.send(client, .post, "/colors/_query", q)
        #expect(result.0 == 200)
        #expect(result.1["rows"]?[0]?["id"] == "pink")
        #expect(result.1["rows"]?[1]?["id"] == "red")
        let wrong = try await Self.send(client, .post, "/colors/_query",
                                        #"{"query":"SELECT META().id FROM _ ORDER BY APPROX_VECTOR_DISTANCE(vector, $vector) LIMIT 2","params":{"vector":[1,0]}}"#)
        #expect(wrong.0 == 400)
        #expect(wrong.1["error"] == "query_parse_error")
        #expect(wrong.1["reason"]?.stringValue?.contains("2 dimensions") == true)

        // A lazy index: fetch pending values, post vectors back; a stale sequence is not applied.
        #expect(try await Self.send(client, .put, "/colors/_indexes/lazy",
                                    #"{"type":"vector","expressions":["color"],"dimensions":3,"centroids":2,"lazy":true}"#).0 == 201)
        let pending = try await Self.send(client, .get, "/colors/_indexes/lazy/_pending?limit=10")
        #expect(pending.0 == 200)
        guard case .array(let entries)? = pending.1["entries"] else { Issue.record("no entries"); return }
        #expect(entries.count == 6)
        let vectors = entries.map { e -> String in
            let id = e["id"]?.stringValue ?? ""
            let v = id == "red" ? "[1,0,0]" : (id == "black" ? "null" : "[0,1,0]")
            return #"{"id":"\#(id)","seq":\#(e["seq"]?.intValue ?? 0),"vector":\#(v)}"#
        }
        // Change "white" after it was handed out: its vector is stale.
        let white = try await Self.send(client, .get, "/colors/white")
        #expect(try await Self.send(client, .put, "/colors/white?rev=\(white.1["_rev"]?.stringValue ?? "")", #"{"color":"ivory"}"#).0 == 201)
        let applied = try await Self.send(client, .post, "/colors/_indexes/lazy/_vectors", #"{"vectors":[\#(vectors.joined(separator: ","))]}"#)
        #expect(applied.0 == 200)
        #expect(applied.1["applied"] == 5)
        #expect(applied.1["stale"] == ["white"])
        let again = try await Self.send(client, .get, "/colors/_indexes/lazy/_pending")
        #expect(again.1["entries"]?[0]?["value"] == "ivory")
        let lazyQuery = try await Self.send(client, .post, "/colors/_query",
                                            #"{"query":"SELECT META().id AS id FROM _ ORDER BY APPROX_VECTOR_DISTANCE(color, $v) LIMIT 1","params":{"v":[1,0,0]}}"#)
        #expect(lazyQuery.1["rows"] == [["id": "red"]])
        #expect(try await Self.send(client, .get, "/colors/_indexes/v/_pending").0 == 400)
        #expect(try await Self.send(client, .post, "/colors/_indexes/lazy/_vectors", #"{"vectors":[{"id":"red","seq":1,"vector":[1,2]}]}"#).0 == 400)
        server.stop()
    }
}
