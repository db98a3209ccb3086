import CSQLite
import Foundation
import Testing

@testable import SetteeStore

/// A fresh temporary directory, removed when released.
final class SQLiteTempDirectory: @unchecked Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("settee-sqlite-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String = "test.sqlite") -> String {
        url.appendingPathComponent(name).path
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

extension Connection {
    /// The first column of the first row of `sql` as an integer.
    func scalarInt(_ sql: String) throws -> Int {
        let statement = try prepare(sql)
        defer { statement.reset() }
        #expect(try statement.step())
        return statement.int(0)
    }
}

@Suite struct SQLiteConnectionTests {
    // A fresh instance per test: the directory lives as long as the test.
    private let dir: SQLiteTempDirectory

    init() throws {
        dir = try SQLiteTempDirectory()
    }

    @Test func openCloseIsIdempotent() throws {
        let connection = try Connection(path: dir.path())
        try connection.execute("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")
        #expect(try connection.scalarInt("SELECT count(*) FROM t") == 2)
        connection.close()
        connection.close()
        #expect(FileManager.default.fileExists(atPath: dir.path()))

        let reopened = try Connection(path: dir.path(), readOnly: true)
        #expect(try reopened.scalarInt("SELECT sum(x) FROM t") == 3)
        #expect(throws: SQLiteError.self) { try reopened.execute("INSERT INTO t VALUES (3)") }
    }

    @Test func openingMissingFileReadOnlyFails() throws {
        let error = #expect(throws: SQLiteError.self) { try Connection(path: dir.path("missing.sqlite"), readOnly: true) }
        #expect(error?.code == SQLITE_CANTOPEN)
    }

    @Test func transactionCommitsAndRollsBack() throws {
        let db = try Connection(path: dir.path())
        try db.execute("CREATE TABLE t(x INTEGER)")

        let rowID = try db.transaction { () -> Int64 in
            #expect(db.isInTransaction)
            try db.prepare("INSERT INTO t(x) VALUES (?)").run([.integer(10)])
            return db.lastInsertRowID
        }
        #expect(rowID == 1)
        #expect(!db.isInTransaction)
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 1)

        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try db.transaction(.deferred) {
                try db.prepare("INSERT INTO t(x) VALUES (?)").run([.integer(20)])
                throw Boom()
            }
        }
        #expect(!db.isInTransaction)
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 1)

        try db.transaction(.exclusive) {
            try db.prepare("UPDATE t SET x = x + 1").run()
            #expect(db.changes == 1)
        }
        #expect(try db.scalarInt("SELECT x FROM t") == 11)
    }

    @Test func savepointRollbackKeepsOuterTransaction() throws {
        let db = try Connection(path: dir.path())
        try db.execute("CREATE TABLE t(x INTEGER)")
        struct Boom: Error {}

        try db.transaction {
            try db.prepare("INSERT INTO t(x) VALUES (1)").run()
            #expect(throws: Boom.self) {
                try db.savepoint("inner \"quoted\"") {
                    try db.prepare("INSERT INTO t(x) VALUES (2)").run()
                    throw Boom()
                }
            }
            #expect(db.isInTransaction)
            try db.savepoint {
                try db.prepare("INSERT INTO t(x) VALUES (3)").run()
            }
            #expect(db.isInTransaction)
        }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 2)
        #expect(try db.scalarInt("SELECT sum(x) FROM t") == 4)

        // Outside a transaction, a savepoint is a transaction of its own.
        #expect(throws: Boom.self) {
            try db.savepoint {
                try db.prepare("INSERT INTO t(x) VALUES (100)").run()
                throw Boom()
            }
        }
        #expect(!db.isInTransaction)
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 2)
    }

    @Test func statementCacheReusesAndResets() throws {
        let db = try Connection(path: dir.path())
        let first = try db.prepare("SELECT ?")
        first.bind(42, at: 1)
        #expect(try first.step())
        #expect(first.int(0) == 42)
        // Not stepped to completion: prepare must reset it and clear its bindings.
        let second = try db.prepare("SELECT ?")
        #expect(first === second)
        #expect(try second.step())
        #expect(second.isNull(0))
        #expect(db.cachedStatementCount == 1)

        let uncached = try db.prepareUncached("SELECT ?")
        #expect(uncached !== first)
        #expect(db.cachedStatementCount == 1)
    }

    @Test func errorCarriesCodeMessageAndSQL() throws {
        let db = try Connection(path: dir.path())
        try db.execute("CREATE TABLE t(id TEXT NOT NULL UNIQUE)")
        let sql = "INSERT INTO t(id) VALUES (?)"
        let insert = try db.prepare(sql)
        try insert.run([.text("a")])

        let error = #expect(throws: SQLiteError.self) { try db.prepare(sql).run([.text("a")]) }
        #expect(error?.code == SQLITE_CONSTRAINT)
        #expect(error?.code == 19)
        #expect(error?.extendedCode == 2067)  // SQLITE_CONSTRAINT_UNIQUE
        #expect(error?.sql == sql)
        #expect(error?.message.contains("constraint failed") == true)
        #expect(error?.description.hasPrefix("SQLite error 19 (constraint): ") == true)
        #expect(error?.description.hasSuffix(" — in: \(sql)") == true)

        // The failed statement was evicted from the cache; the connection still works.
        let again = try db.prepare(sql)
        #expect(again !== insert)
        try again.run([.text("b")])
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 2)

        let syntax = #expect(throws: SQLiteError.self) { try db.prepare("SELEC 1") }
        #expect(syntax?.code == SQLITE_ERROR)
        #expect(syntax?.sql == "SELEC 1")

        let exec = #expect(throws: SQLiteError.self) { try db.execute("CREATE TABLE t(x)") }
        #expect(exec?.message.contains("already exists") == true)
        #expect(exec?.sql == "CREATE TABLE t(x)")

        let closed = SQLiteError(code: SQLITE_MISUSE, message: "database is closed")
        #expect(closed.description == "SQLite error 21 (misuse): database is closed")
    }

    @Test func prepareRejectsMultipleStatementsButAllowsTrailingComments() throws {
        let db = try Connection(path: dir.path())
        let error = #expect(throws: SQLiteError.self) { try db.prepare("SELECT 1; SELECT 2") }
        #expect(error?.code == SQLITE_MISUSE)
        _ = try db.prepare("SELECT 1; -- trailing comment\n  ")
        #expect(throws: SQLiteError.self) { try db.prepare("   ") }
    }

    @Test func nestedTransactionFailsWithoutDisturbingOuter() throws {
        let db = try Connection(path: dir.path())
        try db.execute("CREATE TABLE t(x INTEGER)")
        try db.transaction {
            try db.prepare("INSERT INTO t VALUES (1)").run()
            #expect(throws: SQLiteError.self) { try db.transaction {} }
            #expect(db.isInTransaction)
        }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 1)
    }
}
