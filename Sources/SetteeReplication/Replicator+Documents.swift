public import Foundation
import SetteeCore
public import SetteeStore

/// Documents a replicator pushed or pulled in one batch (Couchbase Lite's `DocumentReplication`).
public struct DocumentReplication: Sendable {
    public let replicator: Replicator
    /// True for documents pushed to the target, false for ones pulled from it.
    public let isPush: Bool
    public let documents: [ReplicatedDocument]
}

/// One replicated document (Couchbase Lite's `ReplicatedDocument`).
public struct ReplicatedDocument: Sendable {
    /// The document id.
    public let id: String
    public let flags: DocumentFlags
    /// Why the document failed to replicate (the peer's `{error, reason}`), nil when it replicated.
    public let error: ReplicationError?
    /// The collection's scope name.
    public let scope: String
    /// The collection's name.
    public let collection: String
}

extension Replicator {
    /// Calls `listener` with the documents of each batch pushed or pulled, failures included (Couchbase Lite's
    /// `addDocumentReplicationListener`). Runs on `queue` when one is given, else on the replicator's thread.
    @discardableResult
    public func addDocumentReplicationListener(withQueue queue: DispatchQueue? = nil,
                                               _ listener: @escaping @Sendable (DocumentReplication) -> Void) -> ListenerToken {
        addDocumentListener(queue: queue, listener)
    }

    /// Ids of the local documents of `collection` changed since the push last checkpointed — the ones a push
    /// would still send (Couchbase Lite's `pendingDocumentIds(collection:)`). Filters by the collection's
    /// `documentIDs` and push filter.
    /// - Throws: ``ReplicationError`` `.badRequest` for a pull-only replicator or a collection it does not replicate.
    public func pendingDocumentIds(collection: SetteeStore.Collection) throws -> Set<String> {
        guard config.replicatorType != .pull else {
            throw ReplicationError(.badRequest, "A pull-only replicator has no pending documents")
        }
        guard let collectionConfig = config.collectionConfig(collection) else {
            throw ReplicationError(.badRequest, "The replicator does not replicate \(collection.fullName)")
        }
        let target = try ReplicatorConfiguration.endpoint(for: collection, target: try config.resolvedTarget())
        let options = config.options(for: collectionConfig, pull: false, reset: false)
        let replicationID = Replication(source: LocalEndpoint(collection: collection), target: target, options: options).replicationID
        let checkpoint = try collection.localDocument(id: "_local/" + replicationID)
        let since = UInt64(clamping: checkpoint?.body["source_last_seq"]?.intValue ?? 0)
        var changes = Collection.ChangesOptions(since: since)
        changes.documentIDs = options.documentIDs
        changes.includeDocs = collectionConfig.pushFilter != nil
        var pending = Set<String>()
        try collection.forEachChange(changes) { row in
            if let filter = collectionConfig.pushFilter {
                let body = row.body.flatMap { try? DocumentRecord.parseBody($0) } ?? JSONObject()
                let document = Document(id: row.id, revisionID: row.rev.description, sequence: row.sequence,
                                        deleted: row.deleted, properties: body, collection: collection)
                guard filter(document, row.deleted ? .deleted : []) else { return true }
            }
            pending.insert(row.id)
            return true
        }
        return pending
    }

    /// The pending documents of the default collection (Couchbase Lite's pre-collections form).
    public func pendingDocumentIds() throws -> Set<String> {
        guard let collection = config.collections.first(where: { $0.scopeName == Scope.defaultScopeName
            && $0.name == Collection.defaultCollectionName }) else {
            throw ReplicationError(.badRequest, "The replicator does not replicate the default collection")
        }
        return try pendingDocumentIds(collection: collection)
    }

    /// Whether the document `documentID` of the default collection is still to be pushed.
    public func isDocumentPending(_ documentID: String) throws -> Bool {
        try pendingDocumentIds().contains(documentID)
    }

    /// Whether the document `documentID` of `collection` is still to be pushed (Couchbase Lite's
    /// `isDocumentPending(_:collection:)`).
    public func isDocumentPending(_ documentID: String, collection: SetteeStore.Collection) throws -> Bool {
        try pendingDocumentIds(collection: collection).contains(documentID)
    }
}

extension ReplicationError {
    /// A document the peer refused: `forbidden` (403, a validation function), `unauthorized` (401), else
    /// `badRequest` with the peer's error and reason.
    static func document(_ failure: DocumentFailure) -> ReplicationError {
        switch failure.error {
        case "forbidden": return ReplicationError(.forbidden, failure.reason, status: 403)
        case "unauthorized": return ReplicationError(.unauthorized, failure.reason, status: 401)
        default: return ReplicationError(.badRequest, "\(failure.error): \(failure.reason)")
        }
    }
}

extension ReplicationError: CustomNSError {
    public static var errorDomain: String { CBLError.domain }

    /// The Couchbase Lite code of the failure: HTTP statuses as `CBLError.httpBase` + status, TLS failures as
    /// `tlsCertUntrusted`, an unreachable peer as `networkBase`.
    public var errorCode: Int {
        switch kind {
        case .unauthorized: CBLError.httpAuthRequired
        case .forbidden: CBLError.httpForbidden
        case .notFound: CBLError.httpNotFound
        case .tls: CBLError.tlsCertUntrusted
        case .unreachable: CBLError.networkBase
        case .unsupported: CBLError.httpNotImplemented
        case .transient, .badRequest, .cancelled: status.map { CBLError.httpBase + $0 } ?? CBLError.remoteError
        case .local: CBLError.unexpectedError
        }
    }

    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: message] }
}
