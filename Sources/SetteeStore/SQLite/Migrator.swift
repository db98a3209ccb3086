import CSQLite
import SetteeCore

/// Versioned schema migrations, recorded in `PRAGMA user_version`.
///
/// ```swift
/// var migrator = Migrator()
/// migrator.register(1) { db in try db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value)") }
/// migrator.register(2) { db in try db.execute("ALTER TABLE meta ADD COLUMN updated INTEGER") }
/// let pool = try DatabasePool(path: path) { try migrator.migrate($0) }
/// ```
///
/// The store's own schema is versioned by `user_version`. A follower that keeps tables of its own in the database
/// (the index manager's and the view manager's registries) versions them with a migrator of its own whose version
/// is a `meta` value (``init(metaKey:)``), run inside the follower's write transaction
/// (``migrate(inTransaction:)``). Followers' tables hold derived data and their migrations only add (tables,
/// columns with defaults, indexes), so a follower's migrator accepts a database a newer build migrated further:
/// the columns this build reads are still there.
package struct Migrator {
    private var migrations: [(version: Int, migrate: (Connection) throws -> Void)] = []
    /// Where the version is recorded: nil for `PRAGMA user_version` (the store's schema), else a `meta` key.
    private let metaKey: String?

    /// Creates a migrator with no migrations, versioned by `PRAGMA user_version`.
    package init() { metaKey = nil }

    /// Creates a migrator for a follower's tables, versioned by the `meta` value `metaKey`, with `migrations`.
    package init(metaKey: String, migrations: [(version: Int, migrate: @Sendable (Connection) throws -> Void)] = []) {
        self.metaKey = metaKey
        for (version, migrate) in migrations { register(version, migrate) }
    }

    /// Registers the migration that brings the schema to `version` (versions must be positive and unique).
    ///
    /// - Parameter version: The schema version after this migration.
    /// - Parameter migrate: The schema change; runs inside an IMMEDIATE transaction.
    package mutating func register(_ version: Int, _ migrate: @escaping (Connection) throws -> Void) {
        precondition(version > 0, "migration versions start at 1")
        precondition(!migrations.contains { $0.version == version }, "migration \(version) registered twice")
        migrations.append((version, migrate))
        migrations.sort { $0.version < $1.version }
    }

    /// The highest registered version (0 when none).
    package var latestVersion: Int { migrations.last?.version ?? 0 }

    /// Runs each migration newer than the database's `user_version`, in version order, each in its own
    /// IMMEDIATE transaction that also sets `user_version`. Already-applied migrations are skipped.
    ///
    /// - Parameter connection: A writable connection not inside a transaction.
    /// - Throws: What a migration throws (that migration is rolled back; earlier ones stay applied).
    package func migrate(_ connection: Connection) throws {
        let current = try Self.userVersion(connection)
        // A file a newer Settee has migrated is refused rather than misread (downgrades need a dump and load).
        if !migrations.isEmpty && current > latestVersion {
            throw SetteeError(.storage, "\(connection.path) has schema version \(current), newer than this Settee's \(latestVersion): it was written by a newer Settee. Upgrade, or restore a backup made before the upgrade.")
        }
        for migration in migrations where migration.version > current {
            try connection.transaction(.immediate) {
                // Read inside the transaction so a concurrent migrator in another process cannot double-apply.
                guard try Self.userVersion(connection) < migration.version else { return }
                try migration.migrate(connection)
                try connection.execute("PRAGMA user_version = \(migration.version)")
            }
        }
    }

    /// Runs each migration newer than the recorded version inside the caller's write transaction (a follower's
    /// tables, created or changed together with the work that needs them); records the latest version.
    package func migrate(inTransaction connection: Connection) throws {
        guard let metaKey else {
            throw SetteeError(.internalError, "the store's schema migrates in transactions of its own")
        }
        let current = Int(try connection.metaValue(metaKey) ?? "0") ?? 0
        var reached = current
        for migration in migrations where migration.version > current {
            try migration.migrate(connection)
            reached = migration.version
        }
        if reached != current { try connection.setMetaValue(metaKey, String(reached)) }
    }

    /// The version a follower's migrator recorded (0 when none).
    package static func recordedVersion(_ connection: Connection, metaKey: String) throws -> Int {
        Int(try connection.metaValue(metaKey) ?? "0") ?? 0
    }

    /// The database's `PRAGMA user_version`.
    package static func userVersion(_ connection: Connection) throws -> Int {
        let statement = try connection.prepare("PRAGMA user_version")
        defer { statement.reset() }
        return try statement.step() ? statement.int(0) : 0
    }
}
