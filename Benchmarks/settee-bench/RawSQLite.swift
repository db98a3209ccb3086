import CSQLite
import SetteeStore

/// The baseline: plain SQLite through its C API, the way a hand-written app would use it.
final class RawSQLite {
    private var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var select: OpaquePointer?

    struct Failure: Error { let message: String }

    init(path: String) throws {
        Connection.configureLibrary()  // the same process-wide SQLite settings as Settee's own connections
        guard sqlite3_open(path, &db) == SQLITE_OK else { throw Failure(message: "open failed") }
        try exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
        try exec("CREATE TABLE docs(id TEXT PRIMARY KEY, body BLOB NOT NULL)")
        sqlite3_prepare_v2(db, "INSERT INTO docs(id, body) VALUES (?, ?)", -1, &insert, nil)
        sqlite3_prepare_v2(db, "SELECT body FROM docs WHERE id = ?", -1, &select, nil)
    }

    func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw Failure(message: String(cString: sqlite3_errmsg(db)))
        }
    }

    func insertBatch(ids: ArraySlice<String>, bodies: ArraySlice<[UInt8]>) throws {
        try exec("BEGIN IMMEDIATE")
        for (id, body) in zip(ids, bodies) {
            sqlite3_bind_text(insert, 1, id, -1, csqlite_transient())
            _ = body.withUnsafeBytes { sqlite3_bind_text(insert, 2, $0.baseAddress, Int32($0.count), csqlite_transient()) }
            guard sqlite3_step(insert) == SQLITE_DONE else { throw Failure(message: String(cString: sqlite3_errmsg(db))) }
            sqlite3_reset(insert)
        }
        try exec("COMMIT")
    }

    func get(_ id: String) throws -> [UInt8]? {
        sqlite3_bind_text(select, 1, id, -1, csqlite_transient())
        defer { sqlite3_reset(select) }
        guard sqlite3_step(select) == SQLITE_ROW else { return nil }
        let n = Int(sqlite3_column_bytes(select, 0))
        guard let p = sqlite3_column_blob(select, 0) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    func close() {
        sqlite3_finalize(insert)
        sqlite3_finalize(select)
        sqlite3_close(db)
    }
}
