import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The database pools holding open SQLite connections, and how many files they may hold at once — CouchDB's
/// `max_dbs_open`.
///
/// A node with a thousand databases (one per user) would otherwise keep every database it ever touched open: its
/// files and page caches. The limit counts what it protects, file descriptors: CouchDB's database is one file, but
/// an open SQLite database in WAL mode holds the database and its WAL per connection and the WAL index once — three
/// files with only the writer open, up to thirteen in a busy pool (the writer, up to four readers, the
/// checkpointer). When the open pools' files pass the limit, the least recently used others hibernate
/// (``DatabasePool/hibernate()``) in the background: they close their connections if nothing is using them, and
/// open again on their next read or write, unnoticed by callers. Below the limit too, a pool nothing has used for
/// ``idleAfter`` hibernates (a sweep every half second, stopped while no pool holds connections): an idle database
/// holds no file, no page cache and no parsed schema.
package final class OpenPools: Sendable {
    package static let shared = OpenPools()
    /// CouchDB's default `max_dbs_open`.
    package static let defaultLimit = 500

    private struct Entry {
        weak var pool: DatabasePool?
        /// The pool's ``DatabasePool/openFiles`` when it last reported them.
        var files: Int
        /// Chosen to hibernate, and not yet done: its files count as freed, and it is not chosen again meanwhile
        /// (with a queue of hibernations behind a burst of opens, choosing the same pools again and again held them).
        var hibernating = false
    }
    private struct State {
        var open: [ObjectIdentifier: Entry] = [:]
        /// The sum of the entries' files.
        var files = 0
        var limit = OpenPools.defaultLimit
    }
    private let state = Mutex(State())
    private let hibernated = Atomic<Int>(0)

    /// How many times a pool has closed its connections, past the limit or idle (since the process started).
    package var hibernations: Int { hibernated.load(ordering: .relaxed) }
    private let background = DispatchQueue(label: "settee.db.hibernate", qos: .utility)
    /// How long a pool goes unused before it hibernates.
    package static let idleAfter: Duration = .seconds(1)
    /// The sweep hibernating idle pools: started with the first pool, every half second after.
    private let sweeper = Mutex<DispatchSourceTimer?>(nil)

    /// The time of a use, for ordering pools by their last (the monotonic clock: no memory shared between threads).
    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// The most files the pools' connections keep open (at least 1; the pools in use stay open past it).
    package var limit: Int { state.withLock { $0.limit } }

    /// How many pools hold open connections now.
    package var count: Int { state.withLock { $0.open.count } }

    /// How many files the pools' connections hold open now (as the pools last reported them).
    package var files: Int { state.withLock { $0.files } }

    /// Sets the limit; pools past it hibernate before this returns (those not in use).
    package func setLimit(_ limit: Int) {
        let (victims, held) = state.withLock { s -> ([DatabasePool], [DatabasePool]) in
            s.limit = max(1, limit)
            return Self.victims(&s, sparing: nil)
        }
        _ = consume held
        hibernateNow(victims)
    }

    func isOpen(_ pool: DatabasePool) -> Bool {
        state.withLock { $0.open[ObjectIdentifier(pool)] != nil }
    }

    /// Hibernates the open pools nothing has used for ``idleAfter`` (a pool in use at that moment stays open).
    package func sweepIdle() {
        let idleNanos = UInt64(Self.idleAfter.components.seconds) * 1_000_000_000
        let cutoff = Self.now() &- idleNanos
        // The pools are resolved outside the lock: releasing the last reference to one runs its `close()`, which
        // takes the lock again.
        let entries = state.withLock { s in Array(s.open.values) }
        let idle = entries.compactMap(\.pool).filter { $0.lastUsed.load(ordering: .relaxed) < cutoff && !$0.isCheckpointing }
        var closed = 0
        for pool in idle where pool.hibernate() { closed += 1 }
        stopSweepingIfNothingIsOpen()
        guard closed > 0 else { return }
        hibernated.add(closed, ordering: .relaxed)
        // What the closed connections held (page caches, schemas, statements) goes back to the system: glibc keeps
        // freed memory in its arenas, so a node that opened hundreds of databases stayed at its high-water mark.
        // (At most every few seconds: the trim locks each arena in turn.)
        let now = Self.now()
        if now &- lastTrim.load(ordering: .relaxed) >= 5_000_000_000 {
            lastTrim.store(now, ordering: .relaxed)
            _ = Self.mallocTrim?(0)
        }
    }
    private let lastTrim = Atomic<UInt64>(0)

    #if canImport(Glibc)
    /// glibc's `malloc_trim` (not in the Glibc module's headers), or nil on another C library.
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()
    #else
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = nil
    #endif

    /// With every pool hibernating or closed, the sweep stops (an app embedding the store is not woken twice a second
    /// for nothing); the next pool to open starts it again. (Under the sweep's lock, so an open racing this either
    /// is seen here or finds no timer and starts one.)
    private func stopSweepingIfNothingIsOpen() {
        sweeper.withLock { timer in
            guard state.withLock({ $0.open.isEmpty }) else { return }
            timer?.cancel()
            timer = nil
        }
    }

    /// Whether the idle sweep is running (it runs while a pool holds connections).
    package var isSweeping: Bool { sweeper.withLock { $0 != nil } }

    private func startSweeping() {
        sweeper.withLock { timer in
            guard timer == nil else { return }
            let source = DispatchSource.makeTimerSource(queue: background)
            source.schedule(deadline: .now() + 0.5, repeating: 0.5, leeway: .milliseconds(100))
            source.setEventHandler { [weak self] in self?.sweepIdle() }
            source.resume()
            timer = source
        }
    }

    /// A pool opened or closed a connection: its files count now as ``DatabasePool/openFiles`` says (read under the
    /// lock, so reports racing each other leave the latest count). When they grew past the limit, the least recently
    /// used other pools hibernate before this returns, as CouchDB's server closes an idle database before it opens
    /// one more: so the files stay within the limit however fast databases open (hibernating them in the background
    /// fell behind a burst of opens by a hundred pools). `inline: false` leaves that to the background (for a
    /// caller that must not wait on another pool: the checkpointer).
    func update(_ pool: DatabasePool, inline: Bool = true) {
        let (victims, held, open) = state.withLock { s -> ([DatabasePool], [DatabasePool], Bool) in
            let id = ObjectIdentifier(pool)
            // (A closed pool is out for good: a reader checking in after `close()` took it out must not bring it back.)
            let files = pool.isClosed ? 0 : pool.openFiles
            let before = s.open[id]?.files ?? 0
            s.open[id] = files > 0 ? Entry(pool: pool, files: files, hibernating: s.open[id]?.hibernating ?? false) : nil
            s.files += files - before
            let (victims, held) = files > before ? Self.victims(&s, sparing: id) : ([], [])
            return (victims, held, files > 0)
        }
        // (Released out of the lock: dropping the last reference to a pool runs its `close()`, which takes it.)
        _ = consume held
        if open { startSweeping() }
        if inline { hibernateNow(victims) } else { hibernate(victims) }
    }

    /// A pool closed (or hibernated) all its connections.
    func closed(_ pool: DatabasePool) {
        state.withLock { s in
            if let entry = s.open.removeValue(forKey: ObjectIdentifier(pool)) { s.files -= entry.files }
        }
    }

    /// The least recently used pools whose files bring the open files back under the limit (entries of released
    /// pools dropped). (One pass over the open pools, and only past the limit: with more databases in use than the
    /// limit holds, every open lands here, and sorting them all each time was a tenth of a busy node's time.)
    /// (Also every pool it resolved, for the caller to release out of the lock.)
    private static func victims(_ s: inout State, sparing spared: ObjectIdentifier?) -> (chosen: [DatabasePool], held: [DatabasePool]) {
        guard s.files > s.limit else { return ([], []) }
        var released: [ObjectIdentifier] = []
        var freeing = 0
        var candidates: [(used: UInt64, files: Int, id: ObjectIdentifier, pool: DatabasePool)] = []
        candidates.reserveCapacity(s.open.count)
        for (id, entry) in s.open {
            guard let pool = entry.pool else {
                released.append(id)
                continue
            }
            if entry.hibernating {
                freeing += entry.files
            } else if id != spared && !pool.isCheckpointing {
                candidates.append((pool.lastUsed.load(ordering: .relaxed), entry.files, id, pool))
            }
        }
        for id in released {
            s.files -= s.open[id]?.files ?? 0
            s.open[id] = nil
        }
        var excess = s.files - freeing - s.limit
        let held = candidates.map(\.pool)
        guard excess > 0, !candidates.isEmpty else { return ([], held) }
        var chosen: [(used: UInt64, files: Int, id: ObjectIdentifier, pool: DatabasePool)] = []
        if let oldest = candidates.min(by: { $0.used < $1.used }), oldest.files >= excess {
            chosen = [oldest]
        } else {
            for candidate in candidates.sorted(by: { $0.used < $1.used }) where excess > 0 {
                chosen.append(candidate)
                excess -= candidate.files
            }
        }
        for victim in chosen { s.open[victim.id]?.hibernating = true }
        return (chosen.map(\.pool), held)
    }

    /// A pool chosen to hibernate was busy: it stays open, and may be chosen again.
    private func stayedOpen(_ pool: DatabasePool) {
        state.withLock { $0.open[ObjectIdentifier(pool)]?.hibernating = false }
    }

    private func hibernate(_ pools: [DatabasePool]) {
        guard !pools.isEmpty else { return }
        background.async { [self] in hibernateNow(pools) }
    }

    /// Hibernates the chosen pools on this thread (one that is busy stays open, to be chosen again).
    private func hibernateNow(_ pools: [DatabasePool]) {
        for pool in pools {
            if pool.hibernate() { hibernated.add(1, ordering: .relaxed) } else { stayedOpen(pool) }
        }
    }
}
