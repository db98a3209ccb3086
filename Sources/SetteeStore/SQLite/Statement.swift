import CSQLite

/// One prepared statement (`sqlite3_stmt*`). Not `Sendable`: used on its connection's thread only.
///
/// Bind parameters are 1-based and columns 0-based, as in SQLite's C API.
///
/// ```swift
/// let statement = try connection.prepare("SELECT id, body FROM docs WHERE seq > ?")
/// statement.bind(since, at: 1)
/// while try statement.step() {
///     let id = statement.string(0)
/// }
/// ```
package final class Statement {
    /// The underlying `sqlite3_stmt*`. Valid until the statement is finalized.
    package let handle: OpaquePointer
    /// The SQL text the statement was prepared from.
    package let sql: String

    /// The connection whose cache holds this statement (nil for uncached statements).
    weak var cacheOwner: Connection?
    /// The first failing bind result code since the last step; reported by the next ``step()``.
    private var bindError: Int32 = SQLITE_OK
    private var isFinalized = false

    init(handle: OpaquePointer, sql: String) {
        self.handle = handle
        self.sql = sql
    }

    deinit {
        if !isFinalized { sqlite3_finalize(handle) }
    }

    /// Finalizes the statement; using it afterwards is a programming error.
    func finalize() {
        guard !isFinalized else { return }
        isFinalized = true
        sqlite3_finalize(handle)
    }

    // MARK: - Binding

    @inline(__always)
    private func check(_ rc: Int32) {
        if rc != SQLITE_OK && bindError == SQLITE_OK { bindError = rc }
    }

    /// Binds an integer at a 1-based parameter index.
    package func bind(_ value: Int64, at index: Int32) {
        check(sqlite3_bind_int64(handle, index, value))
    }

    /// Binds an integer at a 1-based parameter index.
    package func bind(_ value: Int, at index: Int32) {
        check(sqlite3_bind_int64(handle, index, Int64(value)))
    }

    /// Binds a double at a 1-based parameter index.
    package func bind(_ value: Double, at index: Int32) {
        check(sqlite3_bind_double(handle, index, value))
    }

    /// Binds a string as TEXT (copied by SQLite) at a 1-based parameter index.
    package func bind(_ value: String, at index: Int32) {
        var value = value
        let rc = value.withUTF8 { utf8 -> Int32 in
            guard let base = utf8.baseAddress, utf8.count > 0 else {
                return sqlite3_bind_text(handle, index, "", 0, csqlite_static())
            }
            return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
                sqlite3_bind_text(handle, index, $0, Int32(utf8.count), csqlite_transient())
            }
        }
        check(rc)
    }

    /// Binds a string as TEXT, or NULL when `value` is nil.
    package func bind(_ value: String?, at index: Int32) {
        if let value { bind(value, at: index) } else { bindNull(at: index) }
    }

    /// Binds bytes as a BLOB (copied by SQLite); an empty array binds an empty blob, not NULL.
    package func bind(bytes value: [UInt8], at index: Int32) {
        let rc = value.withUnsafeBytes { raw -> Int32 in
            guard let base = raw.baseAddress, raw.count > 0 else {
                return sqlite3_bind_zeroblob(handle, index, 0)
            }
            return sqlite3_bind_blob(handle, index, base, Int32(raw.count), csqlite_transient())
        }
        check(rc)
    }

    /// Binds UTF-8 bytes as TEXT (copied by SQLite) without building a `String`.
    /// Binds TEXT without copying: the bytes must stay valid until the statement is stepped and reset.
    package func bindNoCopy(text value: UnsafeRawBufferPointer, at index: Int32) {
        guard let base = value.baseAddress, value.count > 0 else {
            check(sqlite3_bind_text(handle, index, "", 0, csqlite_static()))
            return
        }
        check(sqlite3_bind_text(handle, index, base.assumingMemoryBound(to: CChar.self), Int32(value.count), csqlite_static()))
    }

    /// Binds a BLOB without copying: the bytes must stay valid until the statement is stepped and reset.
    package func bindNoCopy(blob value: UnsafeRawBufferPointer, at index: Int32) {
        guard let base = value.baseAddress, value.count > 0 else {
            check(sqlite3_bind_zeroblob(handle, index, 0))
            return
        }
        check(sqlite3_bind_blob(handle, index, base, Int32(value.count), csqlite_static()))
    }

    package func bind(text value: [UInt8], at index: Int32) {
        let rc = value.withUnsafeBytes { raw -> Int32 in
            guard let base = raw.baseAddress, raw.count > 0 else {
                return sqlite3_bind_text(handle, index, "", 0, csqlite_static())
            }
            return sqlite3_bind_text(
                handle, index, base.assumingMemoryBound(to: CChar.self), Int32(raw.count), csqlite_transient())
        }
        check(rc)
    }

    /// Binds NULL at a 1-based parameter index.
    package func bindNull(at index: Int32) {
        check(sqlite3_bind_null(handle, index))
    }

    /// Binds `values` at positions 1...n.
    package func bind(_ values: [SQLiteValue]) {
        var index: Int32 = 1
        for value in values {
            switch value {
            case .null: bindNull(at: index)
            case .integer(let v): bind(v, at: index)
            case .real(let v): bind(v, at: index)
            case .text(let v): bind(v, at: index)
            case .blob(let v): bind(bytes: v, at: index)
            }
            index += 1
        }
    }

    /// Sets every parameter back to NULL.
    package func clearBindings() {
        sqlite3_clear_bindings(handle)
        bindError = SQLITE_OK
    }

    // MARK: - Running

    /// Advances to the next row.
    ///
    /// - Returns: `true` when a row is available, `false` when the statement is done.
    /// - Throws: ``SQLiteError`` (also for an earlier failed bind). The statement is reset and, if cached,
    ///   dropped from its connection's cache.
    package func step() throws -> Bool {
        if bindError != SQLITE_OK {
            let rc = bindError
            bindError = SQLITE_OK
            let error = SQLiteError(resultCode: rc, db: sqlite3_db_handle(handle), sql: sql)
            sqlite3_reset(handle)
            throw error
        }
        let rc = sqlite3_step(handle)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        let error = SQLiteError(resultCode: rc, db: sqlite3_db_handle(handle), sql: sql)
        sqlite3_reset(handle)
        cacheOwner?.evict(self)
        throw error
    }

    /// Resets the statement so it can run again; bindings are kept.
    package func reset() {
        sqlite3_reset(handle)
    }

    /// Binds `values` (if any), steps to completion and resets.
    ///
    /// - Parameter values: Parameters for positions 1...n.
    /// - Throws: ``SQLiteError``.
    package func run(_ values: [SQLiteValue] = []) throws {
        if !values.isEmpty { bind(values) }
        while try step() {}
        sqlite3_reset(handle)
    }

    // MARK: - Columns

    /// The number of result columns.
    package var columnCount: Int32 { sqlite3_column_count(handle) }

    /// The name of a 0-based result column.
    package func columnName(_ column: Int32) -> String {
        guard let name = sqlite3_column_name(handle, column) else { return "" }
        return String(cString: name)
    }

    /// The column as an integer (0 for NULL).
    @inline(__always)
    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    /// The column as an integer (0 for NULL).
    @inline(__always)
    package func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }

    /// The column as a double (0 for NULL).
    @inline(__always)
    package func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    /// Whether the column is NULL.
    @inline(__always)
    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    /// The column as a string, or nil when NULL.
    package func string(_ column: Int32) -> String? {
        // sqlite3_column_text returns NULL only for a NULL value (or out of memory); "" is non-NULL.
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// The column's bytes, or nil when NULL; an empty blob is `[]`.
    package func blob(_ column: Int32) -> [UInt8]? {
        if sqlite3_column_type(handle, column) == SQLITE_NULL { return nil }
        guard let bytes = sqlite3_column_blob(handle, column) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, column))
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            buffer.baseAddress!.initialize(from: bytes.assumingMemoryBound(to: UInt8.self), count: count)
            initialized = count
        }
    }

    /// Calls `body` with a zero-copy view of the column's bytes (TEXT as UTF-8, BLOB as is, numbers as their
    /// text form, NULL as an empty buffer). The buffer is valid only inside `body`.
    package func withTextBytes<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        // For TEXT, column_blob returns the UTF-8 bytes without conversion; for numbers, their text form.
        let bytes = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: count > 0 ? bytes : nil, count: bytes == nil ? 0 : count))
    }

    /// The column as a ``SQLiteValue`` of its storage class.
    package func value(_ column: Int32) -> SQLiteValue {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: .integer(sqlite3_column_int64(handle, column))
        case SQLITE_FLOAT: .real(sqlite3_column_double(handle, column))
        case SQLITE_TEXT: .text(string(column) ?? "")
        case SQLITE_BLOB: .blob(blob(column) ?? [])
        default: .null
        }
    }
}
