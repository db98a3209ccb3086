public import Foundation
import SetteeCore

/// Couchbase Lite's database-level API: the default names, files by name, copies, maintenance.
extension Database {
    /// The default scope's name, `_default`.
    public static let defaultScopeName = Scope.defaultScopeName
    /// The default collection's name, `_default`.
    public static let defaultCollectionName = Collection.defaultCollectionName

    /// Whether the database `name` exists in `directory` (default: the current directory, where
    /// `DatabaseConfiguration()` puts databases).
    public static func exists(withName name: String, inDirectory directory: String? = nil) -> Bool {
        exists(name: name, inDirectory: directory ?? DatabaseConfiguration().directory)
    }

    /// Deletes the closed database `name` in `directory`.
    /// - Throws: ``SetteeError`` `.notFound` when there is no such database.
    public static func delete(withName name: String, inDirectory directory: String? = nil) throws {
        try delete(name: name, inDirectory: directory ?? DatabaseConfiguration().directory)
    }

    /// Copies a closed database's file at `path` (a `.settee` file, or a directory holding one) to a new
    /// database `name` in `config.directory` (Couchbase Lite's `Database.copy`, used to ship a pre-built
    /// database with an app). The copy gets a new ``uuid``, so replication peers see it as a database of its own.
    /// - Throws: ``SetteeError`` `.notFound` when nothing is at `path`, `.conflict` when `name` exists.
    public static func copy(fromPath path: String, toDatabase name: String, withConfig config: DatabaseConfiguration?) throws {
        let config = config ?? DatabaseConfiguration()
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw SetteeError(.notFound, "No database at \(path)")
        }
        var source = path
        if isDirectory.boolValue {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            guard let file = files.first(where: { Database.name(fromFile: $0) != nil }) else {
                throw SetteeError(.notFound, "No database in \(path)")
            }
            source = (path as NSString).appendingPathComponent(file)
        }
        guard !exists(name: name, inDirectory: config.directory) else {
            throw SetteeError(.conflict, "Database \(name) already exists")
        }
        try FileManager.default.createDirectory(atPath: config.directory, withIntermediateDirectories: true)
        let target = filePath(name: name, directory: config.directory)
        do {
            for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: source + suffix) {
                try FileManager.default.copyItem(atPath: source + suffix, toPath: target + suffix)
            }
            // Open once to fold the WAL in and give the copy its own identity.
            let copy = try Database(name: name, config: config)
            try copy.resetIdentity()
            copy.close()
        } catch {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: target + suffix) }
            throw error
        }
    }
}

extension Database {
    /// Gives the database a new ``uuid`` (a copy is a database of its own; the next open reads the new one).
    fileprivate func resetIdentity() throws {
        try write { db in
            try db.prepare("UPDATE meta SET value = ? WHERE key = 'uuid'").run([.text(Hex.random(bytes: 16))])
        }
    }
}

/// What ``Database/performMaintenance(type:)`` does (Couchbase Lite's `MaintenanceType`).
public enum MaintenanceType: UInt8, Sendable {
    /// Drops old revision bodies and unreferenced attachments, and gives the space back (``Database/compact()``).
    case compact
    /// Rebuilds SQLite's b-trees of the documents and indexes from their tables (`REINDEX`).
    case reindex
    /// Checks the file's structure (`PRAGMA integrity_check`); throws when it finds damage.
    case integrityCheck
    /// Refreshes the query planner's statistics where they are stale (`PRAGMA optimize`).
    case optimize
    /// Recomputes every statistic (`ANALYZE`), then optimizes.
    case fullOptimize
}

extension Database {
    /// Runs a maintenance task (Couchbase Lite's `performMaintenance(type:)`).
    /// - Throws: ``SetteeError`` `.storage` when the integrity check finds damage or SQLite fails.
    public func performMaintenance(type: MaintenanceType) throws {
        switch type {
        case .compact:
            try compact()
        case .reindex:
            try write { db in try db.execute("REINDEX") }
        case .integrityCheck:
            let problems: [String] = try read { db in
                let stmt = try db.prepare("PRAGMA integrity_check")
                defer { stmt.reset() }
                var out: [String] = []
                while try stmt.step() { if let line = stmt.string(0), line != "ok" { out.append(line) } }
                return out
            }
            if !problems.isEmpty {
                throw SetteeError(.storage, "Integrity check of \(name) failed: \(problems.prefix(5).joined(separator: "; "))")
            }
        case .optimize:
            try write { db in try db.execute("PRAGMA optimize") }
        case .fullOptimize:
            try write { db in try db.execute("ANALYZE; PRAGMA optimize") }
        }
    }
}

extension Database {
    /// Stores a blob's content without a document (Couchbase Lite's `saveBlob(blob:)`), so its metadata can be
    /// put in documents later. Content no document refers to is dropped by the next compaction.
    public func saveBlob(blob: Blob) throws {
        let prepared = try blob.prepareSave(into: self)
        if let data = prepared.data {
            try write { db in
                try db.prepare("INSERT OR IGNORE INTO blobs(digest, length, data, encoding) VALUES (?, ?, ?, NULL)")
                    .run([.text(prepared.digest), .integer(Int64(data.count)), .blob(data)])
            }
        }
        blob.didSave(in: self)
    }

    /// The blob that metadata describes, if the database has its content (Couchbase Lite's
    /// `getBlob(properties:)`).
    /// - Throws: ``SetteeError`` `.badRequest` when `properties` are not blob metadata (`@type` `blob`, a `digest`).
    public func getBlob(properties: [String: Any]) throws -> Blob? {
        guard case .object(let metadata) = DocumentValue.json(properties), Blob.isBlob(metadata),
              let digest = metadata["digest"]?.stringValue else {
            throw SetteeError(.badRequest, "The properties do not describe a blob")
        }
        guard try blobInfo(digest: digest) != nil else { return nil }
        return Blob(stored: metadata, database: self)
    }
}

/// What one commit changed in the default collection (Couchbase Lite's `DatabaseChange`, from before collections).
public struct DatabaseChange: Sendable {
    public let database: Database
    public let documentIDs: [String]
}

/// Couchbase Lite's database-level document API, from before collections: each call works on the default
/// collection (deprecated there in favour of `Collection`'s, and kept so older code compiles).
extension Database {
    private var defaults: Collection {
        get throws { try defaultCollection() }
    }

    /// The default collection's document `id`, nil when absent (or the database is closed).
    public func document(withID id: String) -> Document? { try? defaults.document(id: id) }

    /// The default collection's document `id` as a ``DocumentFragment``.
    public subscript(id: String) -> DocumentFragment { DocumentFragment(document(withID: id)) }

    /// Documents in the default collection.
    public var count: UInt64 { (try? defaults.count) ?? 0 }

    public func saveDocument(_ document: MutableDocument) throws { try defaults.save(document: document) }

    @discardableResult
    public func saveDocument(_ document: MutableDocument, concurrencyControl: ConcurrencyControl) throws -> Bool {
        try defaults.save(document: document, concurrencyControl: concurrencyControl)
    }

    @discardableResult
    public func saveDocument(_ document: MutableDocument,
                             conflictHandler: (MutableDocument, Document?) throws -> Bool) throws -> Bool {
        try defaults.save(document: document, conflictHandler: conflictHandler)
    }

    public func deleteDocument(_ document: Document) throws { try defaults.delete(document: document) }

    @discardableResult
    public func deleteDocument(_ document: Document, concurrencyControl: ConcurrencyControl) throws -> Bool {
        try defaults.delete(document: document, concurrencyControl: concurrencyControl)
    }

    public func purgeDocument(_ document: Document) throws { try defaults.purge(document: document) }

    public func purgeDocument(withID id: String) throws { try defaults.purge(id: id) }

    public func setDocumentExpiration(withID id: String, expiration: Date?) throws {
        try defaults.setDocumentExpiration(id: id, expiration: expiration)
    }

    public func getDocumentExpiration(withID id: String) -> Date? { try? defaults.getDocumentExpiration(id: id) }

    /// Calls `listener` after each commit that changed the default collection.
    @discardableResult
    public func addChangeListener(withQueue queue: DispatchQueue?,
                                  listener: @escaping @Sendable (DatabaseChange) -> Void) -> ListenerToken {
        guard let collection = try? defaults else { return ListenerToken {} }
        return collection.addChangeListener(queue: queue) { [self] change in
            listener(DatabaseChange(database: self, documentIDs: change.documentIDs))
        }
    }

    /// Calls `listener` after each commit that changed the default collection.
    @discardableResult
    public func addChangeListener(_ listener: @escaping @Sendable (DatabaseChange) -> Void) -> ListenerToken {
        addChangeListener(withQueue: nil, listener: listener)
    }

    /// Calls `listener` after each commit that changed the default collection's document `id`.
    @discardableResult
    public func addDocumentChangeListener(withID id: String, queue: DispatchQueue? = nil,
                                          listener: @escaping @Sendable (DocumentChange) -> Void) -> ListenerToken {
        guard let collection = try? defaults else { return ListenerToken {} }
        return collection.addDocumentChangeListener(id: id, queue: queue, listener: listener)
    }

    /// Stops a listener (the same as `token.remove()`).
    public func removeChangeListener(withToken token: ListenerToken) { token.remove() }
}
