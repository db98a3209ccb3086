public import Foundation
import Logging
import SetteeCore
public import SetteeStore

/// Which way a ``Replicator`` moves changes (Couchbase Lite's `ReplicatorType`).
public enum ReplicatorType: UInt8, Sendable {
    case pushAndPull = 0
    /// Local changes go to the target.
    case push
    /// The target's changes come to the local collection.
    case pull
}

/// A status change delivered to ``Replicator`` listeners.
public struct ReplicatorChange: Sendable {
    public let replicator: Replicator
    public let status: ReplicatorStatus
}

/// Replicates a local collection with a target, in Couchbase Lite's shape:
///
/// ```swift
/// var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "http://peer:5984/db")!))
/// config.addCollection(try db.defaultCollection())
/// config.replicatorType = .pushAndPull
/// config.continuous = true
/// let replicator = Replicator(config: config)
/// let token = replicator.addChangeListener { change in print(change.status.activity) }
/// replicator.start()
/// ```
///
/// Push and pull run concurrently as two ``Replication``s, each with its own checkpoints.
// @unchecked: the task, statuses, listeners, streams and waiters are guarded by `lock`; listeners are called under
// the recursive `notifying` lock (a listener may start or stop the replicator), which a Mutex can't be.
public final class Replicator: @unchecked Sendable {
    /// Couchbase Lite's nested names for the status types.
    public typealias Status = ReplicatorStatus
    public typealias ActivityLevel = ReplicatorActivityLevel
    public typealias Progress = ReplicatorStatus.Progress

    public let config: ReplicatorConfiguration
    private let lock = NSLock()
    /// Held while a status is computed and delivered, so listeners hear statuses in the order they happened.
    private let notifying = NSRecursiveLock()  // recursive: a listener may start or stop the replicator
    private var task: Task<Void, Never>?
    /// The status of each replication running (push and pull per collection), by slot.
    private var statuses: [Int: ReplicatorStatus] = [:]
    private var listeners: [UUID: @Sendable (ReplicatorChange) -> Void] = [:]
    private var documentListeners: [UUID: (queue: DispatchQueue?, listener: @Sendable (DocumentReplication) -> Void)] = [:]
    private var streams: [UUID: AsyncStream<ReplicatorStatus>.Continuation] = [:]
    private var stoppedWaiters: [CheckedContinuation<ReplicatorStatus, Never>] = []
    private var running = false

    public init(config: ReplicatorConfiguration) {
        self.config = config
    }

    /// The combined status of every direction and collection.
    public var status: ReplicatorStatus {
        lock.withLock { combined() }
    }

    private func combined() -> ReplicatorStatus {
        var s = statuses.keys.sorted().compactMap { statuses[$0] }.reduce(nil as ReplicatorStatus?) { acc, next in
            acc.map { ReplicatorStatus.combine($0, next) } ?? next
        } ?? ReplicatorStatus()
        if running && s.activity == .stopped { s.activity = .busy }
        return s
    }

    /// One direction of one collection: where it reads, where it writes, how.
    private struct Leg {
        let slot: Int
        let collection: SetteeStore.Collection
        let isPush: Bool
        let source: any Endpoint
        let target: any Endpoint
        let options: ReplicationOptions
    }

    /// Starts replicating; does nothing if already running.
    /// - Parameter reset: ignore checkpoints and replicate everything again.
    public func start(reset: Bool = false) {
        lock.lock()
        guard !running else {
            lock.unlock()
            return
        }
        running = true
        statuses = [:]
        lock.unlock()
        let legs: [Leg]
        do {
            legs = try self.legs(reset: reset)
        } catch {
            var failed = ReplicatorStatus()
            failed.error = ReplicationError.from(error)
            lock.withLock { statuses = [0: failed] }
            finished()
            return
        }
        lock.withLock { for leg in legs { statuses[leg.slot] = ReplicatorStatus() } }
        let t = Task { [self] in
            await withTaskGroup(of: Void.self) { group in
                for leg in legs {
                    let replication = Replication(source: leg.source, target: leg.target, options: leg.options) { s in
                        self.update(slot: leg.slot, s)
                    }
                    group.addTask { _ = try? await replication.run() }
                }
            }
            // A `ws://` peer's connection serves every leg; it closes once they all stopped.
            for leg in legs {
                (leg.source as? RemoteEndpoint)?.disconnect()
                (leg.target as? RemoteEndpoint)?.disconnect()
            }
            self.finished()
        }
        lock.withLock { if running { task = t } }
    }

    /// The replications `start` runs: for each collection a push and/or a pull, filters and listeners wired in.
    private func legs(reset: Bool) throws -> [Leg] {
        guard !config.collectionConfigs.isEmpty else {
            throw ReplicationError(.badRequest, "The replicator's configuration has no collection")
        }
        let target = try config.resolvedTarget()
        var legs: [Leg] = []
        for (i, entry) in config.collectionConfigs.enumerated() {
            let channels = (entry.config.channels ?? config.channels).flatMap { $0.isEmpty ? nil : $0 }
            let speaksCouchbaseLite = (target as? RemoteEndpoint)?.speaksCouchbaseLiteProtocol == true
            if channels != nil && !speaksCouchbaseLite {
                throw ReplicationError(.badRequest, "Channels are Sync Gateway's; a CouchDB peer has none")
            }
            let local = LocalEndpoint(collection: entry.collection)
            let peer = try ReplicatorConfiguration.endpoint(for: entry.collection, target: target)
            if config.replicatorType != .pull {
                var options = config.options(for: entry.config, pull: false, reset: reset)
                options.createTarget = config.createTarget
                wire(&options, collection: entry.collection, filter: entry.config.pushFilter ?? config.pushFilter, isPush: true)
                legs.append(Leg(slot: 2 * i, collection: entry.collection, isPush: true, source: local, target: peer,
                                options: options))
            }
            if config.replicatorType != .push {
                var options = config.options(for: entry.config, pull: true, reset: reset)
                if let channels {
                    // Couchbase Lite's pull by channels: Sync Gateway's filter, the channels as its parameter.
                    options.filter = BLIPClient.channelFilter
                    options.queryParams = ["channels": channels.joined(separator: ",")]
                }
                wire(&options, collection: entry.collection, filter: entry.config.pullFilter ?? config.pullFilter, isPush: false)
                legs.append(Leg(slot: 2 * i + 1, collection: entry.collection, isPush: false, source: peer, target: local,
                                options: options))
            }
        }
        return legs
    }

    /// Adds the push or pull filter and the document listeners' hook to a leg's options.
    private func wire(_ options: inout ReplicationOptions, collection: SetteeStore.Collection, filter: ReplicationFilter?,
                      isPush: Bool) {
        if let filter {
            options.revisionFilter = { revision in
                let document = Document(id: revision.id, revisionID: revision.rev.description, sequence: 0,
                                        deleted: revision.deleted, properties: revision.body, collection: collection)
                return filter(document, revision.deleted ? .deleted : [])
            }
        }
        options.onDocuments = { [weak self] written, failures in
            self?.reportDocuments(written, failures, collection: collection, isPush: isPush)
        }
        options.onRemoved = { [weak self] ids in
            self?.reportRemoved(ids, collection: collection)
        }
    }

    /// Stops replicating. Writes in flight finish and are checkpointed; the status becomes `stopped`.
    public func stop() {
        lock.withLock { task }?.cancel()
    }

    /// Waits until the replicator stops (a one-shot one finishes, or ``stop()`` takes effect).
    @discardableResult
    public func waitUntilStopped() async -> ReplicatorStatus {
        await withCheckedContinuation { continuation in
            lock.lock()
            if !running {
                let s = combined()
                lock.unlock()
                continuation.resume(returning: s)
            } else {
                stoppedWaiters.append(continuation)
                lock.unlock()
            }
        }
    }

    /// Calls `listener` after every status change, on `queue` (Couchbase Lite's `addChangeListener(withQueue:_:)`).
    @discardableResult
    public func addChangeListener(withQueue queue: DispatchQueue?,
                                  _ listener: @escaping @Sendable (ReplicatorChange) -> Void) -> ListenerToken {
        guard let queue else { return addChangeListener(listener) }
        return addChangeListener { change in queue.async { listener(change) } }
    }

    /// Stops a listener (the same as `token.remove()`).
    public func removeChangeListener(withToken token: ListenerToken) { token.remove() }

    /// Calls `listener` after every status change (on an arbitrary thread).
    @discardableResult
    public func addChangeListener(_ listener: @escaping @Sendable (ReplicatorChange) -> Void) -> ListenerToken {
        let key = UUID()
        lock.withLock { listeners[key] = listener }
        return ListenerToken { [weak self] in
            guard let self else { return }
            self.lock.withLock { self.listeners[key] = nil }
        }
    }

    func addDocumentListener(queue: DispatchQueue?, _ listener: @escaping @Sendable (DocumentReplication) -> Void) -> ListenerToken {
        let key = UUID()
        lock.withLock { documentListeners[key] = (queue, listener) }
        return ListenerToken { [weak self] in
            guard let self else { return }
            self.lock.withLock { self.documentListeners[key] = nil }
        }
    }

    /// Tells the document listeners about a written batch.
    func reportDocuments(_ written: [ReplicatedRevision], _ failures: [DocumentFailure], collection: SetteeStore.Collection,
                         isPush: Bool) {
        let listeners = lock.withLock { Array(documentListeners.values) }
        guard !listeners.isEmpty else { return }
        var documents = written.map {
            ReplicatedDocument(id: $0.id, flags: $0.deleted ? .deleted : [], error: nil, scope: collection.scopeName,
                               collection: collection.name)
        }
        documents += failures.map {
            ReplicatedDocument(id: $0.id, flags: [], error: ReplicationError.document($0), scope: collection.scopeName,
                               collection: collection.name)
        }
        let replication = DocumentReplication(replicator: self, isPush: isPush, documents: documents)
        for (queue, listener) in listeners {
            if let queue { queue.async { listener(replication) } } else { listener(replication) }
        }
    }

    /// Tells the document listeners of pulled documents the user lost access to (``DocumentFlags/accessRemoved``).
    func reportRemoved(_ ids: [String], collection: SetteeStore.Collection) {
        let listeners = lock.withLock { Array(documentListeners.values) }
        guard !listeners.isEmpty else { return }
        let documents = ids.map {
            ReplicatedDocument(id: $0, flags: .accessRemoved, error: nil, scope: collection.scopeName, collection: collection.name)
        }
        let replication = DocumentReplication(replicator: self, isPush: false, documents: documents)
        for (queue, listener) in listeners {
            if let queue { queue.async { listener(replication) } } else { listener(replication) }
        }
    }

    /// Status changes as an async sequence (the newest status if the consumer falls behind); it ends when the
    /// replicator stops.
    public func statusUpdates() -> AsyncStream<ReplicatorStatus> {
        let (stream, continuation) = AsyncStream<ReplicatorStatus>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let key = UUID()
        lock.withLock { streams[key] = continuation }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.lock.withLock { self.streams[key] = nil }
        }
        return stream
    }

    private func update(slot: Int, _ status: ReplicatorStatus) {
        notifying.lock()
        defer { notifying.unlock() }
        let (status, listeners, streams) = lock.withLock {
            statuses[slot] = status
            return (combined(), Array(self.listeners.values), Array(self.streams.values))
        }
        notify(status, listeners, streams)
    }

    private func finished() {
        notifying.lock()
        defer { notifying.unlock() }
        let (status, listeners, streams, waiters) = lock.withLock {
            running = false
            task = nil
            let w = stoppedWaiters
            stoppedWaiters = []
            var s = combined()
            s.activity = .stopped
            return (s, Array(self.listeners.values), Array(self.streams.values), w)
        }
        notify(status, listeners, streams)
        for s in streams { s.finish() }
        for w in waiters { w.resume(returning: status) }
    }

    private func notify(_ status: ReplicatorStatus, _ listeners: [@Sendable (ReplicatorChange) -> Void],
                        _ streams: [AsyncStream<ReplicatorStatus>.Continuation]) {
        let change = ReplicatorChange(replicator: self, status: status)
        for l in listeners { l(change) }
        for s in streams { s.yield(status) }
    }
}
