public import Foundation
import Logging
import Synchronization
import SetteeCore
import SetteeIndex
public import SetteeStore

/// A Settee node: the data directory, its open databases, and the node's identity.
///
/// Databases are opened on first use and kept open; `delete` closes one before removing its files.
/// Thread-safe.
public final class Node: Sendable {
    /// The node's settings now: the start-up configuration with the config API's changes applied.
    public var configuration: ServerConfiguration { config.snapshot.server }
    /// The live settings (`/_node/{node}/_config`), persisted in `<data>/local.ini`.
    let config: NodeConfig
    /// A uuid made when the data directory was first used, stable across restarts.
    public let uuid: String
    /// When the node started.
    public let startTime = Date()
    /// `_users`: credentials and user-document rules.
    let users = UserDirectory()
    /// Signs and checks `_session` cookies with the node's secret.
    let cookies: SessionCookies
    /// Refuses writes that a `validate_doc_update` this node can't run would have judged.
    let validation = ValidationGuard()
    /// Databases created, updated and deleted, for `/_db_updates`.
    let databaseUpdates = DatabaseUpdates()
    /// `/_uuids`' generator (CouchDB's algorithms).
    let uuids = UUIDGenerator()
    /// Server admins' password checks (with a cache of verified passwords).
    let adminPasswords = AdminPasswords()
    /// Session cookies ended by logout.
    let revokedCookies = RevokedCookies()
    /// Failed-login lockout per (user, address).
    let lockout: Lockout
    /// JWT bearer authentication, when configured.
    var jwt: JWTAuthenticator? {
        let snapshot = config.snapshot
        if let cached = jwtCache.withLock({ $0 }), cached.snapshot === snapshot { return cached.authenticator }
        // Keys changed through the config API: a key that doesn't parse turns JWT off (and is logged), as a
        // malformed key does in CouchDB.
        let authenticator = snapshot.server.security.jwt.flatMap { try? JWTAuthenticator($0) }
        jwtCache.withLock { $0 = (snapshot, authenticator) }
        return authenticator
    }
    private let jwtCache = Mutex<(snapshot: NodeConfig.Snapshot, authenticator: JWTAuthenticator?)?>(nil)
    let tasks: ActiveTasks
    let metrics: ServerMetrics
    /// The connections open to the node's server, and those serving a request.
    public let connections = ConnectionCounts()
    /// Raised when the HTTP server begins its graceful shutdown: open `_changes` feeds end with their `last_seq`.
    let shutdownNotice = ShutdownNotice()
    /// The node's background work (compactions, `_db_updates` watchers, scheduled installs): tasks that end, and
    /// are waited for, when the node shuts down (``NodeService``).
    package let background = BackgroundTasks()
    /// Transient, persistent (`_replicator`) and peer replications.
    var replications: ReplicationManager { parts.withLock { $0!.replications } }
    /// `[couch_peruser]`: a private database per user of `_users`.
    var perUser: PerUserDatabases { parts.withLock { $0!.perUser } }
    /// Set once at the end of `init` (each needs the node), only read afterwards.
    private let parts = Mutex<(replications: ReplicationManager, perUser: PerUserDatabases)?>(nil)

    /// The open databases and what is cached beside them. A database is opened or created outside the lock, under
    /// an ``Opening`` placeholder that later callers for the same name wait on (CouchDB's `couch_server` does the
    /// same), so two requests never open the same file twice and one slow open (a file another process holds, a
    /// long migration) delays nobody else.
    private struct State {
        var open: [String: Database] = [:]
        /// Databases being opened or created now, and what their callers wait on.
        var opening: [String: Opening] = [:]
        /// Databases the node serves but does not own (``serve(_:readOnly:)``).
        var served: [Database] = []
        /// The served databases peers may only read (their `_local` checkpoints aside).
        var servedReadOnly: Set<String> = []
        /// The default collection of each open database (the plain `/{db}` keyspace, named by nearly every
        /// request), kept beside it rather than made per request.
        var defaultCollections: [String: SetteeStore.Collection] = [:]
        var securityObjects: [String: SecurityObject] = [:]
        /// Bumped by every `_security` change and delete of a database: a load that started before one doesn't
        /// put what it read into the cache.
        var securityGeneration = 0
    }
    private let state = Mutex(State())

    public init(configuration: ServerConfiguration) throws {
        if !FileManager.default.fileExists(atPath: configuration.dataDirectory) {
            // Only the node's user may read the data (password hashes, the node secret).
            try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let idFile = (configuration.dataDirectory as NSString).appendingPathComponent(".settee-node-uuid")
        if let existing = try? String(contentsOfFile: idFile, encoding: .utf8), existing.count >= 32 {
            uuid = existing.trimmingCharacters(in: .whitespacesAndNewlines)
        } else {
            uuid = Hex.random(bytes: 16)
            try uuid.write(toFile: idFile, atomically: true, encoding: .utf8)
        }
        config = try NodeConfig(startup: configuration, nodeName: configuration.nodeName, uuid: uuid)
        tasks = ActiveTasks(nodeName: configuration.nodeName)
        metrics = ServerMetrics()
        let config = config
        cookies = SessionCookies(secret: try SessionCookies.loadSecret(directory: configuration.dataDirectory)) {
            config.snapshot.server.security.sessionTimeout
        }
        lockout = Lockout {
            let security = config.snapshot.server.security
            return (security.lockoutThreshold, security.lockoutDuration)
        }
        // Bad start-up keys fail the start with a clear message.
        _ = try configuration.security.jwt.map { try JWTAuthenticator($0) }
        let parts = (replications: ReplicationManager(node: self), perUser: PerUserDatabases(node: self))
        self.parts.withLock { $0 = parts }
        applyOpenDatabaseLimit()
        AttachmentStreaming.clearStaging(self)
        if configuration.createSystemDatabases {
            // CouchDB's single-node setup makes these; clients and replicators expect them on a fresh node.
            for name in [SystemDatabase.users.rawValue, SystemDatabase.replicator.rawValue]
            where !Database.exists(name: name, inDirectory: configuration.dataDirectory) {
                try createDatabase(name)
            }
        }
    }

    /// How the node opens its databases: every one gets the node's write rules (``WriteRules``), so every write to
    /// it, whatever carries it, passes them.
    var databaseConfiguration: DatabaseConfiguration {
        var c = DatabaseConfiguration(directory: configuration.dataDirectory, fullSync: configuration.fullSync)
        c.admission = WriteRules(config: config, validation: validation)
        return c
    }

    /// The open database `name`, opening it if needed. Throws `.notFound` ("Database does not exist.").
    ///
    /// Opening happens outside the node's lock: a caller for a database being opened waits for that open (and gets
    /// its database or its error); callers for any other database don't wait at all.
    public func database(_ name: String) throws -> Database {
        switch claim(name) {
        case .open(let db): return db
        case .wait(let opening): return try opening.wait()
        case .mine(let opening): return try open(name, opening)
        }
    }

    /// Opens `name` if it is not open yet, without holding a thread of the cooperative pool: the open itself runs
    /// on the store's threads, and a wait for another caller's open is a suspension. Errors are left to the
    /// caller's own ``database(_:)`` (a missing database is 404 there).
    func openOffTheCallersThread(_ name: String) async {
        switch claim(name) {
        case .open: return
        case .wait(let opening): await opening.finished()
        case .mine(let opening): _ = try? await blocking { try self.open(name, opening) }
        }
    }

    private enum Claim { case open(Database), wait(Opening), mine(Opening) }

    /// What a caller for `name` does: use the open database, wait for the open under way, or open it (having left
    /// the placeholder others wait on).
    private func claim(_ name: String) -> Claim {
        state.withLock { s in
            if let db = s.open[name] { return .open(db) }
            if let opening = s.opening[name] { return .wait(opening) }
            let opening = Opening()
            s.opening[name] = opening
            return .mine(opening)
        }
    }

    /// Opens the file of `name` under the placeholder `opening` (claimed by this caller), and publishes it.
    private func open(_ name: String, _ opening: Opening) throws -> Database {
        let result = Result { () throws -> Database in
            guard Database.exists(name: name, inDirectory: configuration.dataDirectory) else {
                throw SetteeError(.notFound, "Database does not exist.")
            }
            let db = try Database(name: name, config: databaseConfiguration, create: false)
            limitPartitions(db)
            do {
                // Keep this database's indexes current in the background from now on.
                _ = try IndexManager.shared(for: db)
            } catch {
                db.close()
                throw error
            }
            // (Watched before it is published: a delete waiting for this open closes it only after.)
            watchCommits(db)
            return db
        }
        return try publish(name, result, opening).get()
    }

    /// Ends an open or create of `name`: its database (if it succeeded) joins the open ones, and whoever waits on
    /// it is told. Should a database of the name have been put in place meanwhile (``serve(_:readOnly:)``), that
    /// one stays and this one closes.
    private func publish(_ name: String, _ result: Result<Database, any Error>, _ opening: Opening) -> Result<Database, any Error> {
        var outcome = result
        var superseded: Database?
        state.withLock { s in
            s.opening[name] = nil
            guard case .success(let db) = result else { return }
            if let existing = s.open[name] {
                superseded = db
                outcome = .success(existing)
            } else {
                s.open[name] = db
                metrics.openDatabases(s.open.count)
            }
        }
        superseded?.close()
        opening.finish(outcome)
        return outcome
    }

    /// Waits until no open or create of `name` is under way, then runs `body` under the node's lock (with none
    /// under way then either).
    private func withNoOpening<T>(_ name: String, _ body: (inout State) throws -> T) rethrows -> T {
        while true {
            if let pending = state.withLock({ $0.opening[name] }) {
                _ = try? pending.wait()
                continue
            }
            // Still none (checked again under the lock the body runs in).
            let done: T? = try state.withLock { s in
                guard s.opening[name] == nil else { return nil }
                return try body(&s)
            }
            if let done { return done }
        }
    }

    /// An open database and its default collection. Throws `.notFound` if the database does not exist.
    func defaultCollection(of name: String) throws -> (Database, SetteeStore.Collection) {
        if let cached = state.withLock({ s in s.open[name].flatMap { db in s.defaultCollections[name].map { (db, $0) } } }) {
            return cached
        }
        let db = try database(name)
        let collection = try db.defaultCollection()
        state.withLock { s in if s.open[name] === db { s.defaultCollections[name] = collection } }
        return (db, collection)
    }

    /// Creates a database (`partitioned`: CouchDB 3's partitioned database, not for system databases). Throws
    /// `.fileExists` if it exists, `.illegalDatabaseName` for a bad name, `.badRequest` for a partitioned system
    /// database.
    @discardableResult
    public func createDatabase(_ name: String, partitioned: Bool = false) throws -> Database {
        try Node.validateName(name)
        if partitioned && Node.isSystemDatabase(name) {
            throw SetteeError(.badRequest, "Cannot partition a system database")
        }
        // (An open of the name under way, for a request that came first, ends before the create decides.)
        let opening: Opening = try withNoOpening(name) { s in
            if s.open[name] != nil || Database.exists(name: name, inDirectory: configuration.dataDirectory) {
                throw SetteeError(.fileExists, "The database could not be created, the file already exists.")
            }
            let opening = Opening()
            s.opening[name] = opening
            return opening
        }
        // Made outside the lock, as an open is; callers for the name meanwhile wait for it.
        let result = Result { () throws -> Database in
            let db = try Database(name: name, config: databaseConfiguration, create: true)
            do {
                if partitioned { try db.makePartitioned() }
                limitPartitions(db)
                // `_users` starts with its `_design/_auth`. A custom authentication_db gets its own a few seconds
                // later, as CouchDB's auth cache adds it; until then only password hashing applies there.
                if name == UserDirectory.database { try UserDirectory.installAuthDesignDocument(db) }
            } catch {
                db.close()
                try? Database.delete(name: name, inDirectory: configuration.dataDirectory)
                throw error
            }
            // (Recorded and watched before it is published: a delete waiting for this create comes after both.)
            databaseUpdates.record(name, .created)
            watchCommits(db)
            return db
        }
        let db = try publish(name, result, opening).get()
        if name != UserDirectory.database && name == configuration.security.authenticationDB { scheduleAuthDesignDocument() }
        // (After it is published: these read the new database through the node.)
        replications.databaseCreated(name)
        if name == UserDirectory.database { perUser.refresh() }
        return db
    }

    /// Whether `name` is a database served read-only (``serve(_:readOnly:)``).
    func isServedReadOnly(_ name: String) -> Bool {
        state.withLock { !$0.servedReadOnly.isEmpty && $0.servedReadOnly.contains(name) }
    }

    /// Closes and deletes a database. Throws `.notFound` if it does not exist.
    public func deleteDatabase(_ name: String) throws {
        if state.withLock({ $0.served.contains { $0.name == name } }) {
            throw SetteeError(.forbidden, "The database \(name) belongs to the application serving it and cannot be deleted here.")
        }
        replications.databaseDeleted(name)
        defer { if name == UserDirectory.database { perUser.refresh() } }
        // Under the lock (once no open or create of it is under way: the files are not removed under one): the
        // database taken out, and a placeholder left that callers for the name wait on. The close (which waits for
        // reads under way) and the removal happen outside the lock, so a slow one delays nobody else.
        let (db, opening): (Database?, Opening) = withNoOpening(name) { s in
            let db = s.open.removeValue(forKey: name)
            s.defaultCollections[name] = nil
            s.securityObjects[name] = nil
            s.securityGeneration += 1
            metrics.openDatabases(s.open.count)
            let opening = Opening()
            s.opening[name] = opening
            return (db, opening)
        }
        validation.invalidate(name)
        let result = Result { () throws -> Void in
            db?.close()
            try Database.delete(name: name, inDirectory: configuration.dataDirectory)
            databaseUpdates.record(name, .deleted)
        }
        state.withLock { _ = $0.opening.removeValue(forKey: name) }
        // Who waited for it finds it gone (or, should the removal have failed, that failure).
        switch result {
        case .success: opening.finish(.failure(SetteeError(.notFound, "Database does not exist.")))
        case .failure(let error): opening.finish(.failure(error))
        }
        try result.get()
    }

    /// Adds `_design/_auth` to the configured authentication database after a few seconds (when it exists and has
    /// none), as CouchDB's auth cache does when it starts watching a database.
    func scheduleAuthDesignDocument(after delay: Duration = .seconds(5)) {
        background.run { [weak self] in
            try? await Task.sleep(for: delay)
            guard !Task.isCancelled, let self else { return }
            let name = self.configuration.security.authenticationDB
            guard let db = try? self.database(name) else { return }  // not created (yet): nothing to install into
            do {
                try await blocking { try UserDirectory.installAuthDesignDocument(db) }
            } catch {
                Logger(label: "settee.auth").warning("\(name): cannot install _design/_auth: \(error)")
            }
            self.validation.invalidate(name)
        }
    }

    /// Records an `updated` event for `/_db_updates` after each commit that moved the database's sequence, until
    /// the database closes. Commits of `_local` documents (replication checkpoints) and metadata don't: as in
    /// CouchDB, they are not updates of the database — and two peers would otherwise wake each other forever, each
    /// replication's checkpoint an event for the other side.
    private func watchCommits(_ db: Database) {
        let commits = db.commits(), updates = databaseUpdates, name = db.name
        let start = db.lastSequence
        background.run {
            var last = start
            for await sequence in commits where sequence != last {
                last = sequence
                updates.record(name, .updated)
            }
        }
    }

    /// A database's `_security` object (cached; CouchDB 3's admin-only default when none was set).
    func securityObject(_ db: Database) throws -> SecurityObject {
        let (cached, generation) = state.withLock { ($0.securityObjects[db.name], $0.securityGeneration) }
        if let cached { return cached }
        let object = try db.metadata("security").map(SecurityObject.init) ?? .adminOnly
        // (Cached only if no change or delete came meanwhile, and the database is still the one open.)
        state.withLock { s in
            if s.securityGeneration == generation && s.open[db.name] === db { s.securityObjects[db.name] = object }
        }
        return object
    }

    /// `[couchdb] max_dbs_open`: how many files the databases' SQLite connections may hold open; past it the least
    /// recently used databases close theirs until used again (``OpenPools``). Process-wide, as the files it counts are.
    func applyOpenDatabaseLimit() {
        let value = config.value("couchdb", "max_dbs_open").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        OpenPools.shared.setLimit(value.map { max(1, $0) } ?? OpenPools.defaultLimit)
    }

    /// Stores a database's `_security` object. It is a database event (`_db_updates` says `updated`), so that the
    /// node's peers merge it at once (``PeerSync/syncSecurity(_:_:)``).
    func setSecurityObject(_ db: Database, _ body: JSONObject) throws {
        try db.setMetadata("security", .object(body))
        state.withLock { s in
            s.securityGeneration += 1
            s.securityObjects[db.name] = SecurityObject(.object(body))
        }
        databaseUpdates.record(db.name, .updated)
    }

    /// Names of every database, sorted.
    public func databaseNames() -> [String] {
        let names = Database.names(inDirectory: configuration.dataDirectory)
        let extra = state.withLock { $0.served.map(\.name) }
        return extra.isEmpty ? names : Array(Set(names + extra)).sorted()
    }

    /// `/_node/_local/_stats` in CouchDB's shape.
    func couchStats() -> JSON {
        metrics.couchStats(adminChecks: (adminPasswords.fastChecks.load(ordering: .relaxed), adminPasswords.slowChecks.load(ordering: .relaxed)),
                           userCache: (users.cacheHits.load(ordering: .relaxed), users.cacheMisses.load(ordering: .relaxed)))
    }

    /// Closes every open database (graceful shutdown); databases given with ``serve(_:)`` stay open (their
    /// owner closes them).
    public func closeAll() {
        // (Opens under way end first — checked in the same lock that takes the databases — so none adds a database
        // after this.)
        var dbs: [Database] = []
        while true {
            enum Step { case wait(Opening), take([Database]) }
            let step: Step = state.withLock { s in
                if let pending = s.opening.values.first { return .wait(pending) }
                let owned = Array(s.open.values).filter { db in !s.served.contains { $0 === db } }
                s.open.removeAll()
                s.defaultCollections.removeAll()
                return .take(owned)
            }
            if case .wait(let pending) = step { _ = try? pending.wait(); continue }
            if case .take(let owned) = step { dbs = owned }
            break
        }
        for db in dbs { db.close() }
    }

    /// Serves an already open database under its name, in place of a file of the node's data directory (an app
    /// that embeds the store and listens for peers: `URLEndpointListener`). The node never closes it.
    /// - Parameter readOnly: Callers, admins included, get at most reader access: they read documents, changes
    ///   and queries and write only `_local` (replication checkpoint) documents.
    public func serve(_ database: Database, readOnly: Bool = false) {
        let replaced: Database? = state.withLock { s in
            let name = database.name
            // A file of the same name the node had open gives way (closed below), with what was cached beside it.
            let previous = s.open[name].flatMap { db in s.served.contains { $0 === db } ? nil : db }
            s.served.append(database)
            if readOnly { s.servedReadOnly.insert(name) }
            s.open[name] = database
            s.defaultCollections[name] = nil
            s.securityObjects[name] = nil
            s.securityGeneration += 1
            metrics.openDatabases(s.open.count)
            return previous
        }
        replaced?.close()
        // Writes that reach it through the node pass the node's rules (an app's own rules, if it set some, stay).
        database.install(admission: WriteRules(config: config, validation: validation))
        _ = try? IndexManager.shared(for: database)
        watchCommits(database)
    }

    /// Gives a database the node's live `max_partition_size`.
    private func limitPartitions(_ db: Database) {
        guard db.isPartitioned else { return }
        db.partitionSizeLimit = { [weak self] in self?.configuration.maxPartitionSize ?? Database.defaultPartitionSizeLimit }
    }

    /// The databases CouchDB will not partition: its system databases and any ending in `/_replicator` or
    /// `/_users` (`couch_partition:validate_dbname/2`).
    static func isSystemDatabase(_ name: String) -> Bool {
        if name.hasPrefix("_") { return true }
        let suffix = name.split(separator: "/").last.map(String.init) ?? name
        return suffix == SystemDatabase.replicator.rawValue || suffix == SystemDatabase.users.rawValue
    }

    /// CouchDB's database-name rule, plus the system databases (``SystemDatabase``).
    static func validateName(_ name: String) throws(SetteeError) {
        if SystemDatabase.isNamed(name) { return }
        try DocumentIDs.validateDatabaseName(name)
    }
}

/// A one-shot broadcast that the server is shutting down, for work that would otherwise hold the shutdown (live
/// feeds). Raised by every HTTP/1.1 connection's graceful-shutdown handler (idempotent).
final class ShutdownNotice: Sendable {
    private struct State {
        var raised = false
        var next = 0
        var handlers: [Int: @Sendable () -> Void] = [:]
    }

    private let state = Mutex(State())

    /// Runs `handler` once at shutdown (now, if it has begun); the token removes it.
    func onShutdown(_ handler: @escaping @Sendable () -> Void) -> Int? {
        let token: Int? = state.withLock { s in
            guard !s.raised else { return nil }
            s.next += 1
            s.handlers[s.next] = handler
            return s.next
        }
        if token == nil { handler() }
        return token
    }

    func remove(_ token: Int?) {
        guard let token else { return }
        _ = state.withLock { $0.handlers.removeValue(forKey: token) }
    }

    /// Whether shutdown has begun (for feeds that poll instead of registering a handler).
    var isRaised: Bool { state.withLock { $0.raised } }

    func raise() {
        let handlers: [@Sendable () -> Void] = state.withLock { s in
            guard !s.raised else { return [] }
            s.raised = true
            defer { s.handlers = [:] }
            return Array(s.handlers.values)
        }
        handlers.forEach { $0() }
    }
}

/// A database being opened or created: its callers wait on it and get its outcome (``Node/database(_:)``), on a
/// thread (``wait()``) or as a suspended task (``finished()``).
private final class Opening: Sendable {
    private struct State {
        var outcome: Result<Database, any Error>?
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let done = DispatchGroup()
    private let state = Mutex(State())

    init() { done.enter() }

    func finish(_ result: Result<Database, any Error>) {
        let waiters = state.withLock { s in
            s.outcome = result
            defer { s.waiters = [] }
            return s.waiters
        }
        done.leave()
        for waiter in waiters { waiter.resume() }
    }

    /// Blocks until the open ends; its database, or its error.
    func wait() throws -> Database {
        done.wait()
        return try state.withLock { $0.outcome! }.get()
    }

    /// Suspends until the open ends.
    func finished() async {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { s in
                if s.outcome != nil { return true }
                s.waiters.append(continuation)
                return false
            }
            if ended { continuation.resume() }
        }
    }
}
