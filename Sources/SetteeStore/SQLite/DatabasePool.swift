import CSQLite
import Dispatch
import Foundation
import Synchronization

/// One serialized writer connection and a pool of WAL reader connections to one database file.
///
/// Thread-safe. Opening sets `journal_mode=WAL`, `synchronous` (NORMAL or FULL), `foreign_keys=ON` and a 10 s
/// busy timeout. Readers also set `query_only=ON`. SQLite is only ever called on the caller's thread; async
/// callers go through `Database`'s offload queue and group-commit writer, never the Swift cooperative pool.
///
/// ```swift
/// let pool = try DatabasePool(path: path) { writer in try migrator.migrate(writer) }
/// try pool.write { db in try db.prepare("INSERT INTO t(x) VALUES (?)").run([.integer(1)]) }
/// let count = try pool.read { db in
///     let statement = try db.prepare("SELECT count(*) FROM t")
///     _ = try statement.step()
///     return statement.int(0)
/// }
/// ```
// @unchecked: the writer connection is guarded by `writerLock`, held for a whole write; the idle readers and counts
// by `readerCondition` (a reader waits on it for a free connection, which a Mutex can't do); the checkpointer by
// `checkpointLock`. A connection is used by one thread at a time: the one that took it from the pool.
package final class DatabasePool: @unchecked Sendable {
    /// The database file path.
    package let path: String
    private let configuration: PoolConfiguration

    // Writer: guarded by writerLock.
    private let writerLock = NSLock()
    private var writer: Connection?

    // Readers: guarded by readerCondition.
    private let readerCondition = NSCondition()
    private var idleReaders: [Connection] = []
    private var openReaderCount = 0
    private var busyReaderCount = 0
    private var readersClosed = false

    private let closed = Atomic<Bool>(false)
    /// The connections open now, and the most open at once since the pool last held none, for ``openFiles``.
    private let connections = Mutex<(open: Int, peak: Int)>((0, 0))
    /// When the pool was last used (``OpenPools/now()``), for choosing the least recently used pool to hibernate.
    let lastUsed = Atomic<UInt64>(0)

    /// Opens the pool: the writer first (runs `prepareWriter` on it, e.g. migrations); readers open on demand.
    ///
    /// - Parameter path: The database file (created unless read-only).
    /// - Parameter configuration: Reader count, durability, read-only.
    /// - Parameter prepareWriter: Runs once on the writer before any reader opens.
    /// - Throws: ``SQLiteError`` if opening, configuring or `prepareWriter` fails.
    package init(
        path: String,
        configuration: PoolConfiguration = .init(),
        prepareWriter: (Connection) throws -> Void = { _ in }
    ) throws {
        self.path = path
        self.configuration = configuration

        checkpointQueue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
        self.writer = try openWriter(prepare: prepareWriter)
        touch()
        connectionOpened()
    }

    /// The files the pool's connections hold open: per connection the database and its WAL, and the WAL index
    /// once. (SQLite keeps a closed connection's database descriptor open while other connections to the file hold
    /// their locks, for the next connection to reuse: it counts until the pool holds no connection.)
    package var openFiles: Int {
        connections.withLock { $0.open == 0 ? 0 : $0.open + $0.peak + 1 }
    }

    /// A connection opened: ``OpenPools`` counts its files, and past its limit other pools hibernate — here, unless
    /// `inline` is false (then in the background).
    private func connectionOpened(inline: Bool = true) {
        connections.withLock {
            $0.open += 1
            $0.peak = max($0.peak, $0.open)
        }
        OpenPools.shared.update(self, inline: inline)
    }

    /// A connection closed.
    private func connectionClosed(count: Int = 1) {
        guard count > 0 else { return }
        connections.withLock {
            $0.open = max(0, $0.open - count)
            if $0.open == 0 { $0.peak = 0 }
        }
        OpenPools.shared.update(self)
    }

    /// Opens and configures the writer connection (WAL, durability, its page cache, checkpoints by the WAL hook);
    /// `prepare` runs on it before it is used (migrations, at the first open).
    private func openWriter(prepare: (Connection) throws -> Void = { _ in }) throws -> Connection {
        let writer = try Connection(path: path, readOnly: configuration.readOnly)
        do {
            if !configuration.readOnly {
                // Takes effect only on a new, empty database (before WAL is enabled).
                if configuration.pageSize > 0 { try writer.execute("PRAGMA page_size=\(configuration.pageSize)") }
                let statement = try writer.prepareUncached("PRAGMA journal_mode=WAL")
                let mode = try statement.step() ? statement.string(0)?.lowercased() : nil
                guard mode == "wal" else {
                    throw SQLiteError(
                        code: SQLITE_ERROR, message: "could not enable WAL (journal_mode is \(mode ?? "unknown"))",
                        sql: "PRAGMA journal_mode=WAL")
                }
                try writer.execute("PRAGMA synchronous=\(configuration.synchronousFull ? "FULL" : "NORMAL")")
            }
            try writer.execute("PRAGMA foreign_keys=ON")
            // A larger page cache for the writer: document writes touch three B-trees per row.
            try writer.execute("PRAGMA cache_size=-\(configuration.writerCacheKiB)")
            try writer.execute("PRAGMA temp_store=MEMORY")
            // Automatic checkpoints are off on the writer: a WAL hook (below) runs them in the background.
            try writer.execute("PRAGMA wal_autocheckpoint=0")
            // Once a checkpoint has copied the whole WAL back, the writer's next transaction starts the WAL over and
            // cuts the file down to this size: a bulk load leaves no WAL of its own size behind for good.
            try writer.execute("PRAGMA journal_size_limit=\(configuration.walSizeLimitBytes)")
            try prepare(writer)
            writer.rollbackIfNeeded()
        } catch {
            writer.close()
            throw error
        }
        if !configuration.readOnly && configuration.walAutocheckpointPages > 0 {
            // Checkpoints run beside the writer instead of inside one unlucky commit (SQLite's autocheckpoint).
            sqlite3_wal_hook(writer.handle, { context, db, _, pages in
                guard let context else { return SQLITE_OK }
                Unmanaged<DatabasePool>.fromOpaque(context).takeUnretainedValue().walGrew(pages: Int(pages), writer: db)
                return SQLITE_OK
            }, Unmanaged.passUnretained(self).toOpaque())
        }
        return writer
    }

    // MARK: - WAL checkpoints

    private let checkpointQueue = DispatchQueue(label: "settee.db.checkpoint", qos: .utility)
    /// Marks `checkpointQueue` as this pool's, so that work on it can tell (``onCheckpointQueue(_:)``).
    private static let queueKey = DispatchSpecificKey<ObjectIdentifier>()
    private let checkpointLock = NSLock()
    private var checkpointRunning = false
    private var checkpointer: Connection?
    /// Commits on the writer so far (a WAL is cut down only once writes have paused: ``truncateWAL(after:attemptsLeft:)``).
    private let commits = Atomic<UInt64>(0)

    /// Called by SQLite after each commit on the writer with the WAL's size in pages. Past the threshold a
    /// PASSIVE checkpoint runs on a connection of its own (it blocks neither the writer nor readers); if the WAL
    /// still grows far beyond it (checkpoints held back by long reads), the writer checkpoints itself.
    private func walGrew(pages: Int, writer: OpaquePointer?) {
        commits.add(1, ordering: .relaxed)
        let threshold = configuration.walAutocheckpointPages
        guard pages >= threshold else { return }
        if pages >= threshold * 8 {
            sqlite3_wal_checkpoint_v2(writer, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            return
        }
        let start: Bool = checkpointLock.withLock {
            if checkpointRunning { return false }
            checkpointRunning = true
            return true
        }
        guard start else { return }
        checkpointQueue.async { [weak self] in
            guard let self else { return }
            defer { self.checkpointLock.withLock { self.checkpointRunning = false } }
            // (Not for a pool that closed or hibernated since: that would open a connection again.)
            guard !self.isClosed, OpenPools.shared.isOpen(self) else { return }
            if self.checkpointer == nil, let connection = try? Connection(path: self.path) {
                self.checkpointer = connection
                // (Not inline: hibernating another pool waits for its checkpoint, and two checkpointers would wait
                // for each other.)
                self.connectionOpened(inline: false)
            }
            guard let checkpointer = self.checkpointer else { return }
            // (Counted before the checkpoint: a commit while it runs leaves pages it did not copy, so it must stop the
            // cut-back below.)
            let seen = self.commits.load(ordering: .relaxed)
            // (The PRAGMA, not `sqlite3_wal_checkpoint_v2`: on a connection that has read nothing yet, the C call finds
            // no WAL open and does nothing.)
            guard let (_, logPages, copiedPages) = try? Self.checkpoint(checkpointer, "PASSIVE") else { return }
            if logPages >= 0, logPages == copiedPages, self.walFileSize() > 2 * self.configuration.walSizeLimitBytes {
                self.truncateWAL(after: seen, attemptsLeft: 40)
            }
        }
    }

    /// Cuts a WAL that has been copied back whole, and is well past its size limit (a bulk write's), down to nothing,
    /// once writes have paused. SQLite starts the WAL over and cuts it to its limit at the next write, which after a
    /// bulk load or an index build may not come for a long time; while writes go on, cutting the file would only make
    /// the next ones grow it again (an index build of 1M documents took 20 % longer). So: a quarter second after the
    /// checkpoint, if no commit came since `commitsSeen`, TRUNCATE without waiting — while a reader still uses the WAL
    /// it gives up at once (waiting, it would hold new writers back) and is tried again a quarter second later;
    /// readers that start after the copy read the database file, not the WAL. On the checkpoint queue.
    private func truncateWAL(after commitsSeen: UInt64, attemptsLeft: Int) {
        guard attemptsLeft > 0 else { return }
        checkpointQueue.asyncAfter(deadline: .now() + .milliseconds(250)) { [weak self] in
            guard let self, !self.isClosed, OpenPools.shared.isOpen(self) else { return }
            // (A commit since, or a checkpoint under way, decides for itself; a hibernated pool has no checkpointer.)
            let running = self.checkpointLock.withLock { self.checkpointRunning }
            guard !running, self.commits.load(ordering: .relaxed) == commitsSeen,
                  let checkpointer = self.checkpointer else { return }
            sqlite3_busy_timeout(checkpointer.handle, 0)
            let outcome = try? Self.checkpoint(checkpointer, "TRUNCATE")
            sqlite3_busy_timeout(checkpointer.handle, Connection.busyTimeoutMilliseconds)
            guard let outcome, outcome.busy else { return }
            self.truncateWAL(after: commitsSeen, attemptsLeft: attemptsLeft - 1)
        }
    }

    /// Runs `body` on the checkpoint queue and waits for it — inline when already on it (the pool's last reference
    /// can go away in a checkpoint task, and `deinit` closes the pool there: a `sync` would wait for itself).
    private func onCheckpointQueue(_ body: () -> Void) {
        if DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self) {
            body()
        } else {
            checkpointQueue.sync(execute: body)
        }
    }

    /// The `-wal` file's size in bytes (0 when there is none).
    private func walFileSize() -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Runs `PRAGMA wal_checkpoint(mode)` on `connection`: whether it gave up on a lock (busy), the WAL's size and
    /// the pages copied back (-1 each when the database is not in WAL mode).
    private static func checkpoint(_ connection: Connection, _ mode: String) throws -> (busy: Bool, log: Int64, copied: Int64) {
        let stmt = try connection.prepareUncached("PRAGMA wal_checkpoint(\(mode))")
        defer { stmt.reset() }
        guard try stmt.step() else { return (false, -1, -1) }
        return (stmt.int64(0) != 0, stmt.int64(1), stmt.int64(2))
    }

    deinit {
        close()
    }

    /// Marks the pool used now (for ``OpenPools``' choice of the least recently used; under the caller's lock).
    private func touch() {
        lastUsed.store(OpenPools.now(), ordering: .relaxed)
    }

    /// Whether ``close()`` has been called.
    package var isClosed: Bool { closed.load(ordering: .acquiring) }

    private static var closedError: SQLiteError {
        SQLiteError(code: SQLITE_MISUSE, message: "database is closed")
    }

    // MARK: - Writing

    /// Runs `body` on the writer connection, serialized with every other write (blocks while another runs).
    ///
    /// A transaction `body` leaves open is rolled back. Do not call `write` from inside `write` (deadlock).
    ///
    /// - Parameter body: The work; begin a transaction in it for atomicity.
    /// - Throws: What `body` throws, or ``SQLiteError`` (`SQLITE_MISUSE`) once the pool is closed.
    package func write<T>(_ body: (Connection) throws -> T) throws -> T {
        writerLock.lock()
        defer { writerLock.unlock() }
        touch()
        if writer == nil && !isClosed {
            writer = try openWriter()
            connectionOpened()
        }
        guard let writer else { throw Self.closedError }
        defer { writer.rollbackIfNeeded() }
        return try body(writer)
    }

    // MARK: - Reading

    /// Runs `body` on a reader connection (`query_only`). Begin a transaction in `body` for a consistent WAL
    /// snapshot across several statements. Readers are reused; a new one opens while fewer than
    /// ``PoolConfiguration/readers`` exist; otherwise this waits for a free one.
    ///
    /// - Parameter body: The work.
    /// - Throws: What `body` throws, or ``SQLiteError`` if a reader cannot open or the pool is closed.
    package func read<T>(_ body: (Connection) throws -> T) throws -> T {
        let deadline = ReadDeadline.current
        if deadline != 0 && ReadDeadline.hasPassed { throw ReadDeadline.timeoutError() }
        let reader = try checkOutReader()
        defer { checkIn(reader) }
        defer { reader.rollbackIfNeeded() }
        if deadline != 0 {
            ReadDeadline.install(deadline, on: reader.handle)
            defer { ReadDeadline.install(0, on: reader.handle) }
            do { return try body(reader) } catch {
                if ReadDeadline.hasPassed { throw ReadDeadline.timeoutError() }
                throw error
            }
        }
        return try body(reader)
    }

    private func checkOutReader() throws -> Connection {
        readerCondition.lock()
        while true {
            if readersClosed {
                readerCondition.unlock()
                throw Self.closedError
            }
            touch()
            if let reader = idleReaders.popLast() {
                busyReaderCount += 1
                readerCondition.unlock()
                return reader
            }
            if openReaderCount < max(1, configuration.readers) {
                openReaderCount += 1
                busyReaderCount += 1
                readerCondition.unlock()
                do {
                    let reader = try openReader()
                    connectionOpened()
                    return reader
                } catch {
                    readerCondition.lock()
                    openReaderCount -= 1
                    busyReaderCount -= 1
                    readerCondition.broadcast()
                    readerCondition.unlock()
                    throw error
                }
            }
            readerCondition.wait()
        }
    }

    private func checkIn(_ reader: Connection) {
        readerCondition.lock()
        busyReaderCount -= 1
        let closing = readersClosed
        if closing {
            openReaderCount -= 1
            reader.close()
        } else {
            idleReaders.append(reader)
        }
        readerCondition.broadcast()
        readerCondition.unlock()
        if closing { connectionClosed() }
    }

    private func openReader() throws -> Connection {
        let reader = try Connection(path: path, readOnly: configuration.readOnly)
        do {
            try reader.execute("PRAGMA query_only=ON")
            try reader.execute("PRAGMA foreign_keys=ON")
            try reader.execute("PRAGMA cache_size=-\(configuration.readerCacheKiB)")
            if configuration.mmapBytes > 0 { try reader.execute("PRAGMA mmap_size=\(configuration.mmapBytes)") }
        } catch {
            reader.close()
            throw error
        }
        return reader
    }

    // MARK: - Hibernating

    /// Whether the pool holds no connection (hibernating, or closed).
    package var isHibernating: Bool {
        writerLock.withLock { writer == nil } && readerCondition.withLock { openReaderCount == 0 }
    }

    /// Closes every connection if nothing is using one — no read or write in flight — so that the database holds
    /// no file or page cache until it is used again; the next read or write opens it as before. Returns false (and
    /// closes only idle readers) when busy. SQLite checkpoints the WAL into the file as its last connection closes.
    @discardableResult
    package func hibernate() -> Bool {
        guard !isClosed else {
            OpenPools.shared.closed(self)
            return true
        }
        // Readers wait on `readerCondition` while this runs, so none opens between the check and the writer's close.
        readerCondition.lock()
        let readers = idleReaders
        idleReaders.removeAll()
        openReaderCount -= readers.count
        for reader in readers { reader.close() }
        guard busyReaderCount == 0, writerLock.try() else {
            readerCondition.unlock()
            connectionClosed(count: readers.count)
            return false
        }
        // (Out of the open pools first: a background checkpoint starting now sees it and opens no connection.)
        OpenPools.shared.closed(self)
        onCheckpointQueue {
            checkpointer?.close()
            checkpointer = nil
        }
        connections.withLock { $0 = (0, 0) }
        // No checkpoint as the last connection closes: hibernating then costs no write and no sync (the WAL stays
        // on disk, durable, and is read again at the next open; the WAL hook checkpoints it as writes go on).
        if let writer { _ = csqlite_skip_checkpoint_on_close(writer.handle) }
        writer?.close()
        writer = nil
        writerLock.unlock()
        readerCondition.unlock()
        return true
    }

    /// Whether a background checkpoint is running (hibernating would wait for it while holding the pool's locks).
    var isCheckpointing: Bool { checkpointLock.withLock { checkpointRunning } }

    // MARK: - Closing

    /// Waits for in-flight reads and writes, closes the readers, checkpoints the WAL (`TRUNCATE`) if possible
    /// and closes the writer. Later calls to `read`/`write` throw `SQLITE_MISUSE` "database is closed".
    /// Idempotent. Do not call from inside `read`/`write` (deadlock).
    package func close() {
        if closed.exchange(true, ordering: .acquiringAndReleasing) { return }
        OpenPools.shared.closed(self)

        readerCondition.lock()
        readersClosed = true
        readerCondition.broadcast()
        while busyReaderCount > 0 { readerCondition.wait() }
        let readers = idleReaders
        idleReaders.removeAll()
        openReaderCount -= readers.count
        readerCondition.unlock()
        for reader in readers { reader.close() }

        onCheckpointQueue {
            checkpointer?.close()
            checkpointer = nil
        }
        connections.withLock { $0 = (0, 0) }
        OpenPools.shared.closed(self)  // (again: a reader checking in meanwhile reported its files)
        writerLock.lock()
        var writer = self.writer
        self.writer = nil
        writerLock.unlock()
        // A hibernated pool left its WAL as it was: open a connection once more to fold it into the database.
        if writer == nil, !configuration.readOnly,
           let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber, size.intValue > 0 {
            writer = try? Connection(path: path)
        }
        if let writer {
            if !configuration.readOnly {
                _ = try? writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
            writer.close()
        }
    }
}
