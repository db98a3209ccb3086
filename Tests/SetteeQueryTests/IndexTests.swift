import Foundation
import Testing
import Settee
@testable import SetteeIndex

@Suite struct IndexTests {
    static let docs = [
        #"{"_id":"h1","type":"hotel","name":"Ghia","city":"Paris","stars":4}"#,
        #"{"_id":"h2","type":"hotel","name":"Deluxe","city":"London","stars":5}"#,
        #"{"_id":"h3","type":"hotel","name":"Motel","city":"Paris","stars":2}"#,
        #"{"_id":"l1","type":"landmark","name":"Tower","city":"Paris"}"#,
        #"{"_id":"l2","type":"landmark","name":"Bridge","city":"London"}"#,
    ]

    func ids(_ db: Database, _ sql: String) throws -> [String] {
        try db.createQuery(sql).execute().compactMap { $0.string(forKey: "id") }
    }

    @Test func explainShowsTheIndexForIndexedPredicatesOnly() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs)
        try c.createIndex(withName: "TypeNameIndex", config: ValueIndexConfiguration(["type", "name"]))
        #expect(try c.indexes() == ["TypeNameIndex"])
        let indexed = try db.createQuery("SELECT META().id FROM _ WHERE type = 'hotel' AND name > 'E' ORDER BY META().id")
        let plan = try indexed.explain()
        #expect(plan.contains("INDEX _default._default.TypeNameIndex"), "\(plan)")
        #expect(try indexed.execute().compactMap { $0.string(forKey: "id") } == ["h1", "h3"])
        for sql in ["SELECT META().id FROM _ WHERE LOWER(type) = 'hotel'", "SELECT META().id FROM _ WHERE name = 'Ghia'",
                    "SELECT META().id FROM _ WHERE type = 'hotel' OR city = 'Paris'"] {
            let p = try db.createQuery(sql).explain()
            #expect(!p.contains("TypeNameIndex"), "\(sql): \(p)")
            #expect(p.contains("SCAN d"), "\(sql): \(p)")
        }
        // IN and LIKE prefixes use the index too.
        #expect(try db.createQuery("SELECT META().id FROM _ WHERE type IN ('hotel', 'inn')").explain().contains("TypeNameIndex"))
        #expect(try db.createQuery("SELECT META().id FROM _ WHERE type LIKE 'ho%'").explain().contains("TypeNameIndex"))
        #expect(try ids(db, "SELECT META().id FROM _ WHERE type LIKE 'land%' ORDER BY META().id") == ["l1", "l2"])
        // META().id lookups use the primary key.
        #expect(try db.createQuery("SELECT META().id FROM _ WHERE META().id = 'h2'").explain().contains("USING INDEX sqlite_autoindex"))
    }

    /// With the conjuncts an index decided exactly, only what else the query reads is taken from each document:
    /// members read by the projection, ORDER BY or a conjunct the index did not decide still come through.
    @Test func decidedConjunctsLeaveTheRestOfTheQueryReadingTheDocument() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs + [#"{"_id":"h4","type":"inn","name":"Old","city":"Paris","stars":4}"#])
        try c.createIndex(withName: "cityStars", config: ValueIndexConfiguration(["city", "stars"]))
        func rows(_ sql: String) throws -> [String] {
            try db.createQuery(sql).execute().map { String(decoding: JSON.object($0.jsonObject).serializedBytes, as: UTF8.self) }
        }
        let decided = "SELECT META().id, name FROM _ WHERE city = 'Paris' AND stars = 4 ORDER BY META().id"
        #expect(try db.createQuery(decided).explain().contains("cityStars"))
        #expect(try rows(decided) == [#"{"id":"h1","name":"Ghia"}"#, #"{"id":"h4","name":"Old"}"#])
        #expect(try rows("SELECT META().id FROM _ WHERE city = 'Paris' AND stars = 4 AND type = 'hotel'") == [#"{"id":"h1"}"#])
        #expect(try rows("SELECT city, stars FROM _ WHERE city = 'Paris' AND stars = 4 ORDER BY META().id")
                == [#"{"city":"Paris","stars":4}"#, #"{"city":"Paris","stars":4}"#])
        #expect(try rows("SELECT name FROM _ WHERE city = 'Paris' AND stars BETWEEN 2 AND 4 ORDER BY stars, name")
                == [#"{"name":"Motel"}"#, #"{"name":"Ghia"}"#, #"{"name":"Old"}"#])
        #expect(try rows("SELECT META().id FROM _ WHERE city = 'Paris' AND stars > 3 AND name LIKE 'G%'") == [#"{"id":"h1"}"#])
        #expect(try rows("SELECT * FROM _ WHERE city = 'London' AND stars = 5").count == 1)
    }

    /// An array index decides the conjunct on the UNNEST alias; a conjunct on the document itself is still evaluated.
    @Test func arrayIndexLeavesConjunctsOnTheDocument() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, [#"{"_id":"a","type":"hotel","tags":["b","c"]}"#, #"{"_id":"b","type":"inn","tags":["b"]}"#,
                     #"{"_id":"c","type":"hotel","tags":["x"]}"#])
        try c.createIndex(withName: "tags", config: ArrayIndexConfiguration(path: "tags"))
        let sql = "SELECT META().id FROM _ UNNEST tags AS t WHERE type = 'hotel' AND t = 'b'"
        #expect(try db.createQuery(sql).explain().contains("tags"))
        #expect(try ids(db, sql) == ["a"])
        #expect(try ids(db, "SELECT META().id FROM _ UNNEST tags AS t WHERE t = 'b' AND type = 'inn'") == ["b"])
    }

    @Test func indexFollowsUpdatesDeletesPurgesAndRedefinition() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs)
        try c.createIndex(withName: "byCity", config: ValueIndexConfiguration(["city"]))
        let paris = "SELECT META().id FROM _ WHERE city = 'Paris' ORDER BY META().id"
        #expect(try ids(db, paris) == ["h1", "h3", "l1"])
        let moved = try #require(try c.document(id: "h1")).toMutable()
        moved.setString("Rome", forKey: "city")
        try c.save(document: moved)
        #expect(try ids(db, paris) == ["h3", "l1"])
        try c.delete(document: try #require(try c.document(id: "h3")))
        #expect(try ids(db, paris) == ["l1"])
        try c.purge(id: "l1")
        #expect(try ids(db, paris) == [])
        try load(c, [#"{"_id":"l1","city":"Paris"}"#, #"{"_id":"n1","city":"Paris"}"#])
        #expect(try ids(db, paris) == ["l1", "n1"])
        // Same name, new definition: rebuilt.
        try c.createIndex(withName: "byCity", config: ValueIndexConfiguration(["name"]))
        #expect(try db.createQuery(paris).explain().contains("byCity") == false)
        #expect(try db.createQuery("SELECT META().id FROM _ WHERE name = 'Tower'").explain().contains("byCity"))
        // Definitions and entries survive reopening; writes made while closed are caught up.
        db.close()
        let reopened = try dir.open()
        let c2 = try reopened.defaultCollection()
        try load(c2, [#"{"_id":"t2","name":"Tower"}"#])
        #expect(try c2.indexes() == ["byCity"])
        #expect(try ids(reopened, "SELECT META().id FROM _ WHERE name = 'Tower' ORDER BY META().id") == ["t2"])
        try c2.deleteIndex(forName: "byCity")
        #expect(try c2.indexes() == [])
        #expect(try reopened.createQuery("SELECT META().id FROM _ WHERE name = 'Tower'").explain().contains("byCity") == false)
    }

    @Test func partialIndexesFollowTheTwoRules() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs + [#"{"_id":"x1","b":456,"c":1}"#, #"{"_id":"x2","b":456,"c":0}"#, #"{"_id":"x3","b":456}"#])
        try c.createIndex(withName: "HotelCityIndex", config: ValueIndexConfiguration(["city"], where: "type = \"hotel\""))
        // Rule 1: a term of the query's WHERE is a term of the index's WHERE.
        let rule1 = try db.createQuery("SELECT META().id FROM _ WHERE type = 'hotel' AND city = 'Paris' ORDER BY META().id")
        #expect(try rule1.explain().contains("HotelCityIndex"))
        #expect(try rule1.execute().compactMap { $0.string(forKey: "id") } == ["h1", "h3"])
        let notImplied = try db.createQuery("SELECT META().id FROM _ WHERE city = 'Paris' ORDER BY META().id")
        #expect(try !notImplied.explain().contains("HotelCityIndex"))
        #expect(try notImplied.execute().compactMap { $0.string(forKey: "id") } == ["h1", "h3", "l1"])
        // Rule 2: "z IS NOT MISSING" in the index, a comparison on z (other than IS) in the query.
        try c.createIndex(withName: "bWhereC", config: ValueIndexConfiguration(["b"], where: "c IS NOT MISSING"))
        let rule2 = try db.createQuery("SELECT META().id FROM _ WHERE b = 456 AND c <> 0")
        #expect(try rule2.explain().contains("bWhereC"))
        #expect(try rule2.execute().compactMap { $0.string(forKey: "id") } == ["x1"])
        let onlyB = try db.createQuery("SELECT META().id FROM _ WHERE b = 456 ORDER BY META().id")
        #expect(try !onlyB.explain().contains("bWhereC"))
        #expect(try onlyB.execute().compactMap { $0.string(forKey: "id") } == ["x1", "x2", "x3"])
        // IS NOT NULL / IS VALUED in the index need rule 1.
        try c.createIndex(withName: "bWhereValued", config: ValueIndexConfiguration(["b"], where: "c IS VALUED"))
        #expect(try !db.createQuery("SELECT META().id FROM _ WHERE b = 456 AND c > 0").explain().contains("bWhereValued"))
        #expect(try db.createQuery("SELECT META().id FROM _ WHERE b = 456 AND c IS VALUED").explain().contains("bWhereValued"))
    }

    /// A MISSING key is not an index entry; a null key is (so `IS NULL` served by the index finds only nulls).
    @Test func missingAndNullKeysStayDistinctInTheIndex() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, [#"{"_id":"a","type":"route"}"#, #"{"_id":"b","name":null}"#, #"{"_id":"c","name":"x"}"#])
        try c.createIndex(withName: "name", config: ValueIndexConfiguration(["name"]))
        try load(c, [#"{"_id":"d","type":"route"}"#, #"{"_id":"c","type":"x"}"#, #"{"_id":"e","name":null}"#])
        let query = try db.createQuery("SELECT META().id FROM _ WHERE name IS NULL ORDER BY META().id")
        #expect(try query.explain().contains("INDEX _default._default.name"))
        #expect(try query.execute().compactMap { $0.string(forKey: "id") } == ["b", "e"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE name IS NOT MISSING ORDER BY META().id") == ["b", "e"])
    }

    /// Dropping and re-creating an index while background catch-ups run: the new index is always built in full
    /// (index ids are never reused, so a stale catch-up cannot mark it current or write into it).
    @Test func recreatedIndexesAreBuiltWhileBackgroundCatchUpsRun() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try c.createIndex(withName: "byN", config: ValueIndexConfiguration(["n"]))
        var total = 0
        for round in 0..<15 {
            try load(c, (0..<50).map { #"{"_id":"r\#(round)-\#($0)","n":\#($0 % 5),"m":\#($0 % 7)}"# })
            total += 50
            try c.deleteIndex(forName: "byN")
            try c.createIndex(withName: "byN", config: ValueIndexConfiguration(round % 2 == 0 ? ["n"] : ["n", "m"]))
            let query = try db.createQuery("SELECT COUNT(*) AS k FROM _ WHERE n = 3")
            #expect(try query.explain().contains("byN"))
            #expect(try query.execute().allResults().first?.int(forKey: "k") == total / 5, "round \(round)")
        }
    }

    /// A value index's first build reads the table in chunks (IndexManager+Build) while other writes go on; the
    /// feed then applies what changed meanwhile — updates, removed keys, deletions, new documents — so the index
    /// answers exactly as a scan does.
    @Test func firstBuildFromTheTableMeetsWritesMadeDuringIt() async throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        let count = IndexManager.buildChunk * 2 + 500  // three chunks
        for start in stride(from: 0, to: count, by: 5_000) {
            try load(c, (start..<min(count, start + 5_000)).map { i in
                i % 11 == 0 ? #"{"_id":"d\#(i)","other":\#(i)}"# : #"{"_id":"d\#(i)","n":\#(i % 10),"a":{"b":\#(i % 3)}}"#
            })
        }
        // Writes from another task while the index builds: every kind of change, spread over the whole table.
        let writer = Task.detached {
            for round in 0..<40 {
                var writes: [RevisionWrite] = []
                for k in 0..<50 {
                    let i = (round * 977 + k * 131) % count
                    switch k % 4 {
                    case 0: writes.append(RevisionWrite(id: "d\(i)", body: ["n": 3], mode: .overwrite))
                    case 1: writes.append(RevisionWrite(id: "d\(i)", body: ["other": 1], mode: .overwrite))
                    case 2: writes.append(RevisionWrite(id: "d\(i)", body: [:], deleted: true, mode: .overwrite))
                    default: writes.append(RevisionWrite(id: "new\(round)-\(k)", body: ["n": 3], mode: .overwrite))
                    }
                }
                for result in try c.write(writes) { _ = try result.get() }
            }
        }
        try c.createIndex(withName: "byN", config: ValueIndexConfiguration(["n"]))
        try c.createIndex(withName: "byAB", config: ValueIndexConfiguration(["a.b"]))
        try await writer.value
        for (indexed, scanned, index) in [("n = 3", "n + 0 = 3", "byN"), ("n = 7", "n + 0 = 7", "byN"),
                                          ("a.b = 1", "a.b + 0 = 1", "byAB")] {
            let query = try db.createQuery("SELECT META().id FROM _ WHERE \(indexed) ORDER BY META().id")
            #expect(try query.explain().contains(index))
            let viaIndex = try ids(db, "SELECT META().id FROM _ WHERE \(indexed) ORDER BY META().id")
            let viaScan = try ids(db, "SELECT META().id FROM _ WHERE \(scanned) ORDER BY META().id")
            #expect(!viaIndex.isEmpty && viaIndex == viaScan, "\(indexed): \(viaIndex.count) rows, scan \(viaScan.count)")
        }
    }

    @Test func indexBuilderAndJoinsUseIndexes() throws {
        let dir = TempDir()
        let db = try dir.open()
        let airlines = try db.createCollection(name: "airlines")
        let routes = try db.createCollection(name: "routes")
        try load(airlines, [#"{"_id":"a1","code":"Q5","name":"40-Mile Air"}"#, #"{"_id":"a2","code":"AA","name":"Alaskan"}"#])
        try load(routes, [#"{"_id":"r1","airline":"Q5","to":"CDG"}"#, #"{"_id":"r2","airline":"AA","to":"LHR"}"#,
                          #"{"_id":"r3","airline":"AA","to":"OSL"}"#])
        try routes.createIndex(IndexBuilder.valueIndex(items: ValueIndexItem.property("airline")), name: "routeAirline")
        let query = try db.createQuery("""
            SELECT a.name, r.to FROM airlines AS a JOIN routes AS r ON r.airline = a.code ORDER BY r.to
            """)
        #expect(try query.explain().contains("value index routeAirline"))
        #expect(try query.execute().map { $0.toJSON() } == [
            #"{"name":"40-Mile Air","to":"CDG"}"#, #"{"name":"Alaskan","to":"LHR"}"#, #"{"name":"Alaskan","to":"OSL"}"#,
        ])
    }

    @Test func backgroundCatchUpFollowsWrites() async throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try c.createIndex(withName: "byType", config: ValueIndexConfiguration(["type"]))
        try load(c, Self.docs)
        let info = try #require(try c.index(withName: "byType")).info
        // Without any query, the index absorbs the writes shortly after the commit.
        var absorbed = false
        for _ in 0..<200 {
            let lastSeq = try IndexManager.shared(for: db).lastSequence(of: info)
            if lastSeq >= db.lastSequence { absorbed = true; break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(absorbed)
    }

    @Test func liveQueryReportsNewResults() async throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        try load(c, Self.docs)
        let query = try db.createQuery("SELECT META().id FROM _ WHERE city = 'Paris' ORDER BY META().id")
        let seen = LockedList()
        let token = query.addChangeListener { change in
            seen.append(change.results?.compactMap { $0.string(forKey: "id") } ?? ["error"])
        }
        defer { token.remove() }
        try await waitUntil { seen.last == ["h1", "h3", "l1"] }
        try load(c, [#"{"_id":"p9","city":"Paris"}"#])
        try await waitUntil { seen.last == ["h1", "h3", "l1", "p9"] }
        try load(c, [#"{"_id":"z1","city":"Oslo"}"#])  // not a result change
        try await Task.sleep(for: .milliseconds(200))
        #expect(seen.count == 2)
    }
}

final class LockedList: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [[String]] = []
    func append(_ item: [String]) { lock.withLock { items.append(item) } }
    var last: [String]? { lock.withLock { items.last } }
    var count: Int { lock.withLock { items.count } }
}

func waitUntil(_ condition: @Sendable () -> Bool) async throws {
    for _ in 0..<300 {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("condition not met in 3 s")
}
