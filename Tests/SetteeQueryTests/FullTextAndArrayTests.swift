import Foundation
import Testing
import Settee

@Suite struct FullTextTests {
    static let docs = [
        #"{"_id":"h1","type":"hotel","name":"Grand","description":"A quiet hotel near the running track, with a café and a pool"}"#,
        #"{"_id":"h2","type":"hotel","name":"Budget","description":"Cheap rooms near the station. No pool."}"#,
        #"{"_id":"h3","type":"hotel","name":"Seaside","description":"Rooms with sea views; runners welcome, pool and spa"}"#,
        #"{"_id":"l1","type":"landmark","name":"Tower","description":"A tall tower with a view of the sea"}"#,
        #"{"_id":"l2","type":"landmark","name":"Museum","description":"Café de la Gare: a museum of trains"}"#,
    ]

    func ids(_ db: Database, _ sql: String, _ params: [String: JSON] = [:]) throws -> [String] {
        let q = try db.createQuery(sql)
        if !params.isEmpty { q.parameters = Parameters(params) }
        return try q.execute().compactMap { $0.string(forKey: "id") }
    }

    @Test func matchRankStemmingAccentsAndOr() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs)
        try c.createIndex(withName: "descIdx", config: FullTextIndexConfiguration(["description"], language: "en"))
        try c.createIndex(withName: "plain", config: FullTextIndexConfiguration(["description"], ignoreAccents: true))
        // Stemming: "run" finds "running" and "runners"; implicit AND; phrase; prefix; NOT; NEAR; parentheses.
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'run') ORDER BY META().id") == ["h1"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'runner') ORDER BY META().id") == ["h3"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'pool sea') ORDER BY META().id") == ["h3"])
        #expect(try ids(db, #"SELECT META().id FROM _ WHERE MATCH(descIdx, '"near the station"')"#) == ["h2"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(plain, 'statio*')") == ["h2"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'pool NOT spa') ORDER BY META().id") == ["h1", "h2"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'tower NEAR sea')") == ["l1"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, '(tower OR museum) AND sea')") == ["l1"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'view NEAR/2 (sea OR tower)') ORDER BY META().id") == ["h3", "l1"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'trains NEAR/1 sea')") == [])
        // Without stemming "run" matches nothing; accents folded: "cafe" finds "café".
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(plain, 'run')") == [])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(plain, 'cafe') ORDER BY META().id") == ["h1", "l2"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'cafe')") == [])
        // With other WHERE terms, inside OR, with parameters; RANK orders by relevance.
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'pool') AND type = 'hotel' AND name != 'Budget' ORDER BY META().id") == ["h1", "h3"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, 'tower') OR name = 'Budget' ORDER BY META().id") == ["h2", "l1"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE NOT MATCH(descIdx, 'pool') ORDER BY META().id") == ["l1", "l2"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(descIdx, $q) ORDER BY META().id", ["q": "sea"]) == ["h3", "l1"])
        let ranked = try db.createQuery("SELECT META().id, RANK(descIdx) AS r FROM _ WHERE MATCH(descIdx, 'sea OR pool OR view') ORDER BY RANK(descIdx) DESC")
        let rows = try ranked.execute().allResults()
        #expect(rows.first?.string(forKey: "id") == "h3")  // sea, pool and views
        #expect(zip(rows, rows.dropFirst()).allSatisfy { $0.double(forKey: "r") >= $1.double(forKey: "r") })
        #expect(try ranked.explain().contains("full-text index descIdx"))
        // QueryBuilder.
        let qb = try QueryBuilder.select(SelectResult.expression(Meta.id)).from(DataSource.collection(c))
            .where(FullTextFunction.match(withIndex: "descIdx", query: "pool"))
            .orderBy(Ordering.expression(FullTextFunction.rank(withIndex: "descIdx")).descending()).execute()
        #expect(Set(qb.compactMap { $0.string(forKey: "id") }) == ["h1", "h2", "h3"])
    }

    /// Snippets with the caller's markers, and match ranges in UTF-8 bytes per term (terms under NOT not counted).
    @Test func snippetsAndMatchRanges() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs)
        try c.createIndex(withName: "text", config: FullTextIndexConfiguration(["name", "description"], ignoreAccents: true, language: "en"))
        let rows = try db.createQuery("""
            SELECT META().id, FTS_SNIPPET(text, '[', ']') AS snippet, FTS_MATCHES(text) AS matches FROM _
            WHERE MATCH(text, 'cafe pool NOT spa') ORDER BY META().id
            """).execute().allResults()
        #expect(rows.map { $0.string(forKey: "id") } == ["h1"])
        let snippet = try #require(rows.first?.string(forKey: "snippet"))
        #expect(snippet.contains("[café]") && snippet.contains("[pool]"), "\(snippet)")
        let text = "A quiet hotel near the running track, with a café and a pool"
        let matches = try #require(rows.first?.json(forKey: "matches")?.arrayValue)
        let decoded = matches.map { m -> (Int, String) in
            let bytes = Array(text.utf8)
            let o = Int(m["offset"]!.intValue!), l = Int(m["length"]!.intValue!)
            #expect(m["column"] == 1)
            return (Int(m["term"]!.intValue!), String(decoding: bytes[o..<(o + l)], as: UTF8.self))
        }
        #expect(decoded.map(\.0) == [0, 1])
        #expect(decoded.map(\.1) == ["café", "pool"])
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT FTS_SNIPPET(text) FROM _").execute() }
    }

    @Test func fullTextIndexFollowsChangesAndPartialWhere() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs)
        try c.createIndex(withName: "hotelDesc", config: FullTextIndexConfiguration(["description"], where: "type = \"hotel\""))
        let pool = "SELECT META().id FROM _ WHERE MATCH(hotelDesc, 'pool') ORDER BY META().id"
        #expect(try ids(db, pool) == ["h1", "h2", "h3"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(hotelDesc, 'tower')") == [])  // landmarks not indexed
        // A doc leaves the WHERE, one enters it, one is edited, one deleted.
        try load(c, [#"{"_id":"h1","type":"closed","description":"pool"}"#,
                     #"{"_id":"l1","type":"hotel","description":"A tower hotel with a rooftop pool"}"#,
                     #"{"_id":"h2","type":"hotel","description":"Cheap rooms"}"#])
        try c.delete(document: try #require(try c.document(id: "h3")))
        #expect(try ids(db, pool) == ["l1"])
    }

    @Test func badFullTextQueries() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs)
        try c.createIndex(withName: "descIdx", config: FullTextIndexConfiguration(["description"]))
        try c.createIndex(withName: "byName", config: ValueIndexConfiguration(["name"]))
        for (sql, fragment) in [("SELECT META().id FROM _ WHERE MATCH(nope, 'x')", "no index named nope at line 1, column 31"),
                                ("SELECT RANK(descIdx) FROM _", "needs MATCH(descIdx, …) in the WHERE clause at line 1, column 8"),
                                ("SELECT MATCH(descIdx, 'x') FROM _ WHERE MATCH(descIdx, 'y')", "only allowed in WHERE"),
                                ("SELECT META().id FROM _ WHERE MATCH(byName, 'x')", "not a full-text index"),
                                ("SELECT META().id FROM _ ORDER BY RANK(descIdx)", "needs MATCH(descIdx"),
                                ("SELECT META().id FROM _ WHERE MATCH(descIdx, '\"unbalanced')", "unterminated phrase at offset 0"),
                                ("SELECT META().id FROM _ WHERE MATCH(descIdx, 'pool AND')", "expected a word"),
                                ("SELECT META().id FROM _ WHERE MATCH(descIdx, 'a NEAR (b AND c)')", "NEAR takes"),
                                ("SELECT META().id FROM _ WHERE MATCH(descIdx)", "MATCH() takes 2 argument")] {
            do {
                _ = try db.createQuery(sql).execute()
                Issue.record("\(sql) should fail")
            } catch let error as SetteeError {
                #expect(error.code == .queryParseError, "\(sql)")
                #expect(error.reason.contains(fragment), "\(sql): \(error.reason)")
            }
        }
        #expect(throws: SetteeError.self) {
            try c.createIndex(withName: "fr", config: FullTextIndexConfiguration(["description"], language: "fr"))
        }
        #expect(throws: SetteeError.self) {
            try c.createIndex(withName: "bad", config: ArrayIndexConfiguration(path: "[]contacts"))
        }
    }
}

@Suite struct ArrayIndexTests {
    @Test func arrayIndexesServeUnnestQueries() throws {
        let dir = TempDir()
        let db = try dir.open()
        let profiles = try db.createCollection(name: "profiles")
        try load(profiles, [UnnestTests.sam, #"{"_id":"kim","Name":"Kim","likes":["chess","travel"],"contacts":[{"type":"primary","phones":[{"type":"mobile","number":"1"}]}]}"#])
        try profiles.createIndex(withName: "likes", config: ArrayIndexConfiguration(path: "likes"))
        try profiles.createIndex(withName: "nestedArray", config: ArrayIndexConfiguration(path: "contacts[].phones", expressions: ["type"]))
        let travel = try db.createQuery(#"SELECT META().id AS id, interest FROM profiles UNNEST likes AS interest WHERE interest = "travel" ORDER BY id"#)
        #expect(try travel.explain().contains("array index likes"))
        #expect(try travel.execute().map { $0.toJSON() } == [#"{"id":"kim","interest":"travel"}"#, #"{"id":"sam","interest":"travel"}"#])
        let mobile = try db.createQuery("""
            SELECT Name, contact.type, phone.number FROM profiles UNNEST contacts AS contact UNNEST contact.phones AS phone
            WHERE phone.type = "mobile" ORDER BY phone.number
            """)
        #expect(try mobile.explain().contains("array index nestedArray"))
        #expect(try mobile.execute().map { $0.toJSON() } == [
            #"{"Name":"Kim","type":"primary","number":"1"}"#,
            #"{"Name":"Sam","type":"secondary","number":"206-123-6789"}"#,
            #"{"Name":"Sam","type":"primary","number":"310-123-6789"}"#,
        ])
        // Maintenance: an edited array and a deleted document.
        try load(profiles, [#"{"_id":"kim","Name":"Kim","likes":["chess"]}"#])
        #expect(try travel.execute().compactMap { $0.string(forKey: "id") } == ["sam"])
        try profiles.delete(document: try #require(try profiles.document(id: "sam")))
        #expect(try travel.execute().allResults().isEmpty)
        #expect(try mobile.execute().allResults().isEmpty)
    }

    /// A query that reads only the element and META() is answered from the array index alone, element by element
    /// (repeats included, numbers kept as written).
    @Test func coveringArrayIndex() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, [#"{"_id":"a","v":[1, 1.5, 1, "x"]}"#, #"{"_id":"b","v":[2]}"#, #"{"_id":"c","v":"not an array"}"#])
        try c.createIndex(withName: "v", config: ArrayIndexConfiguration(path: "v"))
        let q = try db.createQuery("SELECT META().id AS id, e FROM _ UNNEST v AS e WHERE e >= 1 AND e < 2 ORDER BY e, id")
        let plan = try q.explain()
        #expect(plan.contains("array index v (covering)"))
        #expect(try q.execute().map { $0.toJSON() } == [#"{"id":"a","e":1}"#, #"{"id":"a","e":1}"#, #"{"id":"a","e":1.5}"#])
        // Reading anything else from the document falls back to unnesting it.
        let other = try db.createQuery("SELECT META().id AS id, e, v FROM _ UNNEST v AS e WHERE e = 2")
        #expect(try !other.explain().contains("covering"))
        #expect(try other.execute().map { $0.toJSON() } == [#"{"id":"b","e":2,"v":[2]}"#])
        try load(c, [#"{"_id":"b","v":[3]}"#])
        #expect(try db.createQuery("SELECT META().id FROM _ UNNEST v AS e WHERE e = 2").execute().allResults().isEmpty)
    }

    /// Without ORDER BY, a covering read whose columns are only META().id and the element builds its results
    /// straight from the index rows: the same rows (repeats, numbers as written) as unnesting every document, with
    /// LIMIT and OFFSET applied.
    @Test func coveringArrayIndexStreamsResults() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        var rng = SeededGenerator(seed: 7)
        var docs: [String] = []
        for i in 0..<200 {
            let codes = (0..<Int(rng.next() % 4)).map { _ in rng.next() % 3 == 0 ? "\(rng.next() % 5)" : "\"c\(rng.next() % 5)\"" }
            docs.append(#"{"_id":"d\#(String(format: "%03d", i))","codes":[\#(codes.joined(separator: ","))]}"#)
        }
        try load(c, docs)
        let shapes = [
            "SELECT META().id, code FROM _ UNNEST codes AS code WHERE code = $v",
            "SELECT code AS k, META().id AS id FROM _ UNNEST codes AS code WHERE code = $v",
            "SELECT META().id FROM _ UNNEST codes AS code WHERE code = $v LIMIT 3",
            "SELECT code FROM _ UNNEST codes AS code WHERE code = $v LIMIT 2 OFFSET 1",
        ]
        let values: [JSON] = [.string("c1"), .string("c3"), .int(2), .string("nope")]
        func run(_ sql: String, _ v: JSON) throws -> [String] {
            let q = try db.createQuery(sql)
            q.parameters = Parameters(["v": v])
            return try q.execute().map { $0.toJSON() }
        }
        var expected: [String: [String]] = [:]
        for sql in shapes { for v in values { expected["\(sql) \(v)"] = try run(sql, v) } }
        try c.createIndex(withName: "codes", config: ArrayIndexConfiguration(path: "codes"))
        for sql in shapes {
            #expect(try db.createQuery(sql).explain().contains("array index codes (covering)"), "\(sql)")
            for v in values {
                let got = try run(sql, v)
                // Without ORDER BY the order is the index's; compare as multisets (LIMIT shapes: sizes and membership).
                let all = expected["\(sql.components(separatedBy: " LIMIT").first!) \(v)"] ?? expected["\(sql) \(v)"]!
                if sql.contains("LIMIT") {
                    #expect(got.count == expected["\(sql) \(v)"]!.count, "\(sql) \(v)")
                } else {
                    #expect(got.sorted() == all.sorted(), "\(sql) \(v)")
                }
            }
        }
        // A row with no element columns still counts repeats: a document listing a code twice is two rows.
        try load(c, [#"{"_id":"twice","codes":["zz","zz"]}"#])
        #expect(try run("SELECT META().id FROM _ UNNEST codes AS code WHERE code = $v", .string("zz")).count == 2)
    }

    /// UNNEST through an array index and without one, against the pure evaluator over random nested documents.
    @Test func unnestAgreesWithThePureEvaluator() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        var rng = SeededGenerator(seed: 99)
        func r(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let tags = ["a", "b", "c", "d"]
        var docs: [String: JSONObject] = [:]
        for i in 0..<120 {
            var contacts: [JSON] = []
            for _ in 0..<r(3) {
                var phones: [JSON] = []
                for _ in 0..<r(3) { phones.append(["type": .string(["home", "mobile", "work"][r(3)]), "n": .int(Int64(r(5)))]) }
                contacts.append(["kind": .string(tags[r(4)]), "phones": r(5) == 0 ? "none" : .array(phones)])
            }
            var body: [(String, JSON)] = [("tags", .array((0..<r(4)).map { _ in .string(tags[r(4)]) })), ("contacts", .array(contacts))]
            if r(6) == 0 { body.removeFirst() }
            docs["p\(i)"] = JSONObject(body)
        }
        for r in try c.write(docs.map { RevisionWrite(id: $0.key, body: $0.value, mode: .overwrite) }) { _ = try r.get() }
        let queries = [
            ("SELECT META().id AS id, t FROM _ UNNEST tags AS t WHERE t = 'b'", "tags", ["t = 'b'"]),
            ("SELECT META().id AS id, p.n FROM _ UNNEST contacts AS c UNNEST c.phones AS p WHERE p.type = 'mobile' AND p.n >= 2", "contacts[].phones", []),
        ]
        for indexed in [false, true] {
            if indexed {
                try c.createIndex(withName: "tags", config: ArrayIndexConfiguration(path: "tags"))
                try c.createIndex(withName: "phones", config: ArrayIndexConfiguration(path: "contacts[].phones", expressions: ["type", "n"]))
            }
            for (sql, _, _) in queries {
                let query = try db.createQuery(sql)
                if indexed { #expect(try query.explain().contains("array index"), "\(sql)") }
                let got = try query.execute().map { $0.toJSON() }.sorted()
                // The oracle: unnest in Swift and evaluate the WHERE with the evaluator.
                let statement = try SQLPPParser.parseSelect(sql)
                var expected: [String] = []
                let evaluator = Evaluator()
                for (id, body) in docs {
                    var rows = [Row(primaryName: "_", primary: SourceDocument(id: id, body: .object(body)))]
                    for u in statement.unnests {
                        var next: [Row] = []
                        for row in rows {
                            guard case .array(let items)? = try evaluator.evaluate(u.expression, in: row) else { continue }
                            for item in items {
                                var extended = row
                                extended.others.append((u.alias, SourceDocument(id: id, body: item)))
                                next.append(extended)
                            }
                        }
                        rows = next
                    }
                    for row in rows where try evaluator.isTrue(statement.whereClause!, in: row) {
                        var pairs: [(String, JSON)] = []
                        for (i, item) in statement.results.enumerated() {
                            guard case .expression(let e) = item.kind, let v = try evaluator.evaluate(e, in: row) else { continue }
                            var name = item.alias ?? "$\(i + 1)"
                            if item.alias == nil, case .property(_, let path) = e, case .key(let k)? = path.last { name = k }
                            pairs.append((name, v))
                        }
                        expected.append(JSON.object(JSONObject(pairs)).jsonString)
                    }
                }
                #expect(got == expected.sorted(), "\(sql) indexed: \(indexed)")
            }
        }
    }
}

/// Purging removes a document from every kind of index, and indexes of every kind can be created and queried after
/// a purge (a full-text index once failed there: its purge clean-up named a `doc` column full-text tables don't have).
@Suite struct PurgeWithEveryIndexKindTests {
    static let docs = [
        #"{"_id":"a","city":"Paris","text":"a quiet hotel near the river","tags":["pool","spa"],"v":[1,0,0]}"#,
        #"{"_id":"b","city":"Paris","text":"a loud hostel near the station","tags":["bar"],"v":[0,1,0]}"#,
        #"{"_id":"c","city":"Rome","text":"a quiet villa on the hill","tags":["pool"],"v":[0,0,1]}"#,
    ]

    func ids(_ db: Database, _ sql: String) throws -> [String] {
        try db.createQuery(sql).execute().compactMap { $0.string(forKey: "id") }
    }

    func createEveryKind(_ c: Settee.Collection, suffix: String) throws {
        try c.createIndex(withName: "value" + suffix, config: ValueIndexConfiguration(["city"]))
        try c.createIndex(withName: "text" + suffix, config: FullTextIndexConfiguration(["text"]))
        try c.createIndex(withName: "tags" + suffix, config: ArrayIndexConfiguration(path: "tags"))
        try c.createIndex(withName: "vec" + suffix, config: VectorIndexConfiguration(expression: "v", dimensions: 3, centroids: 1))
    }

    func expectEveryKind(_ db: Database, suffix: String, without purged: Set<String>) throws {
        let all: (String) -> [String] = { ids in ids.split(separator: ",").map(String.init).filter { !purged.contains($0) } }
        #expect(try ids(db, "SELECT META().id AS id FROM _ WHERE city = 'Paris' ORDER BY id") == all("a,b"))
        #expect(try ids(db, "SELECT META().id AS id FROM _ WHERE MATCH(text\(suffix), 'quiet') ORDER BY id") == all("a,c"))
        #expect(try ids(db, "SELECT DISTINCT META().id AS id FROM _ UNNEST tags AS t WHERE t = 'pool' ORDER BY id") == all("a,c"))
        let nearest = try db.createQuery("SELECT META().id AS id FROM _ ORDER BY APPROX_VECTOR_DISTANCE(v, $q) LIMIT 3")
        nearest.parameters = Parameters(["q": .array([.double(1), .double(0.1), .double(0)])])
        #expect(try nearest.execute().compactMap { $0.string(forKey: "id") } == all("a,b,c"))
    }

    @Test func purgeWorksWithEveryIndexKind() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs)
        // Indexes that exist when the purge happens drop the document.
        try createEveryKind(c, suffix: "1")
        try expectEveryKind(db, suffix: "1", without: [])
        try c.purge(id: "a")
        try expectEveryKind(db, suffix: "1", without: ["a"])
        // Indexes created after a purge are built and queried.
        try createEveryKind(c, suffix: "2")
        try expectEveryKind(db, suffix: "2", without: ["a"])
        try c.purge(id: "c")
        try expectEveryKind(db, suffix: "2", without: ["a", "c"])
        try expectEveryKind(db, suffix: "1", without: ["a", "c"])
    }
}
