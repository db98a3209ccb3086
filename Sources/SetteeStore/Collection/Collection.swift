public import Foundation
import SetteeCore

/// A named set of documents inside a ``Database`` (Couchbase Lite's `Collection`).
///
/// Every database has the default collection `_default._default`; others are made with
/// ``Database/createCollection(name:scope:)``. A `Collection` keeps its database open.
///
/// ```swift
/// let users = try db.createCollection(name: "users", scope: "app")
/// let doc = MutableDocument(id: "u1", data: ["name": "Ada"])
/// try users.save(document: doc)
/// print(try users.document(id: "u1")?.string(forKey: "name") ?? "")
/// ```
///
/// Threading: safe from any thread (see ``Database``).
public final class Collection: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// The database holding this collection.
    public let database: Database
    /// The collection's name.
    public let name: String
    /// The name of the collection's scope.
    public let scopeName: String
    /// The collection's scope (Couchbase Lite's `Collection.scope`).
    public var scope: Scope { Scope(name: scopeName, database: database) }
    /// The default collection's name, `_default`.
    public static let defaultCollectionName = "_default"
    package let id: Int64
    package let docsTable: String
    let localTable: String
    let archiveTable: String
    /// `scope.name`, e.g. `_default._default`.
    public let fullName: String
    /// SQL of the hot paths, built once.
    let sql: SQL

    init(database: Database, info: CollectionInfo) {
        self.database = database
        self.id = info.id
        self.scopeName = info.scope
        self.name = info.name
        self.docsTable = info.sql.table
        self.localTable = info.sql.localTable
        self.archiveTable = info.sql.archiveTable
        self.fullName = info.fullName
        self.sql = info.sql
    }

    /// The statements every write and read uses, per collection table.
    struct SQL: Sendable {
        let lookup: String
        let fetchBody: String
        let insert: String
        let insertIfAbsent: String
        let updateAll: String
        let updateTree: String
        let recordWithTree: String
        let record: String
        /// Archives replaced revisions' bodies (one row; ``archiveMany``: a group of rows), with ids the writer
        /// assigns (``archiveNextID``) and the link to the document's archived revision before.
        let archiveBody: String
        let archiveMany: String
        let archiveNextID: String
        /// One archived revision by its rowid: (doc, rev, body, prev).
        let archived: String

        let table: String
        let localTable: String
        let archiveTable: String

        init(collectionID: Int64) {
            let table = "docs_\(collectionID)"
            self.table = table
            localTable = "local_\(collectionID)"
            let archive = "revs_\(collectionID)"
            archiveTable = archive
            lookup = "SELECT rowid, tree, arch, rev, body FROM \(table) WHERE id = ?"
            fetchBody = "SELECT body FROM \(table) WHERE rowid = ?"
            insert = "INSERT INTO \(table)(id, seq, rev, flags, body, tree) VALUES (?, ?, ?, ?, ?, ?)"
            insertIfAbsent = "INSERT INTO \(table)(id, seq, rev, flags, body, tree) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING"
            // `arch`: the newest archived revision of the document, when this write archived one (else unchanged).
            updateAll = "UPDATE \(table) SET seq = ?, rev = ?, flags = ?, body = ?, tree = ?, arch = coalesce(?, arch) WHERE rowid = ?"
            updateTree = "UPDATE \(table) SET seq = ?, flags = \(DocumentTable.flagsKeepingAttachments), tree = ?, arch = coalesce(?, arch) WHERE rowid = ?"
            recordWithTree = "SELECT seq, rev, flags, body, tree, rowid, arch FROM \(table) WHERE id = ?"
            record = "SELECT seq, rev, flags, body FROM \(table) WHERE id = ?"
            archiveBody = "INSERT INTO \(archive)(id, doc, rev, body, prev) VALUES (?, ?, ?, ?, ?)"
            archiveMany = "INSERT INTO \(archive)(id, doc, rev, body, prev) VALUES "
                + Array(repeating: "(?, ?, ?, ?, ?)", count: WriteSession.archiveGroup).joined(separator: ", ")
            archiveNextID = "SELECT coalesce(max(id), 0) + 1 FROM \(archive)"
            archived = "SELECT doc, rev, body, prev FROM \(archive) WHERE id = ?"
        }
    }

    public var description: String { "Collection(\(database.name).\(fullName))" }

    public static func == (a: Collection, b: Collection) -> Bool {
        a.database === b.database && a.id == b.id
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(database))
        hasher.combine(id)
    }

    /// Number of live (not deleted) documents.
    public var count: UInt64 {
        UInt64((try? documentCounts().live) ?? 0)
    }

    /// Counts for database info: live documents, deleted documents. (All rows from the smallest index, tombstones
    /// from their partial index: no row is read.) The count reads the whole id index, through SQLite's bounded page
    /// cache rather than the reader's memory map, where every page read would stay mapped: at a million documents a
    /// `GET /{db}` grew the node's resident memory by 90 MB.
    public func documentCounts() throws -> (live: Int, deleted: Int) {
        try database.read { db in
            let counts = try db.withoutMemoryMap { try rowCounts(db) }
            return (counts.all - counts.deleted, counts.deleted)
        }
    }

    /// All rows and tombstones, optionally only those whose id satisfies `idCondition` (e.g. ` AND id < ?`, bound to
    /// `bound`): a count of the id index and one of the tombstones' partial index (schema 4), no row read.
    /// (`INDEXED BY`: with an id condition SQLite would otherwise count tombstones through the id index, reading
    /// every row.)
    func rowCounts(_ db: Connection, idCondition: String = "", bound: String? = nil) throws -> (all: Int, deleted: Int) {
        func count(_ sql: String) throws -> Int {
            let stmt = try db.prepare(sql)
            defer { stmt.reset() }
            if let bound { stmt.bind(bound, at: 1) }
            return try stmt.step() ? stmt.int(0) : 0
        }
        return (try count("SELECT count(*) FROM \(docsTable) WHERE 1\(idCondition)"),
                try count("SELECT count(*) FROM \(docsTable) INDEXED BY \(docsTable)_deleted WHERE \(DocumentTable.tombstoneIndexCondition)\(idCondition)"))
    }

    /// Live and deleted documents whose ids fall in `[low, high)` (a partition's range, `p:` to `p;`), and their
    /// size as CouchDB's `sizes.external` counts it (winning revisions' bodies, tombstones included, and attachments).
    public func documentCounts(from low: String, below high: String) throws -> (live: Int, deleted: Int, bytes: Int) {
        try database.read { db in
            let stmt = try db.prepare("SELECT count(*), coalesce(sum(\(DocumentTable.deletedBit())), 0), \(Collection.externalSizeSQL) FROM \(docsTable) WHERE id >= ? AND id < ?")
            defer { stmt.reset() }
            stmt.bind(low, at: 1)
            stmt.bind(high, at: 2)
            guard try stmt.step() else { return (0, 0, 0) }
            let total = stmt.int(0), deleted = stmt.int(1)
            return (total - deleted, deleted, stmt.int(2))
        }
    }

    // MARK: Listeners

    /// Calls `listener` after each commit that changed documents in this collection.
    ///
    /// - Parameter queue: where the listener runs (default: a private serial queue of its own).
    /// - Returns: a token; call `remove()` on it to stop.
    @discardableResult
    public func addChangeListener(queue: DispatchQueue?,
                                  listener: @escaping @Sendable (CollectionChange) -> Void) -> ListenerToken {
        database.notifier.addListener(collection: self, documentID: nil,
                                      queue: queue ?? DispatchQueue(label: "settee.listener"), listener)
    }

    /// Calls `listener`, on a private serial queue of its own, after each commit that changed documents in this
    /// collection.
    @discardableResult
    public func addChangeListener(listener: @escaping @Sendable (CollectionChange) -> Void) -> ListenerToken {
        addChangeListener(queue: nil, listener: listener)
    }

    /// Couchbase Lite's spelling of ``addChangeListener(queue:listener:)``.
    @discardableResult
    public func addChangeListener(withQueue queue: DispatchQueue?,
                                  listener: @escaping @Sendable (CollectionChange) -> Void) -> ListenerToken {
        addChangeListener(queue: queue, listener: listener)
    }

    /// Calls `listener` after each commit that changed the document `id`.
    @discardableResult
    public func addDocumentChangeListener(id: String, queue: DispatchQueue? = nil,
                                          listener: @escaping @Sendable (DocumentChange) -> Void) -> ListenerToken {
        database.notifier.addListener(collection: self, documentID: id,
                                      queue: queue ?? DispatchQueue(label: "settee.listener")) { change in
            listener(DocumentChange(collection: change.collection, documentID: id, sequence: change.sequence))
        }
    }

    /// Stops a listener (the same as `token.remove()`).
    public func removeChangeListener(withToken token: ListenerToken) { token.remove() }
}

/// Something whose document changes can be listened to (Couchbase Lite's `CollectionChangeObservable`): a
/// ``Collection``. Listeners are `@Sendable`: they run on the queue given, or a private one.
public protocol CollectionChangeObservable {
    func addChangeListener(listener: @escaping @Sendable (CollectionChange) -> Void) -> ListenerToken
    func addChangeListener(queue: DispatchQueue?, listener: @escaping @Sendable (CollectionChange) -> Void) -> ListenerToken
}

extension Collection: CollectionChangeObservable {}
