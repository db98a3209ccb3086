import CSQLite
import Testing

@testable import SetteeStore

@Suite struct SQLiteStatementTests {
    // A fresh instance per test: the directory lives as long as the test.
    private let dir: SQLiteTempDirectory

    init() throws {
        dir = try SQLiteTempDirectory()
    }

    private func makeDatabase() throws -> Connection {
        let db = try Connection(path: dir.path())
        try db.execute("CREATE TABLE v(a, b, c, d, e, f)")
        return db
    }

    @Test func bindsAndReadsEveryType() throws {
        let db = try makeDatabase()
        let insert = try db.prepare("INSERT INTO v(a, b, c, d, e, f) VALUES (?, ?, ?, ?, ?, ?)")
        insert.bind(Int64.max, at: 1)
        insert.bind(2.5, at: 2)
        insert.bind("héllo ✓", at: 3)
        insert.bind(bytes: [0, 1, 255], at: 4)
        insert.bindNull(at: 5)
        insert.bind(text: Array("{\"k\":1}".utf8), at: 6)
        #expect(try insert.step() == false)
        insert.reset()

        let select = try db.prepare("SELECT a, b, c, d, e, f, typeof(f) FROM v")
        #expect(select.columnCount == 7)
        #expect(select.columnName(2) == "c")
        #expect(try select.step())
        #expect(select.int64(0) == Int64.max)
        #expect(select.double(1) == 2.5)
        #expect(select.string(2) == "héllo ✓")
        #expect(select.blob(3) == [0, 1, 255])
        #expect(select.isNull(4))
        #expect(select.string(4) == nil)
        #expect(select.blob(4) == nil)
        #expect(select.string(5) == "{\"k\":1}")
        #expect(select.string(6) == "text")
        #expect(select.value(0) == .integer(Int64.max))
        #expect(select.value(1) == .real(2.5))
        #expect(select.value(2) == .text("héllo ✓"))
        #expect(select.value(3) == .blob([0, 1, 255]))
        #expect(select.value(4) == .null)
        #expect(try select.step() == false)
    }

    @Test func emptyValuesAreNotNull() throws {
        let db = try makeDatabase()
        let insert = try db.prepare("INSERT INTO v(a, b, c) VALUES (?, ?, ?)")
        insert.bind("", at: 1)
        insert.bind(bytes: [], at: 2)
        insert.bind(text: [], at: 3)
        try insert.run()

        let select = try db.prepare("SELECT a, b, c, typeof(a), typeof(b), typeof(c) FROM v")
        #expect(try select.step())
        #expect(select.string(0) == "")
        #expect(select.blob(1) == [])
        #expect(select.value(1) == .blob([]))
        #expect(select.string(2) == "")
        #expect(select.string(3) == "text")
        #expect(select.string(4) == "blob")
        #expect(select.string(5) == "text")
        select.withTextBytes(1) { #expect($0.isEmpty) }
    }

    @Test func bindsArraysOfValuesAndOptionals() throws {
        let db = try makeDatabase()
        let insert = try db.prepare("INSERT INTO v(a, b, c, d, e) VALUES (?, ?, ?, ?, ?)")
        try insert.run([.integer(7), .real(-1.25), .text("x"), .blob([9]), .null])
        let optional: String? = nil
        insert.bind(optional, at: 1)
        insert.bind(Optional("y"), at: 2)
        insert.bind(3, at: 3)
        try insert.run()

        let select = try db.prepare("SELECT a, b, c, d, e FROM v ORDER BY rowid")
        #expect(try select.step())
        #expect((0..<5).map { select.value($0) } == [.integer(7), .real(-1.25), .text("x"), .blob([9]), .null])
        #expect(try select.step())
        #expect(select.value(0) == .null)
        #expect(select.string(1) == "y")
        #expect(select.int(2) == 3)
        #expect(try select.step() == false)
    }

    @Test func withTextBytesIsZeroCopyView() throws {
        let db = try makeDatabase()
        try db.prepare("INSERT INTO v(a, b, c, d) VALUES (?, ?, ?, ?)").run([.text("abc✓"), .blob([1, 2]), .null, .integer(42)])
        let select = try db.prepare("SELECT a, b, c, d FROM v")
        #expect(try select.step())
        #expect(select.withTextBytes(0) { Array($0) } == Array("abc✓".utf8))
        #expect(select.withTextBytes(1) { Array($0) } == [1, 2])
        #expect(select.withTextBytes(2) { $0.count } == 0)
        #expect(select.withTextBytes(3) { Array($0) } == Array("42".utf8))
    }

    @Test func bindErrorIsReportedByStep() throws {
        let db = try makeDatabase()
        let statement = try db.prepare("SELECT ?")
        statement.bind(1, at: 5)  // out of range
        let error = #expect(throws: SQLiteError.self) { try statement.step() }
        #expect(error?.code == SQLITE_RANGE)
        // The statement is usable again afterwards.
        let again = try db.prepare("SELECT ?")
        again.bind(1, at: 1)
        #expect(try again.step())
        #expect(again.int(0) == 1)
    }

    /// `withStatement` binds, runs the block and resets the statement however the block ends, so a read can't
    /// leave it stepping (holding its snapshot).
    @Test func withStatementResetsWhenTheBlockReturnsOrThrows() throws {
        struct Stop: Error {}
        let db = try makeDatabase()
        try db.execute("INSERT INTO v(a) VALUES (1), (2), (3)")
        let sql = "SELECT a FROM v WHERE a >= ? ORDER BY a"
        let first = try db.withStatement(sql, [.integer(2)]) { stmt in try stmt.step() ? stmt.int64(0) : nil }
        #expect(first == 2)
        let statement = try db.prepare(sql)
        #expect(sqlite3_stmt_busy(statement.handle) == 0)
        #expect(throws: Stop.self) {
            try db.withStatement(sql, [.integer(1)]) { stmt in
                _ = try stmt.step()
                #expect(sqlite3_stmt_busy(stmt.handle) != 0)
                throw Stop()
            }
        }
        #expect(sqlite3_stmt_busy(statement.handle) == 0)
        #expect(try db.int64("SELECT count(*) FROM v") == 3)
        #expect(try db.int64("SELECT a FROM v WHERE a > 9") == nil)
    }
}
