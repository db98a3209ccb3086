import Foundation
import Logging
import SetteeCore
import SetteeStore

/// Which way a ``Replicator`` moves changes (Couchbase Lite's `ReplicatorType`).
public enum ReplicatorType: String, Sendable {
    case pushAndPull
    /// Local changes go to the target.
    case push
    /// The target's changes come to the local collection.
    case pull
}

/// A Couchbase Lite-style URL endpoint: a database on a CouchDB-compatible server.
public typealias URLEndpoint = RemoteEndpoint
/// A Couchbase Lite-style database endpoint: another local database (replication without sockets).
public typealias DatabaseEndpoint = LocalEndpoint

/// Basic (user/password) authentication for a ``URLEndpoint``, as in Couchbase Lite.
public struct BasicAuthenticator: Sendable {
    public let username: String
    public let password: String
    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }
}

/// A replicator's configuration (Couchbase Lite's `ReplicatorConfiguration`).
public struct ReplicatorConfiguration: Sendable {
    /// The local collection.
    public var collection: SetteeStore.Collection
    /// The other side: a ``URLEndpoint`` (remote) or a ``DatabaseEndpoint`` (local).
    public var target: any Endpoint
    public var replicatorType: ReplicatorType = .pushAndPull
    /// Keep replicating as changes happen, until stopped.
    public var continuous = false
    /// Only these documents, both ways.
    public var documentIDs: [String]?
    /// Only documents matching this Mango selector, both ways.
    public var selector: JSON?
    /// Resolves conflicts created by pulled revisions; nil keeps conflicts as branches (CouchDB's behaviour).
    public var conflictResolver: (any ConflictResolverProtocol)?
    /// Create the target database when pushing to one that does not exist.
    public var createTarget = false
    /// Changes per batch.
    public var batchSize = 500
    /// Failed attempts before a one-shot replicator stops (continuous replicators retry forever).
    public var maxAttempts = 10
    /// The longest wait between retries.
    public var maxAttemptWaitTime: Duration = .seconds(60)
    /// How often a continuous pull's long poll is renewed, and its heartbeat.
    public var heartbeat: Duration = .seconds(10)
    /// Credentials for a ``URLEndpoint`` target (replaces any in its URL).
    public var authenticator: BasicAuthenticator? {
        didSet {
            guard let auth = authenticator, let remote = target as? RemoteEndpoint,
                  let endpoint = try? RemoteEndpoint(url: remote.url, authentication: .basic(user: auth.username,
                                                                                             password: auth.password),
                                                     headers: remote.headers, client: remote.client,
                                                     trustedRootCertificatesPath: remote.trustedRootCertificatesPath,
                                                     allowInsecureCredentials: remote.allowInsecureCredentials)
            else { return }  // refused (credentials over plain HTTP): `start()` reports it
            target = endpoint
        }
    }
    /// A PEM file of CA certificates that a ``URLEndpoint`` target's HTTPS certificate is verified against, instead
    /// of the system's trust store — for a peer whose certificate comes from a private CA (or is self-signed:
    /// pin it by listing that certificate). Verification stays full (chain, validity, host name); a certificate
    /// that does not verify stops the replicator with a ``ReplicationError/Kind/tls`` error.
    /// Nil keeps the target's own setting.
    public var trustedRootCertificatesPath: String?
    /// Allow sending the credentials (``authenticator``, user info in the URL, or an `Authorization`/`Cookie`
    /// header) to a ``URLEndpoint`` target over plain `http://` when its host is not loopback. Off by default:
    /// the replicator then stops at once with a `.badRequest` error instead of sending them.
    public var allowInsecureCredentials = false

    public init(collection: SetteeStore.Collection, target: any Endpoint) {
        self.collection = collection
        self.target = target
    }

    /// The default collection of `database`.
    public init(database: Database, target: any Endpoint) throws {
        self.init(collection: try database.defaultCollection(), target: target)
    }

    /// The target with ``authenticator``, ``trustedRootCertificatesPath`` and ``allowInsecureCredentials`` applied.
    func resolvedTarget() throws -> any Endpoint {
        guard let remote = target as? RemoteEndpoint,
              authenticator != nil || trustedRootCertificatesPath != nil || allowInsecureCredentials else { return target }
        var authentication = remote.authentication
        if let auth = authenticator { authentication = .basic(user: auth.username, password: auth.password) }
        let caPath = trustedRootCertificatesPath ?? remote.trustedRootCertificatesPath
        return try RemoteEndpoint(url: remote.url, authentication: authentication, headers: remote.headers,
                                  client: trustedRootCertificatesPath == nil ? remote.client : nil,
                                  trustedRootCertificatesPath: caPath,
                                  allowInsecureCredentials: allowInsecureCredentials || remote.allowInsecureCredentials)
    }

    func options(resolver: Bool, reset: Bool) -> ReplicationOptions {
        var o = ReplicationOptions()
        o.continuous = continuous
        o.documentIDs = documentIDs
        o.selector = selector
        o.batchSize = batchSize
        o.maxAttempts = maxAttempts
        o.maxRetryDelay = maxAttemptWaitTime
        o.heartbeat = heartbeat
        o.reset = reset
        if resolver { o.conflictResolver = conflictResolver }
        return o
    }
}

/// A status change delivered to ``Replicator`` listeners.
public struct ReplicatorChange: Sendable {
    public let replicator: Replicator
    public let status: ReplicatorStatus
}

/// Replicates a local collection with a target, in Couchbase Lite's shape:
///
/// ```swift
/// var config = ReplicatorConfiguration(database: db, target: try URLEndpoint(url: "http://peer:5984/db"))
/// config.replicatorType = .pushAndPull
/// config.continuous = true
/// let replicator = Replicator(config: config)
/// let token = replicator.addChangeListener { change in print(change.status.activity) }
/// replicator.start()
/// ```
///
/// Push and pull run concurrently as two ``Replication``s, each with its own checkpoints.
public final class Replicator: @unchecked Sendable {
    public let config: ReplicatorConfiguration
    private let lock = NSLock()
    private var task: Task<Void, Never>?
    private var push: ReplicatorStatus?
    private var pull: ReplicatorStatus?
    private var listeners: [UUID: @Sendable (ReplicatorChange) -> Void] = [:]
    private var streams: [UUID: AsyncStream<ReplicatorStatus>.Continuation] = [:]
    private var stoppedWaiters: [CheckedContinuation<ReplicatorStatus, Never>] = []
    private var running = false

    public init(config: ReplicatorConfiguration) {
        self.config = config
    }

    /// The combined status of both directions.
    public var status: ReplicatorStatus {
        lock.withLock { combined() }
    }

    private func combined() -> ReplicatorStatus {
        var s: ReplicatorStatus
        switch (push, pull) {
        case let (a?, b?): s = ReplicatorStatus.combine(a, b)
        case let (a?, nil): s = a
        case let (nil, b?): s = b
        case (nil, nil): s = ReplicatorStatus()
        }
        if running && s.activity == .stopped { s.activity = .busy }
        return s
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
        push = config.replicatorType != .pull ? ReplicatorStatus() : nil
        pull = config.replicatorType != .push ? ReplicatorStatus() : nil
        lock.unlock()
        let local = LocalEndpoint(collection: config.collection)
        let config = self.config
        let target: any Endpoint
        do {
            target = try config.resolvedTarget()
        } catch {
            var failed = ReplicatorStatus()
            failed.error = error as? ReplicationError ?? ReplicationError(.badRequest, "\(error)")
            lock.withLock {
                if push != nil { push = failed }
                if pull != nil { pull = failed }
            }
            finished()
            return
        }
        let t = Task { [self] in
            await withTaskGroup(of: Void.self) { group in
                if config.replicatorType != .pull {
                    var options = config.options(resolver: false, reset: reset)
                    options.createTarget = config.createTarget
                    let replication = Replication(source: local, target: target, options: options) { s in
                        self.update(push: s)
                    }
                    group.addTask { _ = try? await replication.run() }
                }
                if config.replicatorType != .push {
                    let replication = Replication(source: target, target: local,
                                                  options: config.options(resolver: true, reset: reset)) { s in
                        self.update(pull: s)
                    }
                    group.addTask { _ = try? await replication.run() }
                }
            }
            self.finished()
        }
        lock.withLock { if running { task = t } }
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

    private func update(push: ReplicatorStatus? = nil, pull: ReplicatorStatus? = nil) {
        let (status, listeners, streams) = lock.withLock {
            if let push { self.push = push }
            if let pull { self.pull = pull }
            return (combined(), Array(self.listeners.values), Array(self.streams.values))
        }
        notify(status, listeners, streams)
    }

    private func finished() {
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
