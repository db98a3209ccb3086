import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SetteeCore
import SetteeTestSupport
import Testing

/// `_query` and `_index` against a real `settee serve` process over real sockets, and `settee query` / `settee index`.
@Suite(.serialized) struct QueryRouteTests {
    static func send(_ client: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil) async throws -> (Int, JSON) {
        let (status, json) = try await LiveServerTests.send(client, method, uri, body)
        return (status, json ?? .null)
    }

    @Test func queriesAndIndexesOverHTTP() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        let client = LiveServerTests.client(server)
        #expect(try await Self.send(client, .put, "/hotels").0 == 201)
        let docs = (0..<50).map { i in
            #"{"_id":"h\#(String(format: "%02d", i))","type":"\#(i % 2 == 0 ? "hotel" : "landmark")","city":"\#(["Paris", "London", "Rome"][i % 3])","stars":\#(i % 5)}"#
        }
        #expect(try await Self.send(client, .post, "/hotels/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#).0 == 201)

        // Create an index; creating it again with the same definition is a no-op; the list shows it built.
        let create = try await Self.send(client, .put, "/hotels/_indexes/TypeCity", #"{"type":"value","expressions":["type","city"]}"#)
        #expect(create.0 == 201)
        #expect(create.1["result"] == "created")
        #expect(try await Self.send(client, .put, "/hotels/_indexes/TypeCity", #"{"expressions":["type","city"]}"#).1["result"] == "exists")
        let list = try await Self.send(client, .get, "/hotels/_indexes")
        #expect(list.1["total_rows"] == 1)
        #expect(list.1["indexes"]?[0]?["expressions"] == ["type", "city"])
        #expect(list.1["indexes"]?[0]?["state"] == "ready")

        // Query with parameters; the rows and the plan.
        let q = #"{"query":"SELECT META().id AS id, stars FROM _ WHERE type = $t AND city = $c ORDER BY stars DESC, META().id LIMIT 3","params":{"t":"hotel","c":"Paris"}}"#
        let result = try await Self.send(client, .post, "/hotels/_query", q)
        #expect(result.0 == 200)
        #expect(result.1["rows"] == [["id": "h24", "stars": 4], ["id": "h18", "stars": 3], ["id": "h48", "stars": 3]])
        let plan = try await Self.send(client, .post, "/hotels/_query?explain=true", q)
        #expect(plan.1["plan"]?.stringValue?.contains("INDEX _default._default.TypeCity") == true)

        // Writes after the index was built are seen by the next query.
        #expect(try await Self.send(client, .put, "/hotels/new1", #"{"type":"hotel","city":"Paris","stars":9}"#).0 == 201)
        #expect(try await Self.send(client, .post, "/hotels/_query", q).1["rows"]?[0]?["id"] == "new1")

        // Aggregates.
        let counts = try await Self.send(client, .post, "/hotels/_query",
                                         #"{"query":"SELECT city, COUNT(*) AS n FROM hotels GROUP BY city ORDER BY city"}"#)
        #expect(counts.1["rows"] == [["city": "London", "n": 17], ["city": "Paris", "n": 18], ["city": "Rome", "n": 16]])

        // Bad input: CouchDB-shaped 400s, nothing changes.
        for body in [#"{"query":"SELECT FROM"}"#, #"{"query":"SELECT x FROM nowhere"}"#, #"{"query":"SELECT NOPE(x) FROM _"}"#] {
            let bad = try await Self.send(client, .post, "/hotels/_query", body)
            #expect(bad.0 == 400, "\(body)")
            #expect(bad.1["error"] == "query_parse_error")
        }
        #expect(try await Self.send(client, .post, "/hotels/_query", #"{"nope":1}"#).0 == 400)
        #expect(try await Self.send(client, .post, "/hotels/_query", "not json").0 == 400)
        #expect(try await Self.send(client, .put, "/hotels/_indexes/x", #"{"expressions":["(a"]}"#).1["error"] == "query_parse_error")
        #expect(try await Self.send(client, .put, "/hotels/_indexes/x", #"{"type":"fancy","expressions":["a"]}"#).0 == 400)
        #expect(try await Self.send(client, .get, "/hotels").1["doc_count"] == 51)
        // (one more document below: ft1)

        // Full-text and array indexes over HTTP.
        #expect(try await Self.send(client, .put, "/hotels/ft1", #"{"type":"hotel","description":"Quiet rooms, a café and a heated pool","tags":["spa","pool"]}"#).0 == 201)
        #expect(try await Self.send(client, .put, "/hotels/_indexes/desc", #"{"type":"fulltext","expressions":["description"],"language":"en","ignoreAccents":true}"#).0 == 201)
        #expect(try await Self.send(client, .put, "/hotels/_indexes/tags", #"{"type":"array","path":"tags"}"#).0 == 201)
        let fts = try await Self.send(client, .post, "/hotels/_query",
                                      #"{"query":"SELECT META().id AS id, FTS_SNIPPET(desc, '<b>', '</b>') AS s FROM _ WHERE MATCH(desc, $q) ORDER BY RANK(desc) DESC","params":{"q":"cafe heat*"}}"#)
        #expect(fts.1["rows"]?[0]?["id"] == "ft1")
        #expect(fts.1["rows"]?[0]?["s"]?.stringValue?.contains("<b>café</b>") == true)
        let unnest = try await Self.send(client, .post, "/hotels/_query?explain=true",
                                         #"{"query":"SELECT META().id FROM _ UNNEST tags AS t WHERE t = 'spa'"}"#)
        #expect(unnest.1["plan"]?.stringValue?.contains("array index tags") == true)
        #expect(try await Self.send(client, .post, "/hotels/_query", #"{"query":"SELECT META().id AS id FROM _ UNNEST tags AS t WHERE t = 'spa'"}"#).1["rows"] == [["id": "ft1"]])
        #expect(try await Self.send(client, .put, "/hotels/_indexes/bad", #"{"type":"fulltext","expressions":["description"],"language":"xx"}"#).0 == 400)
        let badFTS = try await Self.send(client, .post, "/hotels/_query", "{\"query\":\"SELECT 1 FROM _ WHERE MATCH(desc, '\\\"open')\"}")
        #expect(badFTS.1["error"] == "query_parse_error", "\(badFTS)")
        #expect(try await Self.send(client, .delete, "/hotels/_indexes/desc").0 == 200)
        #expect(try await Self.send(client, .delete, "/hotels/_indexes/tags").0 == 200)

        // Delete; deleting again is a 404.
        #expect(try await Self.send(client, .delete, "/hotels/_indexes/TypeCity").0 == 200)
        #expect(try await Self.send(client, .delete, "/hotels/_indexes/TypeCity").0 == 404)
        #expect(try await Self.send(client, .get, "/hotels/_indexes").1["total_rows"] == 0)
        server.stop()

        // The CLI reads the same data directory.
        let cli = try runCLI(["index", "create", "--data", dir.path, "hotels", "ByStars", "stars"])
        #expect(cli.status == 0)
        let rows = try runCLI(["query", "--data", dir.path, "SELECT META().id FROM hotels WHERE stars >= $s ORDER BY META().id",
                               "--param", "s=4"])
        #expect(rows.status == 0)
        #expect(rows.lines.prefix(2) == [#"{"id":"h04"}"#, #"{"id":"h09"}"#])
        #expect(rows.lines.count == 11)  // ft1 has no stars
        let explain = try runCLI(["query", "--data", dir.path, "--explain", "SELECT META().id FROM hotels WHERE stars >= 4"])
        #expect(explain.lines.joined().contains("ByStars"))
        let bad = try runCLI(["query", "--data", dir.path, "SELECT FROM hotels"])
        #expect(bad.status == 1)
        #expect(bad.error.contains("query_parse_error"))
    }

    func runCLI(_ arguments: [String]) throws -> (status: Int32, lines: [String], error: String) {
        let cli = SpawnedProcess()
        cli.executableURL = URL(fileURLWithPath: builtProduct("settee"))
        cli.arguments = arguments
        let out = Pipe(), err = Pipe()
        cli.standardOutput = out
        cli.standardError = err
        try cli.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        cli.waitUntilExit()
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        return (cli.terminationStatus, lines, String(decoding: errData, as: UTF8.self))
    }
}
