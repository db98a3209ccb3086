import Foundation
import Testing
import Settee

/// SQL++ reading Mango json indexes: one planner answers both languages. The index narrows which documents are
/// read (equality on its leading columns, numeric ranges on the next), and SQL++ decides its WHERE on each, so
/// every answer equals the same query over a scan — checked here over random documents with mixed-case strings.
@Suite(.serialized) struct MangoFromSQLPPTests {
    /// Queries, and whether a json index serves them.
    static let queries: [(sql: String, viaMango: Bool)] = [
        (#"SELECT META().id FROM _ WHERE b = "apple" AND a = 3"#, true),
        (#"SELECT META().id FROM _ WHERE b = "Apple" AND a >= 2 AND a < 7"#, true),
        (#"SELECT META().id FROM _ WHERE b = "banana" AND a > 4.5"#, true),
        (#"SELECT META().id FROM _ WHERE b = "Banana" AND a <= 3"#, true),
        (#"SELECT META().id FROM _ WHERE b = "cherry" AND a IS NOT MISSING"#, true),
        (#"SELECT META().id FROM _ WHERE b = "elder" AND a IS NULL"#, true),
        // A string range isn't a range in ICU's order: only the equality narrows.
        (#"SELECT META().id FROM _ WHERE b = "fig" AND a < "cherry""#, true),
        (#"SELECT META().id FROM _ WHERE b = $b AND a = $a"#, true),
        (#"SELECT META().id FROM _ WHERE n.x = 2"#, true),
        (#"SELECT META().id FROM _ WHERE n.x > 1 AND n.x < 4 ORDER BY META().id"#, true),
        // Not a conjunction on the column; nothing narrows the first column.
        (#"SELECT META().id FROM _ WHERE n.x = 1 OR n.x = 2"#, false),
        (#"SELECT META().id, a FROM _ WHERE a = 5 AND b IS VALUED ORDER BY META().id LIMIT 3"#, false),
    ]

    static func sorted(_ db: Database, _ sql: String) throws -> [String] {
        try rows(db, sql, ["a": .int(4), "b": .string("date")]).sorted()
    }

    @Test func sqlppAnswersThroughMangoIndexesAsOverAScan() throws {
        let plain = TempDir()
        let scanned = try MangoFindTests.makeDatabase(plain, indexes: []).database
        let indexedDir = TempDir()
        let indexed = try MangoFindTests.makeDatabase(indexedDir, indexes: [
            #"{"index": {"fields": ["b", "a"]}, "ddoc": "by-b", "name": "ba"}"#,
            #"{"index": {"fields": ["n.x"]}, "ddoc": "by-nx", "name": "nx"}"#,
        ]).database
        // (A design document that would match is still found: json indexes don't hold design documents.)
        for db in [scanned, indexed] {
            try db.defaultCollection().write(RevisionWrite(id: "_design/other", body: ["a": 3, "b": "apple"],
                                                           mode: .edit(parent: nil)))
        }
        for (sql, viaMango) in Self.queries {
            let expected = try Self.sorted(scanned, sql)
            #expect(!expected.isEmpty, "\(sql)")
            #expect(try Self.sorted(indexed, sql) == expected, "\(sql)")
            #expect(try indexed.createQuery(sql).explain().contains("Mango json index") == viaMango, "\(sql)")
        }
        #expect(try rows(indexed, #"SELECT META().id FROM _ WHERE b = "apple" AND a = 3"#).contains(#"{"id":"_design/other"}"#))
        let plan = try indexed.createQuery(#"SELECT META().id FROM _ WHERE b = "apple" AND a = 3"#).explain()
        #expect(plan.contains("Mango json index ba of _design/by-b"), "\(plan)")
        // A column the WHERE leaves unconstrained: documents without it aren't in the index, so it isn't read.
        #expect(!(try indexed.createQuery(#"SELECT META().id FROM _ WHERE b = "apple""#).explain().contains("Mango")))
    }

    @Test func indexesFollowWritesAndDeletion() throws {
        let dir = TempDir()
        let c = try MangoFindTests.makeDatabase(dir, indexes: [#"{"index": {"fields": ["n.x"]}, "ddoc": "by-nx", "name": "nx"}"#])
        let db = c.database
        let sql = #"SELECT META().id FROM _ WHERE n.x = 9"#
        let query = try db.createQuery(sql)
        #expect(try query.execute().map { $0.toJSON() }.isEmpty)
        try c.write(RevisionWrite(id: "new", body: ["n": ["x": 9]], mode: .edit(parent: nil)))
        #expect(try query.execute().map { $0.toJSON() } == [#"{"id":"new"}"#])
        // The same compiled query plans again once the index is gone.
        _ = try c.write([RevisionWrite(id: "_design/by-nx", body: [:], deleted: true, mode: .overwrite)])
        #expect(try query.execute().map { $0.toJSON() } == [#"{"id":"new"}"#])
        #expect(!(try query.explain().contains("Mango")))
    }
}
