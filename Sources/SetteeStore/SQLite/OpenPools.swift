import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The database pools holding open SQLite connections, and how many may at once — CouchDB's `max_dbs_open`.
///
/// A node with a thousand databases (one per user) would otherwise keep every database it ever touched open: its
/// files (the database, WAL and shared-memory index, per connection) and page caches. When a pool opens past the
/// limit, the least recently used others hibernate (``DatabasePool/hibernate()``) in the background: they close
/// their connections if nothing is using them, and open again on their next read or write, unnoticed by callers.
/// Below the limit too, a pool nothing has used for ``idleAfter`` hibernates (a sweep every half second, stopped
/// while no pool holds connections): an idle database holds no file, no page cache and no parsed schema. (An open one holds up to thirteen files: the
/// database and its WAL per connection — the writer, up to four readers, the checkpointer — and the WAL index.)
package final class OpenPools: Sendable {
    package static let shared = OpenPools()
    /// CouchDB's default `max_dbs_open`.
    package static let defaultLimit = 500

    private struct Entry {
        weak var pool: DatabasePool?
    }
    private struct State {
        var open: [ObjectIdentifier: Entry] = [:]
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

    /// The most pools that keep connections open (at least 1).
    package var limit: Int { state.withLock { $0.limit } }

    /// How many pools hold open connections now.
    package var count: Int { state.withLock { $0.open.count } }

    /// Sets the limit; pools past it hibernate.
    package func setLimit(_ limit: Int) {
        let victims = state.withLock { s -> [DatabasePool] in
            s.limit = max(1, limit)
            return Self.victims(&s, sparing: nil)
        }
        hibernate(victims)
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

    /// A pool opened a connection.
    func opened(_ pool: DatabasePool) {
        let victims = state.withLock { s -> [DatabasePool] in
            let id = ObjectIdentifier(pool)
            guard s.open[id] == nil else { return [] }
            s.open[id] = Entry(pool: pool)
            return Self.victims(&s, sparing: id)
        }
        startSweeping()
        hibernate(victims)
    }

    /// A pool closed (or hibernated) all its connections.
    func closed(_ pool: DatabasePool) {
        _ = state.withLock { $0.open.removeValue(forKey: ObjectIdentifier(pool)) }
    }

    /// The least recently used pools beyond the limit (entries of released pools dropped).
    /// (One pass over the open pools, and only past the limit: with more databases in use than the limit, every
    /// open lands here, and sorting them all each time was a tenth of a busy node's time.)
    private static func victims(_ s: inout State, sparing spared: ObjectIdentifier?) -> [DatabasePool] {
        guard s.open.count > s.limit else { return [] }
        var released: [ObjectIdentifier] = []
        var candidates: [(used: UInt64, pool: DatabasePool)] = []
        candidates.reserveCapacity(s.open.count)
        for (id, entry) in s.open {
            guard let pool = entry.pool else {
                released.append(id)
                continue
            }
            if id != spared { candidates.append((pool.lastUsed.load(ordering: .relaxed), pool)) }
        }
        for id in released { s.open[id] = nil }
        let excess = s.open.count - s.limit
        guard excess > 0 else { return [] }
        if excess == 1 { return candidates.min { $0.used < $1.used }.map { [$0.pool] } ?? [] }
        return candidates.sorted { $0.used < $1.used }.prefix(excess).map(\.pool)
    }

    private func hibernate(_ pools: [DatabasePool]) {
        guard !pools.isEmpty else { return }
        background.async { [self] in
            for pool in pools where pool.hibernate() { hibernated.add(1, ordering: .relaxed) }
        }
    }
}
