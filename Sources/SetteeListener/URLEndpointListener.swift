public import Foundation
import Logging
import ServiceLifecycle
public import Settee
import SetteeServer
import Synchronization

/// How a ``URLEndpointListener`` checks who connects (Couchbase Lite's `ListenerAuthenticator`).
public protocol ListenerAuthenticator: Sendable {}

/// Accepts the peers whose name and password `authenticate` accepts, sent as HTTP basic authentication or through
/// a `_session` cookie (Couchbase Lite's `ListenerPasswordAuthenticator`).
public struct ListenerPasswordAuthenticator: ListenerAuthenticator {
    let authenticate: @Sendable (_ username: String, _ password: String) -> Bool
    /// `ListenerPasswordAuthenticator { user, password in … }` or `ListenerPasswordAuthenticator(authenticator: …)`.
    public init(authenticator: @escaping @Sendable (_ username: String, _ password: String) -> Bool) {
        self.authenticate = authenticator
    }
}

/// Accepts the peers whose TLS client certificate verifies against the CA certificates in a PEM file (Couchbase
/// Lite's `ListenerCertificateAuthenticator(rootCerts:)`): the TLS handshake fails for anyone else, so every
/// request that reaches the listener comes from such a peer. A peer presents its certificate with
/// `ClientCertificateAuthenticator(identity:)`. A self-signed peer identity is its own root: list its certificate.
public struct ListenerCertificateAuthenticator: ListenerAuthenticator {
    public let rootCertificatesPath: String
    public init(rootCertificatesPath: String) {
        self.rootCertificatesPath = rootCertificatesPath
    }

    /// Trusts the certificates of these identities (self-signed peers, or CAs), written to one PEM bundle.
    /// - Throws: ``SetteeError`` `.badRequest` when a certificate file can't be read.
    public init(rootCertificates identities: [TLSIdentity], bundleDirectory: String = NSTemporaryDirectory()) throws {
        var bundle = ""
        for identity in identities {
            do {
                bundle += try String(contentsOfFile: identity.certificatePath, encoding: .utf8)
            } catch {
                throw SetteeError(.badRequest, "Certificate \(identity.certificatePath) can't be read: \(error)")
            }
            if !bundle.hasSuffix("\n") { bundle += "\n" }
        }
        let path = (bundleDirectory as NSString).appendingPathComponent("settee-client-roots-\(UUID().uuidString).pem")
        do {
            try bundle.write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw SetteeError(.badRequest, "The client root bundle \(path) can't be written: \(error)")
        }
        rootCertificatesPath = path
    }
}

extension ClientCertificateAuthenticator {
    /// Presents `identity`'s certificate to a listener that asks for one (Couchbase Lite's
    /// `ClientCertificateAuthenticator(identity:)`).
    public init(identity: TLSIdentity) {
        self.init(certificatePath: identity.certificatePath, keyPath: identity.keyPath)
    }
}

/// What a ``URLEndpointListener`` serves and how (Couchbase Lite's `URLEndpointListenerConfiguration`).
public struct URLEndpointListenerConfiguration: Sendable {
    /// The collections served, all of one database: its default collection at `/{db}`, a named one at its
    /// keyspace `/{db}.{scope}.{collection}` (what a Settee replicator's collection configuration uses).
    public var collections: [SetteeStore.Collection]
    /// The port; nil or 0 takes a free one (read it from ``URLEndpointListener/port`` after ``URLEndpointListener/start()``).
    public var port: UInt16? = URLEndpointListenerConfiguration.defaultPort
    /// The address to listen on (`0.0.0.0`, `::`, `127.0.0.1`, a host name); nil listens on every IPv4 interface.
    public var networkInterface: String?
    /// Serve plain HTTP instead of HTTPS.
    public var disableTLS = URLEndpointListenerConfiguration.defaultDisableTls
    /// The TLS certificate and key; nil with TLS on makes a self-signed one at start (see
    /// ``URLEndpointListener/tlsIdentity``).
    public var tlsIdentity: TLSIdentity?
    /// Who may connect: a ``ListenerPasswordAuthenticator`` or a ``ListenerCertificateAuthenticator``. Without
    /// one, the listener serves loopback peers only (a listener on another interface refuses to start): Settee
    /// never serves databases to the network without authentication.
    public var authenticator: (any ListenerAuthenticator)?
    /// Peers may pull but not push: every write is refused (403) except their `_local` replication checkpoints.
    public var readOnly = URLEndpointListenerConfiguration.defaultReadOnly

    public init(collections: [SetteeStore.Collection]) {
        self.collections = collections
    }

    /// A copy of another configuration (Couchbase Lite's `init(config:)`).
    public init(config: URLEndpointListenerConfiguration) {
        self = config
    }

    /// The default collection of `database` (Couchbase Lite's deprecated `init(database:)`). The database must be
    /// open.
    @available(*, deprecated, message: "Use init(collections:)")
    public init(database: Database) {
        self.init(collections: [try! database.defaultCollection()])
    }

    /// The database of the collections served (Couchbase Lite's deprecated `database`).
    @available(*, deprecated, message: "Use collections")
    public var database: Database { collections[0].database }

    /// Couchbase Lite's defaults: a free port, TLS on, peers may push.
    public static let defaultPort: UInt16 = 0
    public static let defaultDisableTls = false
    public static let defaultReadOnly = false
}

extension URLEndpointListener {
    /// Couchbase Lite's name for ``SetteeListener/ConnectionStatus``.
    public typealias ConnectionStatus = SetteeListener.ConnectionStatus
}

/// A listener's connections (Couchbase Lite's `URLEndpointListener.ConnectionStatus`).
public struct ConnectionStatus: Sendable, Equatable {
    /// Connections open now.
    public let connectionCount: UInt64
    /// Connections serving a request now: a replicator's requests and its open `_changes` feed.
    public let activeConnectionCount: UInt64
}

/// An app's own CouchDB-compatible server, in process (Couchbase Lite's `URLEndpointListener`): two embedded apps
/// replicate by one listening and the other pointing a ``Replicator`` at ``urls``.
///
/// ```swift
/// var config = URLEndpointListenerConfiguration(collections: [try database.defaultCollection()])
/// config.port = 4984
/// config.authenticator = ListenerPasswordAuthenticator { user, password in user == "peer" && password == "secret" }
/// let listener = URLEndpointListener(config: config)
/// try listener.start()
/// print(listener.urls ?? [])   // https://<interface>:4984/<database>
/// ```
/// It is the same server `settee serve` runs (the whole CouchDB API over the served database), started on a
/// private node whose only databases are the one given; it never closes that database.
public final class URLEndpointListener: Sendable {
    public let config: URLEndpointListenerConfiguration
    private let executor = QueueExecutor(label: "settee.listener")
    /// A started server: its service group, the task running it and the signal that it ended.
    private struct Running {
        let group: ServiceGroup
        let task: Task<Void, Never>
        let finished: DispatchSemaphore
    }
    /// What exists while the listener runs.
    private struct State {
        var running: Running?
        var boundPort: Int?
        var identity: TLSIdentity?
        var directory: String?
        var connections: ConnectionCounts?
    }
    private let state = Mutex(State())

    public init(config: URLEndpointListenerConfiguration) {
        self.config = config
    }

    /// The port listened on, while running.
    public var port: UInt16? { state.withLock { $0.boundPort.map { UInt16(clamping: $0) } } }

    /// The connections open now, and those serving a request (zeros while stopped).
    public var status: ConnectionStatus {
        guard let counts = state.withLock({ $0.connections }) else { return ConnectionStatus(connectionCount: 0, activeConnectionCount: 0) }
        return ConnectionStatus(connectionCount: UInt64(max(counts.open, 0)), activeConnectionCount: UInt64(max(counts.active, 0)))
    }

    /// The TLS identity served, while running with TLS (the one given, or the self-signed one made at start).
    public var tlsIdentity: TLSIdentity? { state.withLock { $0.running == nil ? nil : $0.identity } }

    /// The database URLs peers replicate with, while running: one per address of the interface listened on
    /// (`localhost` for every interface).
    public var urls: [URL]? {
        guard let port = state.withLock({ $0.boundPort }), let database = config.collections.first?.database else { return nil }
        let scheme = config.disableTLS ? "http" : "https"
        let interface = config.networkInterface ?? "0.0.0.0"
        let hosts = ["0.0.0.0", "::"].contains(interface) ? ["localhost"] : [interface.contains(":") ? "[\(interface)]" : interface]
        let name = database.name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? database.name
        return hosts.compactMap { URL(string: "\(scheme)://\($0):\(port)/\(name)") }
    }

    /// Starts listening; returns once the port is bound.
    /// - Throws: ``SetteeError`` `.badRequest` for collections of more than one database (or none), a listener
    ///   beyond loopback without an authenticator, an unusable TLS identity; the server's error when the port is
    ///   taken.
    public func start() throws {
        let done = DispatchSemaphore(value: 0)
        let outcome = Outcome()
        // The server's tasks run on the listener's own thread, not Swift's shared pool: this call blocks its
        // caller, which may be one of that pool's few threads.
        Task(executorPreference: executor) {
            do { try await self.run() } catch { outcome.error = error }
            done.signal()
        }
        done.wait()
        if let error = outcome.error { throw error }
    }

    /// Starts the server and waits for its port (``start()`` is Couchbase Lite's synchronous call; an async
    /// overload would be picked in async code and break `try listener.start()` there).
    private func run() async throws {
        guard state.withLock({ $0.running == nil }) else { return }
        let databases = Set(config.collections.map { ObjectIdentifier($0.database) })
        guard databases.count == 1, let database = config.collections.first?.database else {
            throw SetteeError(.badRequest, "A listener serves the collections of exactly one database")
        }
        let directory = NSTemporaryDirectory() + "settee-listener-" + UUID().uuidString
        var server = ServerConfiguration(dataDirectory: directory, host: config.networkInterface ?? "0.0.0.0",
                                         port: Int(config.port ?? 0), fullSync: database.config.fullSync)
        server.createSystemDatabases = false
        if let password = config.authenticator as? ListenerPasswordAuthenticator {
            server.passwordAuthenticator = password.authenticate
            server.requireValidUser = true
        } else if let certificates = config.authenticator as? ListenerCertificateAuthenticator {
            guard !config.disableTLS else {
                throw SetteeError(.badRequest, "A ListenerCertificateAuthenticator needs TLS (disableTLS is set)")
            }
            server.tlsClientRootCertificatesPath = certificates.rootCertificatesPath
        } else if config.authenticator != nil {
            throw SetteeError(.badRequest, "Unsupported listener authenticator \(type(of: config.authenticator!))")
        }
        var identity = config.tlsIdentity
        if !config.disableTLS {
            if identity == nil {
                identity = try TLSIdentity.createIdentity(hosts: config.networkInterface.map { [$0] } ?? [], directory: directory + "/tls")
            }
            server.tlsCertificatePath = identity?.certificatePath
            server.tlsKeyPath = identity?.keyPath
        }
        let node = try Node(configuration: server)
        node.serve(database, readOnly: config.readOnly)
        var logger = Logging.Logger(label: "settee.listener")
        // The server's own connection errors (a peer gone, a stop cutting idle connections) are not the app's
        // concern; start and replication errors reach it as thrown errors and replicator statuses.
        logger.logLevel = .critical
        let bound = PortBox()
        let app = try SetteeServer.application(node: node, logger: logger) { port in bound.set(port) }
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], cancellationSignals: [], logger: logger)
        let finished = DispatchSemaphore(value: 0)
        let task = Task(executorPreference: executor) {
            do { try await group.run() } catch { bound.fail(error) }
            bound.fail(SetteeError(.internalError, "The listener stopped"))
            finished.signal()
        }
        let port = try await bound.wait()
        let connections = node.connections
        state.withLock {
            $0 = State(running: Running(group: group, task: task, finished: finished), boundPort: port, identity: identity,
                       directory: directory, connections: connections)
        }
    }

    /// Stops listening: connections close, replications through them see the peer go away. The database stays
    /// open (it is the app's).
    public func stop() {
        let (running, directory) = state.withLock { state -> (Running?, String?) in
            defer {
                state.running = nil
                state.boundPort = nil
                state.directory = nil
                state.connections = nil
            }
            return (state.running, state.directory)
        }
        if let running {
            // In-flight requests get a second to finish; then the connections are cut (a TLS peer that keeps an
            // idle connection would otherwise hold the close for NIOSSL's 5-second close_notify wait).
            Task(executorPreference: executor) { await running.group.triggerGracefulShutdown() }
            if running.finished.wait(timeout: .now() + 1) == .timedOut {
                running.task.cancel()
                // The node's files go once the server is down.
                if let directory {
                    Task {
                        _ = await running.task.value
                        try? FileManager.default.removeItem(atPath: directory)
                    }
                }
                return
            }
        }
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }

    deinit { stop() }
}

/// The port the server reports once bound, or why it never did.
private final class PortBox: Sendable {
    private let state = Mutex<(result: Swift.Result<Int, any Error>?, waiter: CheckedContinuation<Int, any Error>?)>((nil, nil))

    func set(_ port: Int) { finish(.success(port)) }
    func fail(_ error: any Error) { finish(.failure(error)) }

    private func finish(_ outcome: Swift.Result<Int, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Int, any Error>? in
            guard state.result == nil else { return nil }
            state.result = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: outcome)
    }

    func wait() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Swift.Result<Int, any Error>? in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}

/// An error carried out of the task a synchronous `start()` waits for.
private final class Outcome: Sendable {
    private let stored = Mutex<(any Error)?>(nil)
    var error: (any Error)? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

/// Runs tasks on a serial dispatch queue of its own (a task executor), so a caller blocked in ``URLEndpointListener/start()``
/// or ``URLEndpointListener/stop()`` never waits on Swift's shared thread pool.
final class QueueExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(label: String) { queue = DispatchQueue(label: label) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
