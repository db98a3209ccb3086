import Foundation
import Testing
import Settee

/// `COLLATE` in SQL++ and `collate(_:)` in QueryBuilder: comparisons and ORDER BY keys by Couchbase Lite's ASCII and
/// Unicode collations.
@Suite struct CollateTests {
    static let names = ["Zoë", "zoe", "apple", "Apple", "Émile", "emile", "Ärla", "Banana"]

    /// A database of `names`; its directory lives as long as the fixture.
    struct Fixture {
        let dir = TempDir()
        let db: Database
        let c: Settee.Collection

        init() throws {
            db = try dir.open()
            c = try db.defaultCollection()
            for (i, name) in CollateTests.names.enumerated() {
                try c.save(document: MutableDocument(id: "n\(i)").setString(name, forKey: "name"))
            }
        }
    }

    func names(_ db: Database, _ sql: String) throws -> [String] {
        try db.createQuery(sql).execute().compactMap { $0.string(forKey: "name") }
    }

    @Test func comparisonsUseTheCollation() throws {
        let f = try Fixture()
        let db = f.db, c = f.c
        defer { withExtendedLifetime(f) {} }
        // Without COLLATE strings compare by code point, case and accents counting.
        #expect(try names(db, "SELECT name FROM _ WHERE name = 'apple'") == ["apple"])
        #expect(try Set(names(db, "SELECT name FROM _ WHERE name COLLATE NOCASE = 'apple'")) == ["apple", "Apple"])
        #expect(try Set(names(db, "SELECT name FROM _ WHERE name COLLATE (UNICODE NOCASE NODIAC) = 'EMILE'"))
            == ["Émile", "emile"])
        // ASCII NOCASE folds A–Z only: "É" stays apart from "e".
        #expect(try names(db, "SELECT name FROM _ WHERE name COLLATE NOCASE = 'EMILE'") == ["emile"])
        #expect(try Set(names(db, "SELECT name FROM _ WHERE 'ZOE' = name COLLATE (UNICODE NOCASE NODIAC)")) == ["Zoë", "zoe"])
        #expect(try Set(names(db, "SELECT name FROM _ WHERE name COLLATE (UNICODE NOCASE) BETWEEN 'a' AND 'b'"))
            == ["apple", "Apple", "Ärla"])
        // An index on `name` is not used for a collated comparison (its order is the code-point one), and the
        // answer stays the same with it.
        try c.createIndex(withName: "byName", config: ValueIndexConfiguration(["name"]))
        #expect(try Set(names(db, "SELECT name FROM _ WHERE name COLLATE NOCASE = 'apple'")) == ["apple", "Apple"])
    }

    @Test func orderByUsesTheCollation() throws {
        let f = try Fixture()
        let db = f.db
        defer { withExtendedLifetime(f) {} }
        #expect(try names(db, "SELECT name FROM _ ORDER BY name")
            == ["Apple", "Banana", "Zoë", "apple", "emile", "zoe", "Ärla", "Émile"])
        let unicode = try names(db, "SELECT name FROM _ ORDER BY name COLLATE UNICODE, META().id")
        #expect(unicode == ["apple", "Apple", "Ärla", "Banana", "emile", "Émile", "zoe", "Zoë"])
        let descending = try names(db, "SELECT name FROM _ ORDER BY name COLLATE UNICODE DESC, META().id")
        #expect(descending.first == "Zoë" && descending.last == "apple")
    }

    @Test func queryBuilderCollations() throws {
        let f = try Fixture()
        let c = f.c
        defer { withExtendedLifetime(f) {} }
        let name = Expression.property("name")
        let folded = try QueryBuilder.select(SelectResult.property("name"))
            .from(DataSource.collection(c))
            .where(name.collate(Collation.unicode().ignoreCase(true).ignoreAccents(true)).equalTo(Expression.string("zoe")))
            .execute().compactMap { $0.string(forKey: "name") }
        #expect(Set(folded) == ["Zoë", "zoe"])
        let ascii = try QueryBuilder.select(SelectResult.property("name"))
            .from(DataSource.collection(c))
            .where(name.collate(Collation.ascii().ignoreCase(true)).equalTo(Expression.string("BANANA")))
            .execute().compactMap { $0.string(forKey: "name") }
        #expect(ascii == ["Banana"])
        // A locale's order: Swedish puts "Ä" after "Z".
        let swedish = try QueryBuilder.select(SelectResult.property("name"))
            .from(DataSource.collection(c))
            .where(name.lessThan(Expression.string("b")).or(name.greaterThan(Expression.string("Y"))))
            .orderBy(Ordering.expression(name.collate(Collation.unicode().locale("sv"))), Ordering.expression(Meta.id))
            .execute().compactMap { $0.string(forKey: "name") }
        #expect(swedish.last == "Ärla")
    }

    @Test func badCollationsAreParseErrors() throws {
        let f = try Fixture()
        let db = f.db
        defer { withExtendedLifetime(f) {} }
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT name FROM _ WHERE name COLLATE FANCY = 'a'") }
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT name FROM _ WHERE name COLLATE (UNICODE = 'a'") }
        // The printed statement parses back to the same tree.
        let statement = try SQLPPParser.parseSelect("SELECT name FROM _ WHERE name COLLATE (UNICODE NOCASE) = 'a'")
        #expect(try SQLPPParser.parseSelect(statement.description) == statement)
    }
}
