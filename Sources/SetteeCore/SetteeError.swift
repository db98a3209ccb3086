/// The one error type Settee's public API throws.
///
/// A `SetteeError` carries a ``Code`` you can match on, a human-readable ``reason`` and, where
/// another layer failed first (SQLite, the JSON parser, a socket), the ``underlying`` error.
///
/// ```swift
/// do {
///     try collection.save(document: doc, concurrencyControl: .failOnConflict)
/// } catch let error as SetteeError where error.code == .conflict {
///     // someone else updated the document first
/// }
/// ```
///
/// The server maps each code to CouchDB's HTTP status and `{"error","reason"}` body in one table.
public struct SetteeError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static constants.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The request or its input is malformed (bad JSON, bad option value, bad revision history).
        public static let badRequest = Code("bad_request")
        /// The document id is not allowed (empty, or starts with `_` other than `_design/` / `_local/`).
        public static let badDocID = Code("bad_doc_id")
        /// A partition name that is empty, starts with `_` or contains a colon (partitioned databases).
        public static let illegalPartition = Code("illegal_partition")
        /// A write that would take a partition past the database's `max_partition_size`.
        public static let partitionOverflow = Code("partition_overflow")
        /// The JSON text is malformed; ``SetteeError/reason`` names the byte offset.
        public static let invalidJSON = Code("invalid_json")
        /// A stale or missing `_rev`: the write would lose someone else's update.
        public static let conflict = Code("conflict")
        /// The document, revision, database or collection does not exist.
        public static let notFound = Code("not_found")
        /// The document exists but its winning revision is a tombstone.
        public static let deleted = Code("deleted")
        /// Creating something that already exists (a database, a collection).
        public static let fileExists = Code("file_exists")
        /// A database name outside `^[a-z][a-z0-9_$()+/-]*$` or longer than 238 characters.
        public static let illegalDatabaseName = Code("illegal_database_name")
        /// A body or document above the configured size limit.
        public static let tooLarge = Code("too_large")
        /// An attachment stub names a digest or revpos the store does not have.
        public static let missingStub = Code("missing_stub")
        /// Authentication is required or failed.
        public static let unauthorized = Code("unauthorized")
        /// The caller is authenticated but not allowed.
        public static let forbidden = Code("forbidden")
        /// The database was closed (or deleted) while in use.
        public static let closed = Code("closed")
        /// The storage engine failed (I/O error, full disk, corrupt file). ``SetteeError/underlying`` has the SQLite error.
        public static let storage = Code("storage")
        /// A query (or an index definition) that does not parse, or names an unknown function, index, collection or
        /// parameter; ``SetteeError/reason`` names the position and the problem. HTTP 400 `query_parse_error`.
        public static let queryParseError = Code("query_parse_error")
        /// Work stopped at its time limit (a query past the node's query timeout). HTTP 408 `timeout`.
        public static let timeout = Code("timeout")
        /// A bug or an unexpected state: please report it.
        public static let internalError = Code("internal_error")
    }

    /// What kind of failure this is.
    public let code: Code
    /// A sentence a person can act on, e.g. `Document update conflict.`
    public let reason: String
    /// The error from a lower layer that caused this one, if any.
    public let underlying: (any Error & Sendable)?

    public init(_ code: Code, _ reason: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.reason = reason
        self.underlying = underlying
    }

    public var description: String {
        if let underlying { return "\(code.rawValue): \(reason) (\(underlying))" }
        return "\(code.rawValue): \(reason)"
    }
}

extension SetteeError {
    /// CouchDB's conflict error: `Document update conflict.`
    public static var updateConflict: SetteeError { SetteeError(.conflict, "Document update conflict.") }
    /// A missing document (`reason: "missing"`).
    public static var missing: SetteeError { SetteeError(.notFound, "missing") }
}
