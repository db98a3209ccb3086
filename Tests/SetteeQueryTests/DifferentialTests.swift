import Foundation
import Testing
import Settee

/// Randomized queries over randomized documents, run through SQLite (access paths over value indexes, partial
/// indexes and the id column) and through the pure evaluator over every document in memory: the answers must be
/// identical. Documents change between rounds so index maintenance is exercised too.
@Suite struct DifferentialTests {
    struct Generator {
        var rng: SeededGenerator
        mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
        mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
        mutating func pick<T>(_ items: [T]) -> T { items[int(0...(items.count - 1))] }

        static let words = ["alpha", "beta", "Beta", "gamma", "delta", "", "al", "alp", "zeta", "ALPHA", "b%t", "é"]
        static let types = ["hotel", "landmark", "airport", "route"]

        mutating func scalar() -> JSON {
            switch int(0...7) {
            case 0: return .null
            case 1: return .bool(chance(0.5))
            case 2, 3: return .int(Int64(int(-5...20)))
            case 4: return .double(Double(int(-50...200)) / 10)
            default: return .string(pick(Self.words))
            }
        }

        mutating func document() -> JSONObject {
            var pairs: [(String, JSON)] = []
            if chance(0.9) { pairs.append(("type", .string(pick(Self.types)))) }
            if chance(0.85) { pairs.append(("n", chance(0.8) ? .int(Int64(int(-5...20))) : scalar())) }
            if chance(0.8) { pairs.append(("name", chance(0.85) ? .string(pick(Self.words)) : scalar())) }
            if chance(0.6) { pairs.append(("tags", .array((0..<int(0...3)).map { _ in .string(pick(Self.words)) }))) }
            if chance(0.6) {
                var geo: [(String, JSON)] = []
                if chance(0.8) { geo.append(("alt", .int(Int64(int(0...1000))))) }
                pairs.append(("geo", .object(JSONObject(geo))))
            }
            if chance(0.3) { pairs.append(("flag", .bool(chance(0.5)))) }
            return JSONObject(pairs)
        }

        static let properties = ["type", "n", "name", "geo.alt", "flag", "tags", "missing_prop"]

        mutating func literal() -> String {
            switch int(0...9) {
            case 0: return "null"
            case 1: return chance(0.5) ? "true" : "false"
            case 2, 3, 4: return "\(int(-5...20))"
            case 5: return "\(Double(int(-50...200)) / 10)"
            case 6: return "'\(pick(Self.types))'"
            default: return "'\(pick(Self.words).replacingOccurrences(of: "'", with: "''"))'"
            }
        }

        mutating func predicate(depth: Int = 0) -> String {
            let p = pick(Self.properties)
            switch int(0...(depth < 2 ? 13 : 10)) {
            case 0, 1, 2: return "\(p) \(pick(["=", "!=", "<", "<=", ">", ">=", "<>", "=="])) \(literal())"
            case 3: return "\(literal()) \(pick(["=", "<", ">="])) \(p)"
            case 4: return "\(p) BETWEEN \(literal()) AND \(literal())"
            case 5: return "\(p) \(chance(0.2) ? "NOT " : "")IN (\(literal()), \(literal()), \(literal()))"
            case 6: return "\(p) \(chance(0.2) ? "NOT " : "")LIKE '\(pick(["al%", "%a", "b_ta", "%", "B%", "b\\%t", "_"]))'"
            case 7: return "\(p) IS \(chance(0.5) ? "NOT " : "")\(pick(["NULL", "MISSING", "VALUED"]))"
            case 8: return "type = '\(pick(Self.types))'"
            case 9: return "ANY t IN tags SATISFIES t \(pick(["=", "<", ">"])) \(literal()) END"
            case 10: return "META().id \(pick(["=", ">", "<"])) 'd\(int(0...150))'"
            case 11: return "(\(predicate(depth: depth + 1)) OR \(predicate(depth: depth + 1)))"
            case 12: return "NOT (\(predicate(depth: depth + 1)))"
            default: return "(\(predicate(depth: depth + 1)) AND \(predicate(depth: depth + 1)))"
            }
        }

        mutating func whereClause() -> String {
            (0..<int(1...3)).map { _ in predicate() }.joined(separator: " AND ")
        }
    }

    @Test func sqliteAccessPathsAgreeWithThePureEvaluator() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        var g = Generator(rng: SeededGenerator(seed: 20261122))
        var docs: [String: JSONObject] = [:]
        func write(_ count: Int) throws {
            var writes: [RevisionWrite] = []
            for _ in 0..<count {
                let id = "d\(g.int(0...150))"
                if docs[id] != nil && g.chance(0.15) {
                    docs[id] = nil
                    writes.append(RevisionWrite(id: id, body: JSONObject(), deleted: true, mode: .overwrite))
                } else {
                    let body = g.document()
                    docs[id] = body
                    writes.append(RevisionWrite(id: id, body: body, mode: .overwrite))
                }
            }
            // One write per id per batch, last one wins (the store rejects a second edit in one batch otherwise).
            var seen = Set<String>()
            let unique = writes.reversed().filter { seen.insert($0.id).inserted }.reversed()
            for r in try c.write(Array(unique)) { _ = try r.get() }
        }
        try write(200)
        try c.createIndex(withName: "typeN", config: ValueIndexConfiguration(["type", "n"]))
        try c.createIndex(withName: "name", config: ValueIndexConfiguration(["name"]))
        try c.createIndex(withName: "alt", config: ValueIndexConfiguration(["geo.alt"], where: "type = 'airport'"))
        try c.createIndex(withName: "flagged", config: ValueIndexConfiguration(["n"], where: "flag IS NOT MISSING"))

        let evaluator = Evaluator()
        var queries = 0, indexed = 0
        for round in 0..<10 {
            if round > 0 { try write(40) }
            if round == 5 {  // purge a few and redefine an index mid-way
                for id in docs.keys.sorted().prefix(5) { try c.purge(id: id); docs[id] = nil }
                try c.createIndex(withName: "name", config: ValueIndexConfiguration(["name", "n"]))
            }
            for _ in 0..<110 {
                let condition = g.whereClause()
                let sql = "SELECT META().id FROM _ WHERE \(condition) ORDER BY META().id"
                let query = try db.createQuery(sql)
                if try query.explain().contains("USING") { indexed += 1 }
                let viaSQLite = try query.execute().compactMap { $0.string(forKey: "id") }
                let expression = try SQLPPParser.parseExpression(condition)
                var viaEvaluator: [String] = []
                for (id, body) in docs {
                    let doc = SourceDocument(id: id, body: .object(body))
                    if try evaluator.isTrue(expression, in: Row(primaryName: "_", primary: doc)) { viaEvaluator.append(id) }
                }
                viaEvaluator.sort()
                #expect(viaSQLite == viaEvaluator, "\(sql)")
                if viaSQLite != viaEvaluator {
                    for id in Set(viaSQLite).symmetricDifference(viaEvaluator).sorted() {
                        print("DIFF \(id): stored \(try c.document(id: id)?.toJSON() ?? "nil") expected \(docs[id].map { JSON.object($0).jsonString } ?? "nil")")
                    }
                    print("PLAN \(try query.explain())")
                }
                if viaSQLite != viaEvaluator { return }
                queries += 1
            }
        }
        #expect(queries >= 1000)
        #expect(indexed > 200, "only \(indexed) queries used an index")
    }

    @Test func printedExpressionsParseBackToTheSameTree() throws {
        var g = Generator(rng: SeededGenerator(seed: 7))
        for _ in 0..<1000 {
            let text = g.whereClause()
            let parsed = try SQLPPParser.parseExpression(text)
            #expect(try SQLPPParser.parseExpression(parsed.description) == parsed, "\(text) → \(parsed)")
        }
        let statement = try SQLPPParser.parseSelect(
            "SELECT DISTINCT a.x AS y, COUNT(*), b.* FROM s.c AS a LEFT JOIN d AS b ON META(a).id = b.ref WHERE a.v > $p GROUP BY a.x HAVING COUNT(*) > 1 ORDER BY y DESC LIMIT 5 OFFSET 2")
        #expect(try SQLPPParser.parseSelect(statement.description) == statement)
    }
}
