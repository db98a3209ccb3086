public import Foundation
public import SetteeCore
public import SetteeStore

/// A Couchbase Lite-style URL endpoint: a database on a CouchDB-compatible server.
public typealias URLEndpoint = RemoteEndpoint
/// A Couchbase Lite-style database endpoint: another local database (replication without sockets).
public typealias DatabaseEndpoint = LocalEndpoint

extension RemoteEndpoint {
    /// Couchbase Lite's `URLEndpoint(url:)`: the database at `url`. A `ws://` or `wss://` URL speaks Couchbase Lite's
    /// replication protocol (BLIP over a WebSocket at `{url}/_blipsync`, as Sync Gateway and `settee serve` serve
    /// it); an `http://` or `https://` URL speaks CouchDB's (Settee, CouchDB, PouchDB Server). A URL that is not a
    /// database URL stops the program, as Couchbase Lite's invalid-URL exception does.
    public init(url: URL) {
        let text = url.absoluteString
        do {
            self = try RemoteEndpoint(url: text, allowInsecureCredentials: true)
        } catch {
            preconditionFailure("Invalid URLEndpoint URL \(RemoteEndpoint.redact(text)): \(error)")
        }
    }
}

/// How a replicator authenticates to a ``URLEndpoint`` (Couchbase Lite's `Authenticator`).
public protocol Authenticator: Sendable {}

/// A session cookie got from the peer beforehand (Couchbase Lite's `SessionAuthenticator`). Couchbase Lite's
/// default cookie is Sync Gateway's, `SyncGatewaySession`; a CouchDB or Settee peer's `_session` cookie is
/// `AuthSession`.
public struct SessionAuthenticator: Authenticator {
    public let sessionID: String
    public let cookieName: String
    public init(sessionID: String, cookieName: String? = nil) {
        self.sessionID = sessionID
        self.cookieName = cookieName ?? "SyncGatewaySession"
    }
}

/// A client certificate a ``URLEndpoint``'s HTTPS peer verifies, as a listener with a certificate authenticator
/// asks (Couchbase Lite's `ClientCertificateAuthenticator`; `import SetteeListener` adds `init(identity:)`).
public struct ClientCertificateAuthenticator: Authenticator {
    public let certificate: ClientCertificate
    /// The PEM certificate (chain) and private key files to present.
    public init(certificatePath: String, keyPath: String) {
        certificate = ClientCertificate(certificatePath: certificatePath, keyPath: keyPath)
    }
}

/// Basic (user/password) authentication for a ``URLEndpoint``, as in Couchbase Lite.
public struct BasicAuthenticator: Authenticator {
    public let username: String
    public let password: String
    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }
}

/// What a replicated document's flags say (Couchbase Lite's `DocumentFlags`).
public struct DocumentFlags: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// The revision is a deletion.
    public static let deleted = DocumentFlags(rawValue: 1)
    /// The user lost access to the document (Sync Gateway's channels; never set by CouchDB peers).
    public static let accessRemoved = DocumentFlags(rawValue: 2)
}

/// A push or pull filter (Couchbase Lite's `ReplicationFilter`): true replicates the revision.
public typealias ReplicationFilter = @Sendable (Document, DocumentFlags) -> Bool

/// How one collection replicates (Couchbase Lite's `CollectionConfiguration`).
public struct CollectionConfiguration: Sendable {
    /// Only these documents, both ways.
    public var documentIDs: [String]?
    /// Sync Gateway's channels. CouchDB peers have none: a non-empty list makes the replicator stop with a
    /// `.badRequest` error rather than replicate everything.
    public var channels: [String]?
    /// Local revisions this returns false for are not pushed.
    public var pushFilter: ReplicationFilter?
    /// Pulled revisions this returns false for are not stored.
    public var pullFilter: ReplicationFilter?
    /// Resolves conflicts pulled revisions create (nil: the replicator's, else the default resolver).
    public var conflictResolver: (any ConflictResolverProtocol)?

    public init() {}
}

/// A replicator's configuration (Couchbase Lite's `ReplicatorConfiguration`).
///
/// ```swift
/// var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "http://peer:5984/app")!))
/// config.addCollection(try database.defaultCollection())
/// config.addCollections([users, orders], config: CollectionConfiguration())
/// config.replicatorType = .pushAndPull
/// config.continuous = true
/// ```
/// A named collection replicates with the peer's collection of the same scope and name: on a Settee peer its
/// keyspace `/{db}.{scope}.{collection}`, in a ``DatabaseEndpoint``'s database the collection itself (made
/// if missing). The default collection replicates with the target database as CouchDB sees it.
public struct ReplicatorConfiguration: Sendable {
    /// The collections and how each replicates, in the order added.
    public private(set) var collectionConfigs: [(collection: SetteeStore.Collection, config: CollectionConfiguration)] = []
    /// The other side: a ``URLEndpoint`` (remote) or a ``DatabaseEndpoint`` (local).
    public var target: any Endpoint
    public var replicatorType: ReplicatorType = ReplicatorConfiguration.defaultType
    /// Keep replicating as changes happen, until stopped. Changing it also changes ``maxAttempts`` to that mode's
    /// default unless ``maxAttempts`` was set (as Couchbase Lite does).
    public var continuous = ReplicatorConfiguration.defaultContinuous {
        willSet {
            if !maxAttemptsWasSet {
                maxAttemptsValue = newValue ? Self.defaultMaxAttemptsContinuous : Self.defaultMaxAttemptsSingleShot
            }
        }
    }
    /// Only these documents, both ways, for collections whose configuration names none.
    public var documentIDs: [String]?
    /// Only documents matching this Mango selector, both ways (Settee's).
    public var selector: JSON?
    /// Resolves conflicts created by pulled revisions, for collections whose configuration has none; nil keeps
    /// conflicts as branches (CouchDB's behaviour).
    public var conflictResolver: (any ConflictResolverProtocol)?
    /// Create the target database when pushing to one that does not exist.
    public var createTarget = false
    /// Changes per batch.
    public var batchSize = 500
    /// Attempts (the first one included) before the replicator stops with its error: by default
    /// ``defaultMaxAttemptsSingleShot``, or ``defaultMaxAttemptsContinuous`` (forever) for a continuous one; 0
    /// means that default, 1 no retry.
    public var maxAttempts: UInt {
        get { maxAttemptsValue }
        set {
            maxAttemptsValue = newValue
            maxAttemptsWasSet = true
        }
    }
    private var maxAttemptsValue = ReplicatorConfiguration.defaultMaxAttemptsSingleShot
    private var maxAttemptsWasSet = false
    /// The longest wait between retries, in seconds (0: the default).
    public var maxAttemptWaitTime: TimeInterval = ReplicatorConfiguration.defaultMaxAttemptWaitTime
    /// How often a continuous pull's long poll is renewed, and its heartbeat, in seconds (0: the default).
    public var heartbeat: TimeInterval = ReplicatorConfiguration.defaultHeartbeat
    /// Extra HTTP headers sent with every request to a ``URLEndpoint`` target (Couchbase Lite's `headers`).
    public var headers: [String: String]?
    /// A push filter for collections whose ``CollectionConfiguration`` has none (Couchbase Lite's deprecated
    /// top-level `pushFilter`).
    public var pushFilter: ReplicationFilter?
    /// A pull filter for collections whose ``CollectionConfiguration`` has none (Couchbase Lite's deprecated
    /// top-level `pullFilter`).
    public var pullFilter: ReplicationFilter?
    /// Sync Gateway's channels for collections whose configuration names none (Couchbase Lite's deprecated
    /// top-level `channels`); as there, a non-empty list stops the replicator against a CouchDB peer.
    public var channels: [String]?
    /// Credentials for a ``URLEndpoint`` target: a ``BasicAuthenticator`` (replaces any user in its URL) or a
    /// ``SessionAuthenticator`` (its cookie is sent with every request). Credentials over plain HTTP to a host
    /// that is not loopback stop the replicator at `start()` unless ``allowInsecureCredentials`` is set.
    public var authenticator: (any Authenticator)?
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
    /// Purge the local copy of a document the user lost access to on the server (Sync Gateway's channels: the
    /// document left the user's channels, or the user lost the channel), as Couchbase Lite's `enableAutoPurge`
    /// does; document listeners see it with ``DocumentFlags/accessRemoved`` either way. On by default.
    public var enableAutoPurge = true

    /// Whether conflicts are resolved with ``ConflictResolver/couchbaseLite`` when no resolver is set (Couchbase
    /// Lite's behaviour, for configurations made with ``init(target:)``) rather than kept as branches (CouchDB's).
    var resolvesConflictsByDefault = false

    /// A configuration with no collections yet, in Couchbase Lite's shape: add them with
    /// ``addCollection(_:config:)``. Conflicts a pull creates are resolved as Couchbase Lite does when no
    /// resolver is set (``ConflictResolver/couchbaseLite``).
    public init(target: any Endpoint) {
        self.target = target
        resolvesConflictsByDefault = true
    }

    /// One collection, replicated with the target as configured by the top-level options.
    public init(collection: SetteeStore.Collection, target: any Endpoint) {
        self.target = target
        addCollection(collection)
    }

    /// The default collection of `database` (Couchbase Lite's pre-collections form). The database must be open.
    public init(database: Database, target: any Endpoint) {
        self.init(collection: LocalEndpoint(database: database).collection, target: target)
    }

    /// A copy of `config` (Couchbase Lite's `init(config:)`).
    public init(config: ReplicatorConfiguration) {
        self = config
    }

    /// The database of the collections replicated (Couchbase Lite's deprecated `database`). The configuration must
    /// have a collection.
    @available(*, deprecated, message: "Use collections")
    public var database: Database { collection.database }

    /// The collections to replicate.
    public var collections: [SetteeStore.Collection] { collectionConfigs.map(\.collection) }

    /// The first collection (Settee's single-collection form).
    public var collection: SetteeStore.Collection { collectionConfigs[0].collection }

    /// Adds a collection (or replaces its configuration). Returns the configuration, as Couchbase Lite does.
    @discardableResult
    public mutating func addCollection(_ collection: SetteeStore.Collection,
                                       config: CollectionConfiguration? = nil) -> ReplicatorConfiguration {
        let config = config ?? CollectionConfiguration()
        if let i = collectionConfigs.firstIndex(where: { $0.collection == collection }) {
            collectionConfigs[i].config = config
        } else {
            collectionConfigs.append((collection, config))
        }
        return self
    }

    /// Adds collections, each with `config`.
    @discardableResult
    public mutating func addCollections(_ collections: [SetteeStore.Collection],
                                        config: CollectionConfiguration? = nil) -> ReplicatorConfiguration {
        for c in collections { addCollection(c, config: config) }
        return self
    }

    /// Stops replicating a collection.
    @discardableResult
    public mutating func removeCollection(_ collection: SetteeStore.Collection) -> ReplicatorConfiguration {
        collectionConfigs.removeAll { $0.collection == collection }
        return self
    }

    /// A collection's configuration, or nil when it is not replicated.
    public func collectionConfig(_ collection: SetteeStore.Collection) -> CollectionConfiguration? {
        collectionConfigs.first { $0.collection == collection }?.config
    }

    /// The target with ``authenticator``, ``trustedRootCertificatesPath`` and ``allowInsecureCredentials`` applied.
    func resolvedTarget() throws -> any Endpoint {
        guard let remote = target as? RemoteEndpoint,
              authenticator != nil || trustedRootCertificatesPath != nil || allowInsecureCredentials
                || !(self.headers ?? [:]).isEmpty else { return target }
        var authentication = remote.authentication
        var headers = remote.headers
        var clientCertificate = remote.clientCertificate
        for (name, value) in (self.headers ?? [:]).sorted(by: { $0.key < $1.key }) {
            headers.removeAll { $0.0.lowercased() == name.lowercased() }
            headers.append((name, value))
        }
        switch authenticator {
        case let basic as BasicAuthenticator:
            authentication = .basic(user: basic.username, password: basic.password)
        case let session as SessionAuthenticator:
            headers.removeAll { $0.0.lowercased() == "cookie" }
            headers.append(("Cookie", "\(session.cookieName)=\(session.sessionID)"))
        case let certificate as ClientCertificateAuthenticator:
            clientCertificate = certificate.certificate
        case nil:
            break
        case let other?:
            throw ReplicationError(.badRequest, "Unsupported authenticator \(type(of: other))")
        }
        let caPath = trustedRootCertificatesPath ?? remote.trustedRootCertificatesPath
        let sameTLS = trustedRootCertificatesPath == nil && clientCertificate == remote.clientCertificate
        return try RemoteEndpoint(url: remote.urlString, authentication: authentication, headers: headers,
                                  client: sameTLS ? remote.client : nil,
                                  trustedRootCertificatesPath: caPath,
                                  allowInsecureCredentials: allowInsecureCredentials || remote.allowInsecureCredentials,
                                  clientCertificate: clientCertificate)
    }

    /// The peer `collection` replicates with: the target itself for the default collection; for a named one, the
    /// keyspace of a remote target, or the same-named collection of a local target's database.
    static func endpoint(for collection: SetteeStore.Collection, target: any Endpoint) throws -> any Endpoint {
        let isDefault = collection.scopeName == Scope.defaultScopeName && collection.name == Collection.defaultCollectionName
        if isDefault { return target }
        switch target {
        case let remote as RemoteEndpoint where remote.speaksCouchbaseLiteProtocol:
            // Couchbase Lite's protocol names the collection on the database's connection (`getCollections`).
            return try remote.forCollection(scope: collection.scopeName, name: collection.name)
        case let remote as RemoteEndpoint:
            let keyspace = collection.scopeName == Scope.defaultScopeName ? collection.name : collection.fullName
            return try RemoteEndpoint(url: remote.urlString + "." + keyspace, authentication: remote.authentication,
                                      headers: remote.headers, client: remote.client,
                                      trustedRootCertificatesPath: remote.trustedRootCertificatesPath,
                                      allowInsecureCredentials: remote.allowInsecureCredentials,
                                      clientCertificate: remote.clientCertificate)
        case let local as LocalEndpoint:
            let peer = try local.collection.database.createCollection(name: collection.name, scope: collection.scopeName)
            return LocalEndpoint(collection: peer)
        default:
            return target
        }
    }

    func options(for config: CollectionConfiguration, pull: Bool, reset: Bool) -> ReplicationOptions {
        var o = ReplicationOptions()
        o.continuous = continuous
        o.documentIDs = config.documentIDs ?? documentIDs
        o.selector = selector
        o.batchSize = batchSize
        let attempts = maxAttempts == 0
            ? (continuous ? Self.defaultMaxAttemptsContinuous : Self.defaultMaxAttemptsSingleShot) : maxAttempts
        o.maxAttempts = Int(clamping: attempts)
        o.continuousMaxAttempts = attempts == .max ? .max : Int(clamping: attempts)
        let wait = maxAttemptWaitTime > 0 ? maxAttemptWaitTime : Self.defaultMaxAttemptWaitTime
        o.maxRetryDelay = .milliseconds(Int64(wait * 1000))
        o.heartbeat = .milliseconds(Int64((heartbeat > 0 ? heartbeat : Self.defaultHeartbeat) * 1000))
        o.reset = reset
        o.autoPurge = enableAutoPurge
        if pull {
            o.conflictResolver = config.conflictResolver ?? conflictResolver
                ?? (resolvesConflictsByDefault ? ConflictResolver.couchbaseLite : nil)
        }
        return o
    }
}

extension ReplicatorConfiguration {
    /// Push and pull.
    public static let defaultType = ReplicatorType.pushAndPull
    /// One-shot.
    public static let defaultContinuous = false
    /// Settee's: 10 s (Couchbase Lite's is 300 s, its WebSocket ping). It is also the `_changes` heartbeat of a
    /// continuous pull, which keeps the connection alive through proxies and the peer's idle timeout.
    public static let defaultHeartbeat: TimeInterval = 10
    /// A one-shot replicator tries 10 times.
    public static let defaultMaxAttemptsSingleShot: UInt = 10
    /// A continuous replicator retries forever.
    public static let defaultMaxAttemptsContinuous: UInt = .max
    /// The longest wait between retries: 300 s.
    public static let defaultMaxAttemptWaitTime: TimeInterval = 300
    /// Couchbase Lite's former spelling of ``defaultMaxAttemptWaitTime``.
    public static let defaultMaxAttemptsWaitTime: TimeInterval = defaultMaxAttemptWaitTime
}
