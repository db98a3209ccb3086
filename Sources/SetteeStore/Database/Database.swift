import Foundation
package import SetteeCore
import Synchronization

/// A Settee database: one SQLite file holding collections of JSON documents with their revision trees.
///
/// Open or create one by name; every database has the default collection `_default._default`.
///
/// ```swift
/// let db = try Database(name: "catalog", config: DatabaseConfiguration(directory: "/tmp/data"))
/// let products = try db.defaultCollection()
/// let doc = MutableDocument(id: "p1")
/// doc.setString("Espresso cup", forKey: "name")
/// try products.save(document: doc)
/// ```
///
/// Threading: a `Database` is safe to use from any thread. Writes are serialized through one writer
/// connection and coalesced into group commits; reads run concurrently on a pool of WAL readers.
/// The synchronous API blocks the calling thread: from async code use the `async` variants, which run
/// on a dedicated dispatch queue (never on the caller's executor).
public final class Database: Sendable {
    /// The database's name.
    public let name: String
    /// The configuration it was opened with.
    public let config: DatabaseConfiguration
    /// Path of the SQLite file.
    public let filePath: String
    /// Path of the SQLite file, nil once the database is closed (Couchbase Lite's `path`).
    public var path: String? { pool.isClosed ? nil : filePath }
    /// A random id given at creation, stable for the life of the database (CouchDB's per-db uuid).
    public let uuid: String

    let pool: DatabasePool
    let writer: GroupCommitWriter
    let notifier = ChangeNotifier()
    /// Purges documents whose expiration time came (Couchbase Lite's document expiration).
    let expiry = ExpiryTimer()
    /// The database's background work (its indexes' catch-ups, view updates after stale queries), cancelled when
    /// it closes.
    package let background = BackgroundTasks()

    /// The writer's counters, touched only inside write transactions (which the group-commit writer runs one at a
    /// time), so its lock is never contended.
    struct WriterState {
        /// The last sequence allocated, committed or not.
        var sequence: UInt64
        /// The last sequence stored in `meta`.
        var persisted: UInt64
        /// Changed document ids by collection, published after the commit.
        var pendingChanges: [String: [String]] = [:]
    }
    let writerState: Mutex<WriterState>
    /// The id of the thread running this database's `inBatch` block, 0 for none (``Batch/current(of:)``). At most
    /// one batch runs at a time: it holds the writer.
    let batchThread = Atomic<UInt>(0)
    /// That batch. Written only by its own thread, before ``batchThread`` names the thread and after it stops
    /// naming it; read only by a thread that found its own id there: never by two threads at once.
    nonisolated(unsafe) var runningBatch: Batch?
    /// Counts commits that changed a design document (saved, deleted, replicated or purged), so what higher
    /// layers derive from design documents (validation functions) can tell it is stale. Moved after the commit.
    private let designGeneration = Atomic<Int>(0)
    /// The rules every write passes (``DatabaseConfiguration/admission``, or what ``install(admission:)`` set).
    private let admissionState: Mutex<(any WriteAdmission)?>
    /// The rules every write to this database passes before it is stored, nil for none.
    package var admission: (any WriteAdmission)? { admissionState.withLock { $0 } }

    /// Gives an open database write rules when it has none (a node serving a database an app opened).
    package func install(admission: any WriteAdmission) {
        admissionState.withLock { if $0 == nil { $0 = admission } }
    }

    /// How many commits so far changed a design document of this database; read it before deriving something from
    /// the design documents, and derive again when it has moved.
    package var designDocumentGeneration: Int { designGeneration.load(ordering: .acquiring) }

    /// What readers of the database share.
    private struct State {
        var committedSeq: UInt64
        var revsLimit: Int
        var partitioned: Bool
        var partitionSizeLimit: (@Sendable () -> Int)?
        var collections: [String: CollectionInfo]
        /// Per-database objects owned by higher layers (``extensionObject(_:create:)``).
        var extensions: [String: any AnyObject & Sendable] = [:]
    }
    private let state: Mutex<State>

    /// Opens the database `name` in `config.directory`, creating it if it does not exist.
    ///
    /// - Throws: ``SetteeError`` `.storage` when the file cannot be opened or migrated, `.badRequest`
    ///   for an empty name.
    public convenience init(name: String, config: DatabaseConfiguration = DatabaseConfiguration()) throws {
        try self.init(name: name, config: config, create: true)
    }

    /// Opens the database; with `create: false` a missing database is `.notFound`.
    public init(name: String, config: DatabaseConfiguration, create: Bool) throws {
        guard !name.isEmpty, !name.utf8.contains(0) else {
            throw SetteeError(.badRequest, "Database name must not be empty")
        }
        self.name = name
        self.config = config
        self.admissionState = Mutex(config.admission)
        self.filePath = Database.filePath(name: name, directory: config.directory)
        if !create && !FileManager.default.fileExists(atPath: filePath) {
            throw SetteeError(.notFound, "Database does not exist.")
        }
        do {
            try FileManager.default.createDirectory(atPath: config.directory, withIntermediateDirectories: true)
        } catch {
            throw SetteeError(.storage, "Cannot create directory \(config.directory)", underlying: UnderlyingError(description: "\(error)"))
        }
        let migrator = Database.migrator(revsLimit: config.revsLimit)
        do {
            pool = try DatabasePool(
                path: filePath,
                configuration: PoolConfiguration(readers: max(1, config.readers), synchronousFull: config.fullSync,
                                                 mmapEnabled: config.mmapEnabled),
                prepareWriter: { try migrator.migrate($0) })
            var partitioned = false
            let meta = try pool.write { db -> (String, Int, UInt64, [(Int64, String, String)]) in
                let stmt = try db.prepare("SELECT key, value FROM meta")
                var uuid = "", limit = 1000, seq: UInt64 = 0
                while try stmt.step() {
                    switch stmt.string(0) {
                    case "uuid": uuid = stmt.string(1) ?? ""
                    case "revs_limit": limit = stmt.int(1)
                    case "last_seq": seq = UInt64(stmt.int64(1))
                    case "partitioned": partitioned = stmt.int64(1) != 0
                    default: break
                    }
                }
                stmt.reset()
                // A crash between a document write and the counter update cannot happen (same transaction),
                // but take the max anyway so sequences never go backwards.
                let list = try db.withStatement("SELECT id, scope, name FROM collections") { cols in
                    var list: [(Int64, String, String)] = []
                    while try cols.step() { list.append((cols.int64(0), cols.string(1) ?? "", cols.string(2) ?? "")) }
                    return list
                }
                for (cid, _, _) in list {
                    if let max = try db.int64("SELECT max(seq) FROM docs_\(cid)") { seq = Swift.max(seq, UInt64(max)) }
                }
                return (uuid, limit, seq, list)
            }
            uuid = meta.0
            var collections: [String: CollectionInfo] = [:]
            for (cid, scope, cname) in meta.3 {
                collections["\(scope).\(cname)"] = CollectionInfo(id: cid, scope: scope, name: cname)
            }
            state = Mutex(State(committedSeq: meta.2, revsLimit: meta.1, partitioned: partitioned,
                                collections: collections))
            writerState = Mutex(WriterState(sequence: meta.2, persisted: meta.2))
            writer = GroupCommitWriter(pool: pool)
        } catch let error as SetteeError {
            throw error
        } catch {
            throw SetteeError(.storage, "Cannot open database \(name)", underlying: Database.sendable(error))
        }
        writer.afterBegin = { [unowned self] db in
            // Another process (e.g. the CLI) may have written since our last commit: never reuse a sequence.
            let stmt = try db.prepare("SELECT value FROM meta WHERE key = 'last_seq'")
            defer { stmt.reset() }
            if try stmt.step() {
                let stored = UInt64(stmt.int64(0))
                self.writerState.withLock { writer in
                    if stored > writer.sequence {
                        writer.sequence = stored
                        writer.persisted = stored
                    }
                }
            }
        }
        writer.beforeCommit = { [unowned self] db in
            let (sequence, persisted) = self.writerState.withLock { ($0.sequence, $0.persisted) }
            if sequence != persisted {
                try db.prepare("UPDATE meta SET value = ? WHERE key = 'last_seq'").run([.integer(Int64(sequence))])
            }
        }
        writer.afterCommit = { [unowned self] in
            let (sequence, changes) = self.writerState.withLock { writer in
                writer.persisted = writer.sequence
                defer { writer.pendingChanges = [:] }
                return (writer.sequence, writer.pendingChanges)
            }
            self.state.withLock { $0.committedSeq = sequence }
            if changes.values.contains(where: { ids in ids.contains { $0.hasPrefix("_design/") } }) {
                self.designGeneration.add(1, ordering: .releasing)
            }
            self.notifier.publish(sequence: sequence, changes: changes)
        }
        writer.afterRollback = { [unowned self] in
            self.writerState.withLock { writer in
                writer.sequence = writer.persisted
                writer.pendingChanges = [:]
            }
        }
        expiry.start(database: self)
    }

    deinit {
        expiry.stop()
        notifier.finish()
        pool.close()
    }

    /// The file name for a database: characters outside `[a-z0-9_$()+-]` are percent-encoded.
    static func filePath(name: String, directory: String) -> String {
        var encoded = ""
        for scalar in name.unicodeScalars {
            switch scalar {
            case "a"..."z", "0"..."9", "_", "$", "(", ")", "+", "-":
                encoded.unicodeScalars.append(scalar)
            default:
                for byte in String(scalar).utf8 { encoded += String(format: "%%%02X", byte) }
            }
        }
        return (directory as NSString).appendingPathComponent(encoded + ".sqlite")
    }

    /// Decodes a file name written by ``filePath(name:directory:)`` back into a database name.
    static func name(fromFile file: String) -> String? {
        guard file.hasSuffix(".sqlite") else { return nil }
        return String(file.dropLast(7)).removingPercentEncoding
    }

    static func sendable(_ error: any Error) -> any Error & Sendable {
        if let e = error as? SQLiteError { return e }
        if let e = error as? SetteeError { return e }
        return UnderlyingError(description: "\(error)")
    }

    /// The names of the databases in a directory, sorted.
    public static func names(inDirectory directory: String) -> [String] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return files.compactMap(name(fromFile:)).sorted()
    }

    /// Whether a database exists in the directory.
    public static func exists(name: String, inDirectory directory: String) -> Bool {
        FileManager.default.fileExists(atPath: filePath(name: name, directory: directory))
    }

    /// Deletes a closed database's files.
    /// - Throws: ``SetteeError`` `.notFound` if there is no such database.
    public static func delete(name: String, inDirectory directory: String) throws {
        let path = filePath(name: name, directory: directory)
        guard FileManager.default.fileExists(atPath: path) else {
            throw SetteeError(.notFound, "Database does not exist.")
        }
        for suffix in ["", "-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: path + suffix)
        }
    }

    /// Closes the database: waits for in-flight work, checkpoints the WAL and closes every connection.
    /// Later calls throw `.closed`.
    public func close() {
        background.cancelAll()
        expiry.stop()
        notifier.finish()
        pool.close()
    }

    /// Closes and deletes this database's files.
    public func delete() throws {
        close()
        try Database.delete(name: name, inDirectory: config.directory)
    }

    /// The sequence of the last committed change (CouchDB's `update_seq`).
    public var lastSequence: UInt64 {
        state.withLock { $0.committedSeq }
    }

    /// An async sequence yielding the database's sequence after every commit (the newest only if the
    /// consumer falls behind). It ends when the database closes.
    public func commits() -> AsyncStream<UInt64> {
        notifier.sequences()
    }

    /// The number of revisions kept per document path (`_revs_limit`).
    public var revsLimit: Int {
        state.withLock { $0.revsLimit }
    }

    /// Changes `_revs_limit`. A lower limit stems every document's history now (reads show at most `limit`
    /// revisions per path, as in CouchDB); a higher one applies as documents gain revisions.
    /// - Throws: `.badRequest` for a limit below 1.
    public func setRevsLimit(_ limit: Int) throws {
        guard limit >= 1 else { throw SetteeError(.badRequest, "revs_limit must be a positive integer") }
        let lower = limit < revsLimit
        try write { db in
            try db.prepare("UPDATE meta SET value = ? WHERE key = 'revs_limit'").run([.integer(Int64(limit))])
            if lower { try Database.stemTrees(db, limit: limit) }
        }
        state.withLock { $0.revsLimit = limit }
    }

    /// Whether this is a partitioned database (CouchDB 3's `?partitioned=true`): every regular document id is
    /// `{partition}:{id}`, and partitions are ranges of ids that `_all_docs`, views and Mango queries can read alone.
    /// Fixed when the database is created (``makePartitioned()``).
    public var isPartitioned: Bool {
        state.withLock { $0.partitioned }
    }

    /// CouchDB's `[couchdb] max_partition_size` (bytes; 0 or less: no limit), read at every write batch so a
    /// change applies at once. Nil: CouchDB's default, 10 GiB.
    public var partitionSizeLimit: (@Sendable () -> Int)? {
        get { state.withLock { $0.partitionSizeLimit } }
        set { state.withLock { $0.partitionSizeLimit = newValue } }
    }

    /// The default `max_partition_size`: 10 GiB.
    public static let defaultPartitionSizeLimit = 10 << 30

    /// Makes a database partitioned; called when it is created, before its first document.
    public func makePartitioned() throws {
        try write { db in
            try db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES ('partitioned', 1)").run()
        }
        state.withLock { $0.partitioned = true }
    }

    // MARK: Collections

    /// The default collection, `_default._default`.
    public func defaultCollection() throws -> Collection {
        guard let c = try collection(name: "_default", scope: "_default") else {
            throw SetteeError(.internalError, "default collection missing")
        }
        return c
    }

    /// The collection `scope.name`, or nil if it does not exist. `scope` nil means `_default`.
    public func collection(name: String, scope: String? = nil) throws -> Collection? {
        try checkOpen()
        let key = name == "_default" && (scope == nil || scope == "_default") ? "_default._default" : "\(scope ?? "_default").\(name)"
        let info = state.withLock { $0.collections[key] }
        return info.map { Collection(database: self, info: $0) }
    }

    /// Whether `collection` still exists as the same collection (not deleted, not re-created): a cheap check for
    /// cached query plans.
    package func isCurrent(_ collection: Collection) -> Bool {
        !pool.isClosed && state.withLock { $0.collections[collection.fullName]?.id } == collection.id
    }

    /// Creates the collection (and its scope) if needed and returns it.
    /// - Throws: `.badRequest` for an invalid scope or collection name.
    public func createCollection(name: String, scope: String? = nil) throws -> Collection {
        let scope = scope ?? "_default"
        try DocumentIDs.validateCollectionName(name)
        try DocumentIDs.validateCollectionName(scope)
        if let c = try collection(name: name, scope: scope) { return c }
        let cid: Int64 = try write { db in
            if let id = try db.int64("SELECT id FROM collections WHERE scope = ? AND name = ?", [.text(scope), .text(name)]) {
                return id
            }
            return try Database.createCollectionTables(db, scope: scope, name: name)
        }
        let info = CollectionInfo(id: cid, scope: scope, name: name)
        state.withLock { $0.collections["\(scope).\(name)"] = info }
        return Collection(database: self, info: info)
    }

    /// The collections of a scope (`_default` if nil), sorted by name.
    public func collections(scope: String? = nil) throws -> [Collection] {
        try checkOpen()
        let scope = scope ?? "_default"
        let infos = state.withLock { $0.collections.values.filter { $0.scope == scope } }.sorted { $0.name < $1.name }
        return infos.map { Collection(database: self, info: $0) }
    }

    /// Every collection of every scope.
    /// How many collections the database has (the default one included).
    package var collectionCount: Int { state.withLock { $0.collections.count } }

    public func allCollections() throws -> [Collection] {
        try checkOpen()
        let infos = state.withLock { Array($0.collections.values) }.sorted { $0.fullName < $1.fullName }
        return infos.map { Collection(database: self, info: $0) }
    }

    /// The scopes that have a collection, by name (the default scope always: it holds the default collection).
    public func scopes() throws -> [Scope] {
        try checkOpen()
        let names = Set(state.withLock { $0.collections.values.map(\.scope) }).sorted()
        return names.map { Scope(name: $0, database: self) }
    }

    /// The scope `name`, or nil when no collection is in it.
    public func scope(name: String) throws -> Scope? {
        try scopes().first { $0.name == name }
    }

    /// The default scope, `_default`.
    public func defaultScope() throws -> Scope {
        try checkOpen()
        return Scope(name: Scope.defaultScopeName, database: self)
    }

    /// Deletes a collection and all its documents. The default collection cannot be deleted.
    public func deleteCollection(name: String, scope: String? = nil) throws {
        let scope = scope ?? "_default"
        guard !(scope == "_default" && name == "_default") else {
            throw SetteeError(.badRequest, "The default collection cannot be deleted")
        }
        guard let c = try collection(name: name, scope: scope) else {
            throw SetteeError(.notFound, "Collection \(scope).\(name) does not exist")
        }
        try write { db in
            try db.execute("DROP TABLE docs_\(c.id); DROP TABLE local_\(c.id); DROP TABLE \(c.archiveTable);")
            try db.prepare("DELETE FROM expiry WHERE collection = ?").run([.integer(c.id)])
            try db.prepare("DELETE FROM routes WHERE collection = ?").run([.integer(c.id)])
            try db.prepare("DELETE FROM collections WHERE id = ?").run([.integer(c.id)])
        }
        state.withLock { $0.collections["\(scope).\(name)"] = nil }
    }

    // MARK: Extensions

    /// A per-database object owned by a higher layer (the index manager), created on first use.
    /// The store keeps it alive with the database and knows nothing else about it.
    package func extensionObject<T: AnyObject & Sendable>(_ key: String, create: () -> T) -> T {
        state.withLock { state in
            if let existing = state.extensions[key] as? T { return existing }
            let made = create()
            state.extensions[key] = made
            return made
        }
    }

    // MARK: Access

    func checkOpen() throws(SetteeError) {
        if pool.isClosed { throw SetteeError(.closed, "Database \(name) is closed") }
    }

    /// Runs `work` in the next group commit. Errors other than `SetteeError` become `.storage`.
    package func write<T>(_ work: @escaping (Connection) throws -> T) throws(SetteeError) -> T {
        try checkOpen()
        do {
            if let batch = Batch.current(of: self) {
                // Inside `inBatch`: the batch's transaction, each write in a savepoint of its own.
                var result: T?
                try batch.savepoint { try batch.connection.savepoint("batch\(batch.depth % 8)") { result = try work(batch.connection) } }
                return result!
            }
            return try writer.submit(work)
        } catch let error as SetteeError {
            throw error
        } catch {
            throw storageError(error)
        }
    }

    /// Runs `work` in the next group commit, as ``write(_:)`` does, except that inside `inBatch` it runs without a
    /// savepoint of its own (a savepoint per save was a sixth of a batch's time): for work whose failures after
    /// it changed a row are storage errors (a collection's revision writes). Such a failure — one after the work
    /// changed a row, or one that ended the transaction — fails the whole batch (``Batch/fail(_:)``); one before
    /// it changed anything fails the work alone, as with a savepoint. A write into a failed batch throws its failure.
    package func writeInBatchOrGroup<T>(_ work: @escaping (Connection) throws -> T) throws(SetteeError) -> T {
        guard let batch = Batch.current(of: self) else { return try write(work) }
        try checkOpen()
        do {
            if let failure = batch.failure { throw failure }
            let connection = batch.connection
            let changesBefore = connection.totalChanges
            do {
                return try work(connection)
            } catch {
                if connection.totalChanges != changesBefore || !connection.isInTransaction { batch.fail(error) }
                throw error
            }
        } catch let error as SetteeError {
            throw error
        } catch {
            throw storageError(error)
        }
    }

    /// Runs `work` on a reader connection.
    package func read<T>(_ work: (Connection) throws -> T) throws(SetteeError) -> T {
        try checkOpen()
        do {
            // Inside `inBatch`, reads see the batch's writes.
            if let batch = Batch.current(of: self) { return try work(batch.connection) }
            return try pool.read(work)
        } catch let error as SetteeError {
            throw error
        } catch {
            throw storageError(error)
        }
    }

    func storageError(_ error: any Error) -> SetteeError {
        if pool.isClosed { return SetteeError(.closed, "Database \(name) is closed", underlying: Database.sendable(error)) }
        return SetteeError(.storage, "Storage error: \(error)", underlying: Database.sendable(error))
    }

    /// Allocates the next sequence number (writer only: inside ``write(_:)``; a rollback gives it back). A change
    /// that is not a document's (a sync-function principal's grants) takes one so feed readers can tell before
    /// from after.
    package func nextSequence() -> UInt64 {
        writerState.withLock { writer in
            writer.sequence += 1
            return writer.sequence
        }
    }

    /// Gives back the sequence just allocated when nothing was written with it (writer only).
    func releaseSequence() {
        writerState.withLock { $0.sequence -= 1 }
    }

    /// Records changed documents for the post-commit notification (writer only).
    func noteChanges(collection: String, ids: [String]) {
        guard !ids.isEmpty else { return }
        writerState.withLock { $0.pendingChanges[collection, default: []].append(contentsOf: ids) }
    }
}

/// Where a collection's tables are.
struct CollectionInfo: Sendable {
    let id: Int64
    let scope: String
    let name: String
    let fullName: String
    /// The collection's table names and hot-path SQL, built once.
    let sql: Collection.SQL

    init(id: Int64, scope: String, name: String) {
        self.id = id
        self.scope = scope
        self.name = name
        fullName = "\(scope).\(name)"
        sql = Collection.SQL(collectionID: id)
    }
}

/// A lower-level error kept as text when it is not itself Sendable.
struct UnderlyingError: Error, Sendable, CustomStringConvertible {
    let description: String
}
