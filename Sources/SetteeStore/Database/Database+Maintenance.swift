import Foundation
import NIOPosix
import Synchronization
import SetteeCore

/// Compaction, sizes and other whole-database operations.
extension Database {
    /// Sizes in bytes: `file` is the SQLite file plus its WAL, `active` the live data in it — the bytes of every
    /// table's and index's rows (SQLite's `dbstat` payload), without free pages and the unused space of pages, as
    /// CouchDB's `sizes.active` counts the live part of its file.
    package struct Sizes: Sendable {
        public let file: Int
        public let active: Int
        /// The documents' own size, as CouchDB's `sizes.external`: every document's winning revision's body
        /// (tombstones included) and its attachments' lengths — the sum of its partitions' sizes.
        public var external: Int = 0
    }

    /// Current on-disk sizes. `active` comes from a scan of every page (tens of milliseconds per 100 MB), so it is
    /// counted again only when the database changed — and, for a file of 8 MiB or more, when the last count is more
    /// than ``activeSizeMaxAge`` old — or after a compaction.
    package func sizes() throws -> Sizes {
        let fm = FileManager.default
        var file = 0
        for suffix in ["", "-wal"] {
            if let attrs = try? fm.attributesOfItem(atPath: filePath + suffix), let size = attrs[.size] as? NSNumber {
                file += size.intValue
            }
        }
        let cache = extensionObject("settee.active-size") { ActiveSizeCache() }
        let sequence = lastSequence
        // Small files are counted afresh every time (a few milliseconds); larger ones at most every few seconds.
        let maxAge: Duration = file < Self.activeSizeAlwaysCountedBelow ? .zero : Self.activeSizeMaxAge
        if let known = cache.value(sequence: sequence, maxAge: maxAge) {
            return Sizes(file: file, active: min(known.active, file), external: known.external)
        }
        // Both counts read every page of the database (`dbstat`, a scan of the documents' sizes): not through the
        // reader's memory map, where each page read would stay mapped and count in the node's resident memory (a
        // `GET /{db}` of an 80 MB database grew the node's RSS by 80 MB), but through SQLite's bounded page cache.
        let counted = try read { db in try db.withoutMemoryMap { () -> (active: Int, external: Int) in
            let active = try Self.liveBytes(db, tables: nil).active
            var external = 0
            let ids = try db.prepareUncached("SELECT id FROM collections")
            var collections: [Int64] = []
            while try ids.step() { collections.append(ids.int64(0)) }
            ids.reset()
            for id in collections {
                let stmt = try db.prepareUncached("SELECT \(Collection.externalSizeSQL) FROM docs_\(id)")
                if try stmt.step() { external += stmt.int(0) }
                stmt.reset()
            }
            return (active, external)
        } }
        cache.set(counted, sequence: sequence)
        return Sizes(file: file, active: min(counted.active, file), external: counted.external)
    }

    /// How stale `sizes().active` may be while a database of ``activeSizeAlwaysCountedBelow`` bytes or more is
    /// being written.
    public static let activeSizeMaxAge: Duration = .seconds(10)
    /// Below this file size, `sizes().active` is counted again whenever the database changed.
    public static let activeSizeAlwaysCountedBelow = 8 << 20

    /// The pages (`file`) and row bytes (`active`) of some tables and indexes (nil: all of them), from `dbstat`.
    package static func liveBytes(_ db: Connection, tables: [String]?) throws -> (file: Int, active: Int) {
        var sql = "SELECT coalesce(sum(pgsize), 0), coalesce(sum(payload), 0) FROM dbstat WHERE aggregate = 1"
        if let tables {
            if tables.isEmpty { return (0, 0) }
            sql += " AND name IN (" + Array(repeating: "?", count: tables.count).joined(separator: ", ") + ")"
        }
        return try db.withoutMemoryMap {
            let stmt = try db.prepareUncached(sql)
            defer { stmt.reset() }
            for (i, name) in (tables ?? []).enumerated() { stmt.bind(name, at: Int32(i + 1)) }
            guard try stmt.step() else { return (0, 0) }
            return (stmt.int(0), stmt.int(1))
        }
    }

    /// Compacts the database, as CouchDB's compaction does: drops the bodies of replaced revisions (kept in
    /// `revs_<cid>` since their replacement; afterwards only leaves have bodies), deletes attachment bodies no
    /// remaining revision refers to, checkpoints the WAL and rebuilds the file (`VACUUM`).
    public func compact() throws {
        try checkOpen()
        do {
            try pool.write { db in
                let limit = revsLimit
                try db.transaction(.immediate) {
                    // A lowered _revs_limit applies to every document at compaction, as in CouchDB.
                    try Database.stemTrees(db, limit: limit)
                    // Before the blob sweep, so attachments only old revisions referred to are freed too.
                    try Database.emptyArchives(db)
                    try Database.deleteUnreferencedBlobs(db)
                }
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                try db.execute("VACUUM")
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
            extensionObject("settee.active-size") { ActiveSizeCache() }.clear()
        } catch let error as SetteeError {
            throw error
        } catch {
            throw storageError(error)
        }
    }

    /// The ids of every collection (their tables are `docs_<id>`).
    static func collectionIDs(_ db: Connection) throws -> [Int64] {
        let cols = try db.prepare("SELECT id FROM collections")
        defer { cols.reset() }
        var cids: [Int64] = []
        while try cols.step() { cids.append(cols.int64(0)) }
        return cids
    }

    /// Drops every archived body of a replaced revision (this also covers revisions stemming has since removed
    /// from their trees, whose bodies nothing can reach any more).
    static func emptyArchives(_ db: Connection) throws {
        for cid in try collectionIDs(db) {
            try db.execute("DELETE FROM revs_\(cid)")
            try db.execute("UPDATE docs_\(cid) SET arch = NULL WHERE arch IS NOT NULL")
        }
    }

    /// Stems every document's revision tree to `limit` revisions per path (the winner's body stays in `body`).
    static func stemTrees(_ db: Connection, limit: Int) throws {
        let cids = try collectionIDs(db)
        for cid in cids {
            let read = try db.prepareUncached("SELECT rowid, rev, tree FROM docs_\(cid)")
            var updates: [(Int64, [UInt8])] = []
            while try read.step() {
                guard let bytes = read.blob(2), var tree = try? RevTree(encoded: bytes), tree.nodes.count > limit else { continue }
                if tree.stem(limit: limit) > 0 {
                    updates.append((read.int64(0), tree.encoded(omitBodyOf: read.string(1).flatMap(RevID.init))))
                }
            }
            read.reset()
            let write = try db.prepareUncached("UPDATE docs_\(cid) SET tree = ? WHERE rowid = ?")
            for (rowid, tree) in updates {
                write.bind(bytes: tree, at: 1)
                write.bind(rowid, at: 2)
                _ = try write.step()
                write.reset()
            }
        }
    }

    /// Deletes blobs whose digest no document body or kept leaf body mentions.
    static func deleteUnreferencedBlobs(_ db: Connection) throws {
        guard try db.int64("SELECT count(*) FROM blobs") ?? 0 > 0 else { return }
        var referenced = Set<String>()
        let cids = try collectionIDs(db)
        for cid in cids {
            let stmt = try db.prepareUncached("SELECT body, tree FROM docs_\(cid) WHERE \(DocumentTable.has(.hasAttachments)) OR \(DocumentTable.has(.conflicted)) OR length(tree) > 64")
            while try stmt.step() {
                var bodies: [[UInt8]] = [stmt.blob(0) ?? []]
                if let treeBytes = stmt.blob(1), let tree = try? RevTree(encoded: treeBytes) {
                    bodies += tree.nodes.compactMap(\.body)
                }
                for body in bodies where body.containsAttachments {
                    guard let json = try? JSON.parse(body), let atts = json["_attachments"]?.objectValue else { continue }
                    for (_, meta) in atts {
                        if let digest = meta["digest"]?.stringValue { referenced.insert(digest) }
                    }
                }
            }
        }
        let unreferenced = try db.withStatement("SELECT digest FROM blobs") { all in
            var unreferenced: [String] = []
            while try all.step() {
                if let d = all.string(0), !referenced.contains(d) { unreferenced.append(d) }
            }
            return unreferenced
        }
        let delete = try db.prepare("DELETE FROM blobs WHERE digest = ?")
        for d in unreferenced { try delete.run([.text(d)]) }
    }

    // MARK: Async

    /// Runs blocking store work off the caller's executor and returns its result: on the store's own pool of
    /// ``offloadWidth`` threads, started once and kept. The server uses this for every blocking call (SQLite, design
    /// functions waiting for their query server, files), so none runs on an event loop or Swift's cooperative
    /// pool.
    ///
    /// At most ``offloadWidth`` calls run at once, process-wide; the others wait, first come first served, as
    /// suspended tasks that hold no thread. The threads are the pool's own: work blocked in one call (an endless
    /// design function until its time limit, a writer until its group commit) never takes a thread the others need
    /// from a shared pool, which grows only when it notices blocked threads (libdispatch's on Linux, which made
    /// one tenant's endless map functions stall every request for seconds).
    public static func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        await offloadGate.enter()
        return try await withCheckedThrowingContinuation { continuation in
            offloadPool.submit { _ in
                // (The pool is never shut down, so every item runs: a write that was admitted is always made.)
                let result = Result { try work() }
                offloadGate.leave()
                continuation.resume(with: result)
            }
        }
    }

    /// How many ``offload(_:)`` calls run at once: enough for a group commit to gather many writers' documents.
    public static let offloadWidth = 64

    /// The store's threads for blocking work: a fixed pool, never shut down (it lives as long as the process).
    static let offloadPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: offloadWidth)
        pool.start()
        return pool
    }()
    static let offloadGate = OffloadGate(width: offloadWidth)
}

/// A counting gate for async callers: `enter` takes a slot or suspends (holding no thread) until one is free;
/// `leave` hands the slot to the longest waiter.
final class OffloadGate: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
        var head = 0  // waiters before it were resumed (compacted when half the array is spent)
        var running = 0
        var peak = 0

        mutating func take() -> Bool {
            guard available > 0 else { return false }
            available -= 1
            running += 1
            peak = max(peak, running)
            return true
        }
    }
    private let state: Mutex<State>

    init(width: Int) { state = Mutex(State(available: width)) }

    func enter() async {
        if state.withLock({ $0.take() }) { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.take() { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.head < state.waiters.count else {
                state.available += 1
                state.running -= 1
                return nil
            }
            let next = state.waiters[state.head]
            state.head += 1
            if state.head * 2 >= state.waiters.count {
                state.waiters.removeFirst(state.head)
                state.head = 0
            }
            return next  // the slot passes to it: `running` stays
        }
        next?.resume()
    }

    /// The most calls that ran at once so far (for tests and diagnostics).
    var peak: Int { state.withLock { $0.peak } }
}


/// The last count of a database's live bytes and its documents' size (``Database/sizes()``), with the sequence and time it was taken at.
final class ActiveSizeCache: Sendable {
    private struct Entry {
        let bytes: (active: Int, external: Int)
        let sequence: UInt64
        let at: ContinuousClock.Instant
    }
    private let entry = Mutex<Entry?>(nil)

    /// The count, if it is of this sequence or younger than `maxAge`.
    func value(sequence: UInt64, maxAge: Duration) -> (active: Int, external: Int)? {
        entry.withLock { e in
            guard let e else { return nil }
            return e.sequence == sequence || ContinuousClock.now - e.at < maxAge ? e.bytes : nil
        }
    }

    func set(_ bytes: (active: Int, external: Int), sequence: UInt64) {
        entry.withLock { $0 = Entry(bytes: bytes, sequence: sequence, at: .now) }
    }

    /// Forget it (a compaction changed the file).
    func clear() {
        entry.withLock { $0 = nil }
    }
}
