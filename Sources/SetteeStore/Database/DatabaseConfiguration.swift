public import Foundation

/// How a ``Database`` is opened: where its file lives and how durable and concurrent it is.
///
/// ```swift
/// var config = DatabaseConfiguration()
/// config.directory = "/var/lib/settee"
/// let db = try Database(name: "orders", config: config)
/// ```
public struct DatabaseConfiguration: Sendable {
    /// The directory holding the database files (one `<name>.sqlite` per database). Created if missing.
    /// Defaults to the current working directory.
    public var directory: String
    /// `true` syncs every commit to stable storage (`PRAGMA synchronous=FULL`): survives power loss.
    /// `false` (default, `synchronous=NORMAL` in WAL mode) survives process crashes but may lose the last
    /// commits on power loss.
    public var fullSync: Bool
    /// Number of WAL reader connections kept open for concurrent reads.
    public var readers: Int
    /// Revisions kept per document path when the database is created (CouchDB's `_revs_limit`).
    public var revsLimit: Int
    /// Readers map the database file into memory (SQLite's `mmap_size`), which makes reads of a large database
    /// cheaper; `false` reads through SQLite's page cache only.
    public var mmapEnabled: Bool = DatabaseConfiguration.defaultMmapEnabled
    /// The rules every write to the database passes before it is stored (a Settee extension; nil: none). A node
    /// serving the database supplies its own: `validate_doc_update`, the `_users` rules, size limits.
    package var admission: (any WriteAdmission)?

    public init(directory: String = FileManager.default.currentDirectoryPath,
                fullSync: Bool = DatabaseConfiguration.defaultFullSync, readers: Int = 4, revsLimit: Int = 1000) {
        self.directory = directory
        self.fullSync = fullSync
        self.readers = readers
        self.revsLimit = revsLimit
    }

    /// A copy of `config`, or the defaults for nil (Couchbase Lite's `init(config:)`).
    public init(config: DatabaseConfiguration?) {
        self = config ?? DatabaseConfiguration()
    }

    /// Couchbase Lite's defaults: commits not synced to stable storage one by one, memory-mapped reads.
    public static let defaultFullSync = false
    public static let defaultMmapEnabled = true
}
