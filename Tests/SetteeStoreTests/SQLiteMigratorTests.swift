import CSQLite
import SetteeCore
import Testing

@testable import SetteeStore

@Suite struct SQLiteMigratorTests {
    // A fresh instance per test: the directory lives as long as the test.
    private let dir: SQLiteTempDirectory

    init() throws {
        dir = try SQLiteTempDirectory()
    }

    /// A migrator with two migrations that counts how often each ran.
    private final class Runs { var v1 = 0; var v2 = 0; var v3 = 0 }

    private func makeMigrator(_ runs: Runs, failingV3: Bool = false) -> Migrator {
        var migrator = Migrator()
        // Registered out of order on purpose.
        migrator.register(2) { db in
            runs.v2 += 1
            try db.execute("ALTER TABLE meta ADD COLUMN note TEXT")
        }
        migrator.register(1) { db in
            runs.v1 += 1
            try db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value)")
        }
        if failingV3 {
            migrator.register(3) { db in
                runs.v3 += 1
                try db.execute("CREATE TABLE extra(x)")
                try db.execute("INSERT INTO missing VALUES (1)")  // fails
            }
        }
        return migrator
    }

    @Test func runsOnceAndIsIdempotentAcrossReopen() throws {
        let runs = Runs()
        let migrator = makeMigrator(runs)
        #expect(migrator.latestVersion == 2)
        #expect(Migrator().latestVersion == 0)

        let pool = try DatabasePool(path: dir.path()) { try migrator.migrate($0) }
        try pool.write { db in
            #expect(try Migrator.userVersion(db) == 2)
            try db.prepare("INSERT INTO meta(key, value, note) VALUES ('a', 1, 'n')").run()
            try migrator.migrate(db)
        }
        pool.close()
        #expect(runs.v1 == 1 && runs.v2 == 1)

        let reopened = try DatabasePool(path: dir.path()) { try migrator.migrate($0) }
        defer { reopened.close() }
        #expect(runs.v1 == 1 && runs.v2 == 1)
        #expect(try reopened.read { try $0.scalarInt("PRAGMA user_version") } == 2)
        #expect(try reopened.read { try $0.scalarInt("SELECT count(*) FROM meta") } == 1)
    }

    @Test func failedMigrationRollsBackAndThrows() throws {
        let runs = Runs()
        let db = try Connection(path: dir.path())
        let error = #expect(throws: SQLiteError.self) { try makeMigrator(runs, failingV3: true).migrate(db) }
        #expect(error?.message.contains("missing") == true)
        #expect(runs.v1 == 1 && runs.v2 == 1 && runs.v3 == 1)
        #expect(!db.isInTransaction)
        #expect(try Migrator.userVersion(db) == 2)
        #expect(try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name = 'extra'") == 0)

        // A later, fixed migrator picks up from version 2.
        var fixed = makeMigrator(runs)
        fixed.register(3) { db in try db.execute("CREATE TABLE extra(x)") }
        try fixed.migrate(db)
        #expect(runs.v1 == 1 && runs.v2 == 1)
        #expect(try Migrator.userVersion(db) == 3)
        #expect(try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name = 'extra'") == 1)
    }

    /// A file a newer version migrated (higher `user_version`) is refused, not misread.
    @Test func refusesAFileFromANewerVersion() throws {
        let runs = Runs()
        let pool = try DatabasePool(path: dir.path()) { try makeMigrator(runs).migrate($0) }
        try pool.write { db in try db.execute("PRAGMA user_version = 9") }
        pool.close()
        let error = #expect(throws: (any Error).self) {
            _ = try DatabasePool(path: dir.path()) { try makeMigrator(runs).migrate($0) }
        }
        #expect("\(String(describing: error))".contains("newer"))
    }
}
