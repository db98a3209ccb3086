import Foundation
import Logging
import Synchronization
import SetteeCore
import SetteeReplication
import SetteeStore

/// Keeps every database of this node in step with the same-named database on one `--peer`, at any number of
/// databases, with a bounded number of connections and tasks.
///
/// Nothing runs per database while it is idle. Two feeds say which databases changed — this node's own database
/// events (what `GET /_db_updates` serves) for pushes, and a long poll of the peer's `GET /_db_updates` for pulls —
/// and each change queues a one-shot replication of that database in that direction. A few workers
/// (``concurrency``) run the queue; a one-shot replication starts from its checkpoint, so it moves only what
/// changed. A database that changes again while its replication runs is queued once more when it ends; one that
/// fails is retried after a growing delay. (The alternative, CouchDB's continuous replication per database, holds
/// a long poll per database and direction: 2,000 requests for a thousand databases, more than a connection pool
/// serves, and none of them finishes.)
///
/// Every ``ServerConfiguration/peerScanInterval`` the node also compares the two database lists (creating here
/// what the peer has, queueing both directions for databases new on either side), and at least every five minutes
/// it queues every database in both directions, so that nothing a feed missed stays missed. After each replication
/// the database's `_security` object is merged with the peer's (``syncSecurity(_:_:)``). A peer without
/// `_db_updates` (a server without the feed) is polled instead: every database is pulled at each scan, and the
/// feed is tried again every minute. The peer URL's user must be a server admin there (`_db_updates` and
/// `_all_dbs` are admin-only). Databases whose name starts with `_` are not replicated; deleting a database is not
/// propagated.
final class PeerSync: Sendable {
    enum Direction: String, Sendable { case push, pull }

    struct Work: Hashable, Sendable {
        var database: String
        var direction: Direction
    }

    /// One-shot replications that run at once per peer.
    static let concurrency = 4
    /// The peer's `_db_updates` long poll: below the replicator's 30 s read timeout.
    static let feedTimeout: Duration = .seconds(20)
    /// How long a peer whose `_db_updates` refused this node is polled before the feed is tried again.
    static let feedRetryInterval: Duration = .seconds(60)
    /// How often every database is replicated in both directions regardless of the feeds.
    static let fullSweepInterval: Duration = .seconds(300)

    private struct State {
        /// Queued work, oldest first, and the same as a set.
        var queue: [Work] = []
        var queued: Set<Work> = []
        var running: Set<Work> = []
        /// Changed again while running: queued again when the run ends.
        var again: Set<Work> = []
        /// Failed work: consecutive failures, and when it may run again.
        var failures: [Work: (count: Int, notBefore: ContinuousClock.Instant)] = [:]
        /// The peer's databases as last listed.
        var remoteDatabases: Set<String> = []
        /// Whether the peer's `_db_updates` serves us; when not, pulls are polled.
        var remoteFeed = true
        /// The last problem logged (logged once, not at every scan).
        var problem: String?
    }

    let peer: String
    private let root: String
    private unowned let manager: ReplicationManager
    private let state = Mutex(State())
    private let logger: Logger

    init(peer: String, manager: ReplicationManager) {
        self.peer = peer
        self.root = peer.hasSuffix("/") ? String(peer.dropLast()) : peer
        self.manager = manager
        self.logger = manager.logger
    }

    var node: Node { manager.node }

    /// Runs until cancelled.
    func run() async {
        let probe: RemoteEndpoint
        do {
            probe = try RemoteEndpoint(url: root + "/_probe", trustedRootCertificatesPath: node.configuration.caFile,
                                       allowInsecureCredentials: node.configuration.allowInsecureCredentials)
        } catch {
            report("\((error as? ReplicationError)?.message ?? "\(error)")")
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.followLocal() }
            group.addTask { await self.followRemote(probe) }
            group.addTask { await self.scan(probe) }
            for _ in 0..<Self.concurrency {
                group.addTask { await self.work(probe) }
            }
        }
    }

    // MARK: The queue

    /// Queues work (once; work running now runs again when it ends).
    func enqueue(_ items: some Sequence<Work>) {
        state.withLock { s in
            for work in items where !work.database.hasPrefix("_") {
                if s.running.contains(work) {
                    s.again.insert(work)
                } else if s.queued.insert(work).inserted {
                    s.queue.append(work)
                }
            }
        }
    }

    /// The oldest queued work that may run now (not running, not waiting out a failure), taken off the queue.
    private func take() -> Work? {
        state.withLock { s in
            let now = ContinuousClock.now
            guard let index = s.queue.firstIndex(where: { work in
                !s.running.contains(work) && (s.failures[work].map { $0.notBefore <= now } ?? true)
            }) else { return nil }
            let work = s.queue.remove(at: index)
            s.queued.remove(work)
            s.running.insert(work)
            return work
        }
    }

    private func finished(_ work: Work, ok: Bool, retry: Bool) {
        state.withLock { s in
            s.running.remove(work)
            if ok || !retry {
                s.failures[work] = nil
            } else {
                let count = (s.failures[work]?.count ?? 0) + 1
                let delay = Duration.milliseconds(min(500 << min(count, 7), 60_000))
                s.failures[work] = (count, .now + delay)
            }
            if s.again.remove(work) != nil || (!ok && retry), s.queued.insert(work).inserted {
                s.queue.append(work)
            }
        }
    }

    /// How much work is queued and running (for tests and `_active_tasks`' callers).
    var backlog: (queued: Int, running: Int) { state.withLock { ($0.queue.count, $0.running.count) } }

    // MARK: Workers

    /// Runs queued work, one replication at a time; idle, it looks at the queue every 50 ms.
    private func work(_ probe: RemoteEndpoint) async {
        while !Task.isCancelled {
            guard let work = take() else {
                try? await Task.sleep(for: .milliseconds(50))
                continue
            }
            let (ok, retry) = await replicate(work, probe)
            finished(work, ok: ok, retry: retry)
        }
    }

    /// One one-shot replication; whether it succeeded and, if not, whether to try again later.
    private func replicate(_ work: Work, _ probe: RemoteEndpoint) async -> (ok: Bool, retry: Bool) {
        guard let remote = try? probe.sibling(database: work.database) else { return (false, false) }
        let db: Database, collection: SetteeStore.Collection
        do {
            db = try node.database(work.database)
            collection = try db.defaultCollection()
        } catch {
            return (false, false)  // deleted here since
        }
        // The node's peers replicate as a server admin; the database's write rules (``WriteRules``) apply.
        var local = LocalEndpoint(collection: collection)
        local.writeContext = .serverAdmin
        let spec = ReplicationManager.Spec(source: .string(work.database), target: .string(remote.urlString),
                                           continuous: false, createTarget: work.direction == .push)
        var options = manager.options(spec)
        options.createTarget = work.direction == .push
        // The queue retries with its own delays; a replication gives up at its second failed attempt.
        options.maxAttempts = 2
        let replication = work.direction == .push
            ? Replication(source: local, target: remote, options: options, logger: logger)
            : Replication(source: remote, target: local, options: options, logger: logger)
        do {
            _ = try await manager.runTracked(replication, id: replication.replicationID + "+peer", spec: spec)
            do {
                try await syncSecurity(db, remote)
            } catch {
                // The documents moved; the next replication of this database (its next event, or the sweep) tries again.
                report("\(work.database): cannot merge _security with the peer's: \((error as? ReplicationError)?.message ?? "\(error)")")
            }
            return (true, false)
        } catch let e as ReplicationError {
            switch e.kind {
            case .cancelled: return (false, false)
            case .notFound where work.direction == .pull: return (false, false)  // deleted on the peer
            default:
                report("\(work.direction.rawValue) \(work.database): \(e.message)")
                return (false, true)
            }
        } catch {
            report("\(work.direction.rawValue) \(work.database): \(error)")
            return (false, true)
        }
    }

    // MARK: Feeds

    /// This node's database events: a database written (or created) here is pushed.
    private func followLocal() async {
        let updates = node.databaseUpdates
        var since = updates.lastSeq
        enqueue(localDatabases().map { Work(database: $0, direction: .push) })
        while !Task.isCancelled {
            await updates.wait(since: since, timeout: .seconds(60))
            let events = updates.events(since: since)
            since = events.last?.seq ?? since
            enqueue(events.filter { $0.kind != .deleted }.map { Work(database: $0.database, direction: .push) })
        }
    }

    /// The peer's database events: a database written (or created) there is pulled. Starting (and after any gap:
    /// the peer unreachable, restarted), every database is pulled once.
    private func followRemote(_ probe: RemoteEndpoint) async {
        var since: JSON?
        var failures = 0
        while !Task.isCancelled {
            do {
                guard let from = since else {
                    // The end of the feed first, then everything: nothing written in between is missed.
                    let end = try await probe.databaseUpdates(since: "now").lastSeq
                    state.withLock { $0.remoteFeed = true }
                    do {
                        try await pullEverything(probe)
                    } catch {
                        // The feed works but the list doesn't (yet): the scan reports it; try again shortly.
                        failures += 1
                        try? await Task.sleep(for: .milliseconds(min(500 << min(failures, 6), 30_000)))
                        continue
                    }
                    since = end
                    failures = 0
                    continue
                }
                let batch = try await probe.databaseUpdates(since: from, timeout: Self.feedTimeout)
                failures = 0
                if Self.sequenceNumber(batch.lastSeq) < Self.sequenceNumber(from) {
                    since = nil  // the peer restarted: its feed began again
                    continue
                }
                for (name, kind) in batch.events where kind != .deleted && !name.hasPrefix("_") {
                    // (Also for an update: its creation may have come while the feed was down.)
                    createLocally(name)
                    enqueue([Work(database: name, direction: .pull)])
                }
                since = batch.lastSeq
            } catch let e as ReplicationError where [.unauthorized, .forbidden, .notFound, .badRequest, .unsupported].contains(e.kind) {
                // No feed for us: the scan polls every database instead.
                let first = state.withLock { s in
                    defer { s.remoteFeed = false }
                    return s.remoteFeed
                }
                if first {
                    logger.notice("peer \(RemoteEndpoint.redact(peer)): no _db_updates feed (\(e.message)); polling its databases every scan instead")
                }
                // Asked again now and then (a password being changed, a proxy answering before the peer is up).
                since = nil
                try? await Task.sleep(for: Self.feedRetryInterval)
            } catch {
                if Task.isCancelled { return }
                since = nil
                failures += 1
                try? await Task.sleep(for: .milliseconds(min(500 << min(failures, 6), 30_000)))
            }
        }
    }

    /// Lists the peer's databases, creates here the ones missing, and queues a pull of each.
    private func pullEverything(_ probe: RemoteEndpoint) async throws {
        let names = try await probe.allDatabases().filter { !$0.hasPrefix("_") }
        state.withLock { $0.remoteDatabases = Set(names) }
        for name in names { createLocally(name) }
        enqueue(names.map { Work(database: $0, direction: .pull) })
    }

    /// Every scan interval: databases new on either side are queued both ways (and the peer's created here);
    /// without a feed from the peer, every database is pulled; every ``fullSweepInterval`` everything is queued.
    private func scan(_ probe: RemoteEndpoint) async {
        var lastFullSweep = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: node.configuration.peerScanInterval)
            if Task.isCancelled { return }
            do {
                let remote = Set(try await probe.allDatabases().filter { !$0.hasPrefix("_") })
                let local = Set(localDatabases())
                let (known, feed) = state.withLock { s -> (Set<String>, Bool) in
                    defer { s.remoteDatabases = remote }
                    return (s.remoteDatabases, s.remoteFeed)
                }
                for name in remote.subtracting(local) { createLocally(name) }
                let full = ContinuousClock.now - lastFullSweep >= Self.fullSweepInterval
                if full { lastFullSweep = .now }
                let newOnPeer = feed && !full ? remote.subtracting(known) : remote
                enqueue(newOnPeer.sorted().map { Work(database: $0, direction: .pull) })
                let push = full ? local : local.subtracting(remote)
                enqueue(push.sorted().map { Work(database: $0, direction: .push) })
                state.withLock { $0.problem = nil }
            } catch {
                report("cannot list its databases (\((error as? ReplicationError)?.message ?? "\(error)")); is it the server's root URL?")
            }
        }
    }

    // MARK: Helpers

    private func localDatabases() -> [String] {
        node.databaseNames().filter { !$0.hasPrefix("_") }
    }

    private func createLocally(_ name: String) {
        guard !name.hasPrefix("_"), !Database.exists(name: name, inDirectory: node.configuration.dataDirectory) else { return }
        do {
            try node.createDatabase(name)
        } catch let error as SetteeError where error.code == .fileExists {
            return  // made meanwhile (by a request or the other direction)
        } catch {
            logger.warning("peer \(RemoteEndpoint.redact(peer)): cannot create \(name) here: \(error)")
        }
    }

    /// The number a sequence starts with (CouchDB's opaque `"N-…"`, Settee's, or a plain integer); 0 if none.
    static func sequenceNumber(_ seq: JSON) -> Int64 {
        if let n = seq.intValue { return n }
        guard let text = seq.stringValue else { return 0 }
        return Int64(text.prefix { $0.isASCII && $0.isNumber }) ?? 0
    }

    /// Logs a problem once (until another, or a scan that works).
    private func report(_ problem: String) {
        let fresh = state.withLock { s in
            defer { s.problem = problem }
            return s.problem != problem
        }
        if fresh { logger.error("peer \(RemoteEndpoint.redact(peer)): \(problem)") }
    }
}
