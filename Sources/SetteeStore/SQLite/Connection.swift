import CSQLite

/// One SQLite connection (`sqlite3*`).
///
/// Not `Sendable`: it lives on one thread at a time; ``DatabasePool`` owns connections and serializes access,
/// so connections are opened with `SQLITE_OPEN_NOMUTEX`. Statements from ``prepare(_:)`` are cached by SQL text.
///
/// ```swift
/// let connection = try Connection(path: "/tmp/db.sqlite")
/// try connection.transaction {
///     try connection.prepare("INSERT INTO t(x) VALUES (?)").run([.integer(1)])
/// }
/// ```
package final class Connection {
    /// The underlying `sqlite3*`. Valid until ``close()``.
    package let handle: OpaquePointer
    /// The database file path.
    package let path: String

    private var statementCache: [String: Statement] = [:]
    private var isClosed = false

    /// How long a statement waits for a lock another connection holds before `SQLITE_BUSY`.
    static let busyTimeoutMilliseconds: Int32 = 10_000

    /// Opens (creating if needed, unless read-only) the database at `path`.
    ///
    /// Sets a 10 s busy timeout and turns on extended result codes.
    ///
    /// - Parameter path: A file path (or `":memory:"`).
    /// - Parameter readOnly: Open with `SQLITE_OPEN_READONLY` instead of `READWRITE | CREATE`.
    /// - Throws: ``SQLiteError`` if the file cannot be opened.
    package init(path: String, readOnly: Bool = false) throws {
        Connection.configureLibrary()
        var db: OpaquePointer?
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        flags |= readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let error = SQLiteError(resultCode: rc, db: db)
            let message = "\(error.message) (opening \(path))"
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: error.extendedCode, message: message)
        }
        self.handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, Connection.busyTimeoutMilliseconds)
        StoredMemberFunction.register(on: db)
    }

    deinit {
        close()
    }

    /// Process-wide SQLite settings, applied once before the first connection opens: memory-usage
    /// statistics off (Settee never reads them, and they cost a global mutex per allocation), and no page cache
    /// allocated ahead per connection.
    /// Code that opens SQLite on its own in the same process (a benchmark's baseline) calls this first
    /// so both run under the same settings. If other code initialized SQLite before, the settings cannot
    /// apply (`SQLITE_MISUSE`) and SQLite keeps its defaults: slower allocation, nothing else.
    package static func configureLibrary() {
        _ = libraryConfigured
    }

    private static let libraryConfigured: Bool =
        csqlite_disable_memory_statistics() == SQLITE_OK && csqlite_no_initial_page_cache() == SQLITE_OK

    /// Finalizes cached statements and closes the connection (`sqlite3_close_v2`). Idempotent.
    ///
    /// Uncached statements still alive keep the underlying handle open until they are released.
    package func close() {
        guard !isClosed else { return }
        isClosed = true
        for statement in statementCache.values { statement.finalize() }
        statementCache.removeAll()
        sqlite3_close_v2(handle)
    }

    // MARK: - Running SQL

    /// Runs one or more `;`-separated statements, discarding any rows (`sqlite3_exec`).
    ///
    /// - Parameter sql: The SQL to run.
    /// - Throws: ``SQLiteError`` carrying `sql`.
    package func execute(_ sql: String) throws {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        guard rc != SQLITE_OK else { return }
        let message: String
        if let errorMessage {
            message = String(cString: errorMessage)
            sqlite3_free(errorMessage)
        } else {
            message = String(cString: sqlite3_errmsg(handle))
        }
        throw SQLiteError(code: rc, message: message, sql: sql)
    }

    /// Returns the cached statement for `sql`, preparing it (`SQLITE_PREPARE_PERSISTENT`) the first time.
    ///
    /// The statement comes back reset with its bindings cleared. Do not prepare the same SQL again while a
    /// previous result of this call is still being stepped.
    ///
    /// - Parameter sql: Exactly one SQL statement.
    /// - Throws: ``SQLiteError`` if it does not compile.
    package func prepare(_ sql: String) throws -> Statement {
        if let statement = statementCache[sql] {
            sqlite3_reset(statement.handle)
            statement.clearBindings()
            return statement
        }
        let statement = try makeStatement(sql, flags: UInt32(SQLITE_PREPARE_PERSISTENT))
        statement.cacheOwner = self
        statementCache[sql] = statement
        return statement
    }

    /// Runs `body` with the cached statement for `sql`, `values` bound to positions 1...n, and resets the
    /// statement when `body` returns or throws, so a read never leaves a statement open (holding its snapshot and
    /// keeping the WAL from being checkpointed). Prefer it to ``prepare(_:)`` wherever the statement's use fits
    /// in one block.
    ///
    /// ```swift
    /// let count = try db.withStatement("SELECT count(*) FROM docs_1 WHERE seq > ?", [.integer(since)]) { stmt in
    ///     try stmt.step() ? stmt.int64(0) : 0
    /// }
    /// ```
    package func withStatement<T>(_ sql: String, _ values: [SQLiteValue] = [], _ body: (Statement) throws -> T) throws -> T {
        let statement = try prepare(sql)
        defer { statement.reset() }
        if !values.isEmpty { statement.bind(values) }
        return try body(statement)
    }

    /// The first column of the first row of `sql` as an integer, or nil when there is no row or it is NULL.
    package func int64(_ sql: String, _ values: [SQLiteValue] = []) throws -> Int64? {
        try withStatement(sql, values) { stmt in try stmt.step() && !stmt.isNull(0) ? stmt.int64(0) : nil }
    }

    /// Prepares a statement that is not cached (for one-off SQL); it is finalized when released.
    ///
    /// - Parameter sql: Exactly one SQL statement.
    /// - Throws: ``SQLiteError`` if it does not compile.
    package func prepareUncached(_ sql: String) throws -> Statement {
        try makeStatement(sql, flags: 0)
    }

    /// Drops `statement` from the cache (after it failed); it is finalized when its last user releases it.
    func evict(_ statement: Statement) {
        if let cached = statementCache[statement.sql], cached === statement {
            statementCache[statement.sql] = nil
            statement.cacheOwner = nil
        }
    }

    /// The number of statements in the cache (for tests and diagnostics).
    var cachedStatementCount: Int { statementCache.count }

    private func makeStatement(_ sql: String, flags: UInt32) throws -> Statement {
        var utf8 = Array(sql.utf8)
        utf8.append(0)
        return try utf8.withUnsafeBufferPointer { buffer -> Statement in
            let start = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            var stmt: OpaquePointer?
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v3(handle, start, Int32(buffer.count), flags, &stmt, &tail)
            guard rc == SQLITE_OK else {
                throw SQLiteError(resultCode: rc, db: handle, sql: sql)
            }
            guard let stmt else {
                throw SQLiteError(code: SQLITE_MISUSE, message: "no SQL statement", sql: sql)
            }
            let statement = Statement(handle: stmt, sql: sql)
            // Reject trailing statements (comments and whitespace are fine).
            if let tail, tail.pointee != 0 {
                var extra: OpaquePointer?
                let remaining = Int32(buffer.count) - Int32(UnsafeRawPointer(tail) - UnsafeRawPointer(start))
                let tailRC = sqlite3_prepare_v3(handle, tail, remaining, 0, &extra, nil)
                if let extra { sqlite3_finalize(extra) }
                if tailRC != SQLITE_OK || extra != nil {
                    throw SQLiteError(
                        code: SQLITE_MISUSE, message: "multiple statements given to prepare; use execute", sql: sql)
                }
            }
            return statement
        }
    }

    // MARK: - Transactions

    /// Runs `body` in a transaction: `BEGIN <kind>` … `COMMIT`, or `ROLLBACK` if `body` (or the commit) throws.
    ///
    /// ```swift
    /// let id = try connection.transaction { () -> Int64 in
    ///     try connection.prepare("INSERT INTO t(x) VALUES (1)").run()
    ///     return connection.lastInsertRowID
    /// }
    /// ```
    ///
    /// - Parameter kind: How `BEGIN` takes locks; `.immediate` by default.
    /// - Parameter body: The work to do.
    /// - Throws: What `body` throws, or ``SQLiteError`` from `BEGIN`/`COMMIT`.
    package func transaction<T>(_ kind: TransactionKind = .immediate, _ body: () throws -> T) throws -> T {
        try prepare(kind.beginSQL).run()
        let result: T
        do {
            result = try body()
            try prepare("COMMIT").run()
        } catch {
            rollbackIfNeeded()
            throw error
        }
        return result
    }

    /// Runs `body` inside `SAVEPOINT name` … `RELEASE name`; on throw, `ROLLBACK TO name` and `RELEASE name`,
    /// leaving any enclosing transaction open. Outside a transaction the savepoint is one.
    ///
    /// - Parameter name: The savepoint name.
    /// - Parameter body: The work to do.
    /// - Throws: What `body` throws, or ``SQLiteError``.
    package func savepoint<T>(_ name: String = "sp", _ body: () throws -> T) throws -> T {
        let quoted = Self.quoteIdentifier(name)
        try prepare("SAVEPOINT \(quoted)").run()
        let result: T
        do {
            result = try body()
            try prepare("RELEASE \(quoted)").run()
        } catch {
            // The savepoint may already be gone if SQLite rolled the whole transaction back.
            if isInTransaction {
                _ = try? prepare("ROLLBACK TO \(quoted)").run()
                _ = try? prepare("RELEASE \(quoted)").run()
            }
            throw error
        }
        return result
    }

    /// `name` as a double-quoted SQL identifier.
    static func quoteIdentifier(_ name: String) -> String {
        var quoted = "\""
        for character in name {
            if character == "\"" { quoted.append("\"\"") } else { quoted.append(character) }
        }
        quoted.append("\"")
        return quoted
    }

    /// Runs `body` with this connection's memory map turned off (`PRAGMA mmap_size=0`), restored after: for scans
    /// of a whole database, whose pages would otherwise stay mapped and count in the process's resident memory.
    /// Call it with no statement of the connection active.
    package func withoutMemoryMap<T>(_ body: () throws -> T) throws -> T {
        let current = try prepareUncached("PRAGMA mmap_size")
        let size = try current.step() ? current.int(0) : 0
        current.reset()
        if size == 0 { return try body() }
        try execute("PRAGMA mmap_size=0")
        defer { try? execute("PRAGMA mmap_size=\(size)") }
        return try body()
    }

    /// Rolls back the open transaction, if any, ignoring errors.
    func rollbackIfNeeded() {
        if isInTransaction { _ = try? execute("ROLLBACK") }
    }

    // MARK: - State

    /// The rowid of the most recent successful INSERT on this connection.
    package var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes(handle)) }

    /// Rows inserted, updated or deleted by this connection since it opened (`sqlite3_total_changes64`).
    package var totalChanges: Int64 { sqlite3_total_changes64(handle) }

    /// Whether a transaction is open (`!sqlite3_get_autocommit`).
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }
}
