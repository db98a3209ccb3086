import CSQLite

/// An error reported by SQLite, with its result code, message and the SQL that failed.
///
/// Match on the primary ``code`` (or the ``extendedCode``) with the `SQLITE_*` constants:
///
/// ```swift
/// do {
///     try statement.run([.text(id)])
/// } catch let error as SQLiteError where error.code == SQLITE_CONSTRAINT {
///     // duplicate id
/// }
/// ```
package struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The primary result code (`extendedCode & 0xff`), e.g. `SQLITE_CONSTRAINT` (19).
    package let code: Int32
    /// The extended result code, e.g. `SQLITE_CONSTRAINT_UNIQUE` (2067).
    package let extendedCode: Int32
    /// SQLite's message (`sqlite3_errmsg`) or our own for misuse.
    package let message: String
    /// The SQL being prepared or run, when there was one.
    package let sql: String?

    /// Creates an error.
    ///
    /// - Parameter code: A primary or extended result code; the primary code is derived from it.
    /// - Parameter extendedCode: The extended result code; defaults to `code`.
    /// - Parameter message: What went wrong.
    /// - Parameter sql: The statement involved, if any.
    package init(code: Int32, extendedCode: Int32? = nil, message: String, sql: String? = nil) {
        let extended = extendedCode ?? code
        self.code = extended & 0xff
        self.extendedCode = extended
        self.message = message
        self.sql = sql
    }

    /// Creates an error from a failed call on `db`, reading its message with `sqlite3_errmsg`.
    ///
    /// - Parameter resultCode: The (extended) result code the call returned.
    /// - Parameter db: The connection the call was made on (may be nil if opening failed).
    /// - Parameter sql: The statement involved, if any.
    package init(resultCode: Int32, db: OpaquePointer?, sql: String? = nil) {
        let message: String
        if let db, let cMessage = sqlite3_errmsg(db) {
            message = String(cString: cMessage)
        } else if let cMessage = sqlite3_errstr(resultCode) {
            message = String(cString: cMessage)
        } else {
            message = "unknown error"
        }
        self.init(code: resultCode, message: message, sql: sql)
    }

    /// `"SQLite error 19 (constraint): UNIQUE constraint failed: t.id — in: INSERT INTO t …"`.
    package var description: String {
        var text = "SQLite error \(code) (\(Self.name(ofPrimaryCode: code))): \(message)"
        if let sql { text += " — in: \(sql)" }
        return text
    }

    /// The short lowercase name of a primary result code (`19` → `"constraint"`).
    package static func name(ofPrimaryCode code: Int32) -> String {
        switch code {
        case SQLITE_OK: "ok"
        case SQLITE_ERROR: "error"
        case SQLITE_INTERNAL: "internal"
        case SQLITE_PERM: "perm"
        case SQLITE_ABORT: "abort"
        case SQLITE_BUSY: "busy"
        case SQLITE_LOCKED: "locked"
        case SQLITE_NOMEM: "nomem"
        case SQLITE_READONLY: "readonly"
        case SQLITE_INTERRUPT: "interrupt"
        case SQLITE_IOERR: "ioerr"
        case SQLITE_CORRUPT: "corrupt"
        case SQLITE_NOTFOUND: "notfound"
        case SQLITE_FULL: "full"
        case SQLITE_CANTOPEN: "cantopen"
        case SQLITE_PROTOCOL: "protocol"
        case SQLITE_EMPTY: "empty"
        case SQLITE_SCHEMA: "schema"
        case SQLITE_TOOBIG: "toobig"
        case SQLITE_CONSTRAINT: "constraint"
        case SQLITE_MISMATCH: "mismatch"
        case SQLITE_MISUSE: "misuse"
        case SQLITE_NOLFS: "nolfs"
        case SQLITE_AUTH: "auth"
        case SQLITE_FORMAT: "format"
        case SQLITE_RANGE: "range"
        case SQLITE_NOTADB: "notadb"
        case SQLITE_NOTICE: "notice"
        case SQLITE_WARNING: "warning"
        case SQLITE_ROW: "row"
        case SQLITE_DONE: "done"
        default: "unknown"
        }
    }
}
