/// Options for opening a ``DatabasePool``.
///
/// ```swift
/// let pool = try DatabasePool(path: path, configuration: .init(readers: 8, synchronousFull: true))
/// ```
package struct PoolConfiguration: Sendable {
    /// The most reader connections the pool opens (at least 1).
    package var readers: Int = 4
    /// `PRAGMA synchronous=FULL` when true, else `NORMAL` (durable across process crashes, not power loss).
    package var synchronousFull: Bool = false
    /// Page size for new databases (bytes; 0 keeps SQLite's default).
    package var pageSize: Int = 8192
    /// WAL pages written before an automatic checkpoint (SQLite's default is 1000).
    package var walAutocheckpointPages: Int = 4000
    /// The size the WAL file is cut down to when it starts over after a full checkpoint (`journal_size_limit`),
    /// bytes: an eighth of what accumulates before a checkpoint starts (``walAutocheckpointPages``).
    package var walSizeLimitBytes: Int = 4 * 1024 * 1024
    /// Page cache of the writer connection, KiB. 8 MB: inserting 100,000 documents in one batch (and 1,000,000
    /// in batches), updates and index builds run as fast as with 16 or 32 MB (measured side by side), whose pages
    /// were a tenth and a quarter of a library process's peak RSS; pages the cache drops come back from the OS's.
    package var writerCacheKiB: Int = 8 * 1024
    /// Page cache of each reader connection, KiB.
    package var readerCacheKiB: Int = 8 * 1024
    /// Memory-mapped I/O size for readers (0 disables). Large enough to map a database of millions of documents
    /// whole (SQLite caps it at its `SQLITE_MAX_MMAP_SIZE`, 2 GB by default): a read past the mapped part goes through
    /// `pread` and the reader's page cache, which at 1M documents cost indexed queries ~10 % (256 MB before). Only
    /// pages read count toward RSS, as file-backed pages the kernel can drop; the heap doesn't grow with it.
    package var mmapBytes: Int = 2 << 30
    /// Opens every connection read-only; writes fail with `SQLITE_READONLY`.
    package var readOnly: Bool = false

    /// Creates a configuration.
    ///
    /// - Parameter readers: The most reader connections to open.
    /// - Parameter synchronousFull: Use `synchronous=FULL` instead of `NORMAL`.
    /// - Parameter readOnly: Open the database read-only.
    /// - Parameter mmapEnabled: Map the file for readers (``mmapBytes``); false reads through the page cache only.
    package init(readers: Int = 4, synchronousFull: Bool = false, readOnly: Bool = false, mmapEnabled: Bool = true) {
        self.readers = readers
        self.synchronousFull = synchronousFull
        self.readOnly = readOnly
        if !mmapEnabled { mmapBytes = 0 }
    }
}
