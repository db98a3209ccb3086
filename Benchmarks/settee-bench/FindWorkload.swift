// find: CouchDB's Mango over HTTP. A database of `count` documents {city (20 cities), type (4 kinds), name, n}, a
// json index on ["city", "type"] (POST /{db}/_index), then the selector {"city": "Paris", "type": "hotel"} with
// limit 25 and fields [_id, name] from 16 keep-alive connections. Figures: the index build (the first query after
// the index is created builds it), queries/s against Apache CouchDB 3.5.0's 82/s on the same data (goal 20×), and
// against the same query in SQL++ through the same json index in the same run (goal 0.8×).
import Foundation
import SetteeCore

extension HTTPBench {
    static let findCities = ["Paris", "London", "Rome", "Berlin", "Madrid", "Vienna", "Lisbon", "Prague", "Dublin", "Oslo",
                             "Athens", "Warsaw", "Zurich", "Brussels", "Amsterdam", "Munich", "Milan", "Lyon", "Porto", "Seville"]
    static let findTypes = ["hotel", "landmark", "airport", "restaurant"]
    /// Apache CouchDB 3.5.0 on this data (the issue's figures): queries/s and seconds to build the index.
    static let couchDBFindRate = 82.0
    static let couchDBFindBuildSeconds = 8.2

    func findWorkload(_ admin: HTTPConnection) throws {
        let db = "find"
        try expect(try admin.request(method: "PUT", path: "/\(db)"), [201, 202], "PUT /\(db)")
        // The documents, 1000 per _bulk_docs.
        for start in stride(from: 0, to: count, by: 1000) {
            var body: [UInt8] = Array(#"{"docs":["#.utf8)
            for i in start..<min(count, start + 1000) {
                if i > start { body.append(UInt8(ascii: ",")) }
                let doc: JSON = ["_id": .string(String(format: "f%07d", i)), "city": .string(Self.findCities[i % 20]),
                                 "type": .string(Self.findTypes[(i / 20) % 4]), "name": .string("place \(i)"), "n": .int(Int64(i))]
                body.append(contentsOf: doc.serializedBytes)
            }
            body.append(contentsOf: "]}".utf8)
            try expect(try admin.request(method: "POST", path: "/\(db)/_bulk_docs", body: body), [201], "POST /\(db)/_bulk_docs")
        }
        let expected = (0..<count).filter { $0 % 20 == 0 && ($0 / 20) % 4 == 0 }.prefix(25).map { String(format: "f%07d", $0) }

        // The index, built by the first query.
        let index = #"{"index":{"fields":["city","type"]},"ddoc":"bench","name":"city-type"}"#
        try expect(try admin.request(method: "POST", path: "/\(db)/_index", body: Array(index.utf8)), [200], "POST _index")
        let query = Array(#"{"selector":{"city":"Paris","type":"hotel"},"limit":25,"fields":["_id","name"]}"#.utf8)
        var first: HTTPResponse?
        let build = try measure { first = try admin.request(method: "POST", path: "/\(db)/_find", body: query) }
        try expect(first!, [200], "POST _find")
        let answer = try JSON.parse(first!.body)
        guard answer["docs"]?.arrayValue?.compactMap({ $0["_id"]?.stringValue }) == expected, answer["warning"] == nil else {
            throw HTTPBenchFailure(message: "find: unexpected answer \(String(decoding: first!.body.prefix(300), as: UTF8.self))")
        }
        report(Figure(workload: "find", metric: "json index build of \(count) docs (first _find) vs CouchDB 3.5.0's \(Self.couchDBFindBuildSeconds) s",
                      value: Self.couchDBFindBuildSeconds / build, baseline: nil, baselineName: nil, goal: 10, unit: "× faster"))
        info("find     index build: \(String(format: "%.2f", build)) s (\(Int(Double(count) / build)) docs/s)")

        // SQL++'s same query, through the same json index (SQL++ reads Mango indexes).
        let sql = Array(#"{"query":"SELECT META().id AS _id, name FROM _ WHERE city = 'Paris' AND type = 'hotel' LIMIT 25"}"#.utf8)
        let plan = try admin.request(method: "POST", path: "/\(db)/_query?explain=true", body: sql)
        guard String(decoding: plan.body, as: UTF8.self).contains("Mango json index city-type") else {
            throw HTTPBenchFailure(message: "find: SQL++ doesn't read the json index: \(String(decoding: plan.body.prefix(300), as: UTF8.self))")
        }
        let findRate = try queryRate(path: "/\(db)/_find", body: query, rows: "docs", expected: expected)
        let sqlRate = try queryRate(path: "/\(db)/_query", body: sql, rows: "rows", expected: expected)
        report(Figure(workload: "find", metric: "POST _find (limit 25, 16 keep-alive connections) vs CouchDB 3.5.0",
                      value: findRate, baseline: Self.couchDBFindRate, baselineName: "CouchDB 3.5.0", goal: 20))
        report(Figure(workload: "find", metric: "POST _find vs the same query in SQL++ (same json index)",
                      value: findRate, baseline: sqlRate, baselineName: "SQL++ _query (same run)", goal: 0.8))
    }

    /// Requests/s of one POST over 16 connections (5,000 requests after a warm-up of 500), each answer checked.
    func queryRate(path: String, body: [UInt8], rows: String, expected: [String]?) throws -> Double {
        let port = server!.port
        let encoder = try HTTPConnection(port: port)
        defer { encoder.disconnect() }
        let bytes = encoder.encodeRequest(method: "POST", path: path, body: body)
        func run(_ total: Int) throws -> Double {
            let plan = (0..<getClients).map { k in Array(repeating: bytes, count: total / getClients + (k < total % getClients ? 1 : 0)) }
            var results: [ClientResult<Int>] = []
            let t = try measure {
                results = try PolledHTTPClients.run(port: port, requests: plan) { _, n, status, answer in
                    guard status == 200 else { return "\(path): HTTP \(status): \(String(decoding: answer.prefix(300), as: UTF8.self))" }
                    if n % 50 == 0 {
                        let ids = (try? JSON.parse(Array(answer)))?[rows]?.arrayValue?.compactMap { $0["_id"]?.stringValue }
                        if ids?.count != 25 || (expected != nil && ids != expected) {
                            return "\(path): unexpected answer \(String(decoding: answer.prefix(300), as: UTF8.self))"
                        }
                    }
                    return nil
                }
            }
            try checkClients(results, path)
            return Double(total) / t
        }
        _ = try run(500)
        return try run(5_000)
    }
}
