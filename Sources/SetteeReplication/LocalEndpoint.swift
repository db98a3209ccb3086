import Foundation
public import SetteeCore
public import SetteeStore

/// A collection of a database in this process as a replication endpoint: the replicator reads and writes
/// it through the store's API directly, with no HTTP and no JSON round trip of the documents' envelopes.
///
/// Store work runs on the store's offload queue, never on the caller's executor. A long-polling
/// ``changes(_:)`` waits on the database's commit notifications (the local commit feed).
public struct LocalEndpoint: Endpoint {
    public let collection: SetteeStore.Collection
    /// Runs a design document's filter function (`ddoc/name`) on a document (with `_id`, `_rev`, `_deleted`), given
    /// the replication's query parameters. The replication layer runs no JavaScript: a node supplies this.
    public typealias FilterEvaluator = @Sendable (_ collection: SetteeStore.Collection, _ filter: String,
                                                  _ queryParams: [String: String], _ document: JSON) throws -> Bool
    public var filterEvaluator: FilterEvaluator?
    /// Matches a replication's `selector` against a document. Nil: ``MangoSelector/matches(_:)`` (strings by
    /// Unicode scalar); a node supplies CouchDB's order (ICU's collation), which this layer doesn't link.
    package typealias SelectorMatcher = @Sendable (_ selector: MangoSelector, _ document: JSON) -> Bool
    package var selectorMatcher: SelectorMatcher?
    /// The largest document body (its JSON, stubs included) this endpoint stores as a replication target; larger
    /// is a per-document `too_large` failure, as a node's `--max-document-size` makes it over HTTP.
    public var maxDocumentSize = Int.max
    /// The largest attachment (its own length) this endpoint stores as a replication target; larger is a
    /// per-document `attachment_too_large` failure naming it, as `--max-attachment-size` makes it over HTTP.
    public var maxAttachmentSize = Int.max
    /// On whose behalf replicated revisions are written here (CouchDB's replication `user_ctx`): the database's
    /// write rules (``Database/admission``: a node's `validate_doc_update`, `_users` rules) judge them as this
    /// user's. Default: the database's owner.
    package var writeContext: WriteContext = .owner

    /// The default collection of `database` (Couchbase Lite's `DatabaseEndpoint(database:)`). The database must
    /// be open: a closed one stops the program, as using a closed database does in Couchbase Lite.
    public init(database: Database) {
        do {
            self.collection = try database.defaultCollection()
        } catch {
            preconditionFailure("DatabaseEndpoint of a closed database \(database.name): \(error)")
        }
    }

    public init(collection: SetteeStore.Collection) {
        self.collection = collection
    }

    /// The database of the collection replicated with (Couchbase Lite's `DatabaseEndpoint.database`).
    public var database: Database { collection.database }

    public var identity: String { "local:\(collection.database.uuid)/\(collection.fullName)" }

    public var displayName: String {
        collection.fullName == "_default._default" ? collection.database.name
            : "\(collection.database.name).\(collection.fullName)"
    }

    public func databaseInfo() async throws(ReplicationError) -> EndpointDatabaseInfo {
        try await ReplicationError.mapping {
            let c = collection
            return try await offload {
                let counts = try c.documentCounts()
                return EndpointDatabaseInfo(name: c.database.name, updateSeq: .int(Int64(c.database.lastSequence)),
                                            docCount: counts.live, instanceStartTime: "0")
            }
        }
    }

    public func createDatabase() async throws(ReplicationError) {}

    public func changes(_ request: ChangesRequest) async throws(ReplicationError) -> ChangesBatch {
        try await ReplicationError.mapping {
            let since: UInt64
            switch request.since {
            case .int(let i): since = UInt64(max(0, i))
            case .string(let s): since = UInt64(s.prefix { $0.isNumber }) ?? 0
            default: since = 0
            }
            guard case .longpoll(let timeout, _) = request.feed else { return try await read(since: since, request) }
            let deadline = ContinuousClock.now + timeout
            while true {
                // Subscribe before reading so a commit between the read and the wait is not missed. Each round
                // uses a fresh stream: cancelling a wait ends the stream it waited on.
                let commits = collection.database.commits()
                let batch = try await read(since: since, request)
                let remaining = deadline - ContinuousClock.now
                if !batch.results.isEmpty || remaining <= .zero { return batch }
                let woke = try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        for await _ in commits { return true }
                        return false
                    }
                    group.addTask {
                        try await Task.sleep(for: remaining)
                        return false
                    }
                    let result = try await group.next() ?? false
                    group.cancelAll()
                    return result
                }
                if !woke { return try await read(since: since, request) }
            }
        }
    }

    private func read(since: UInt64, _ request: ChangesRequest) async throws -> ChangesBatch {
        let c = collection
        let selector = try request.selector.map { try MangoSelector($0) }
        var filterFunction: (@Sendable (JSON) throws -> Bool)?
        if let name = request.filter {
            guard let evaluator = filterEvaluator else {
                throw ReplicationError(.badRequest, "filter \(name): filter functions need a node that runs them")
            }
            let params = request.queryParams, c = collection
            filterFunction = { doc in try evaluator(c, name, params, doc) }
        }
        let filter = filterFunction
        return try await offload {
            var options = Collection.ChangesOptions(since: since)
            options.allLeaves = true
            options.documentIDs = request.documentIDs
            options.includeDocs = selector != nil || filter != nil
            if selector == nil && filter == nil { options.limit = request.limit }
            var rows: [ChangeEntry] = []
            var last = since
            try c.forEachChange(options) { row in
                last = row.sequence
                if selector != nil || filter != nil {
                    var doc = JSONObject()
                    if let body = row.body, case .object(let o) = try JSON.parse(body) { doc = o }
                    doc["_id"] = .string(row.id)
                    doc["_rev"] = .string(row.rev.description)
                    if row.deleted { doc["_deleted"] = true }
                    if let selector, !(selectorMatcher?(selector, .object(doc)) ?? selector.matches(.object(doc))) {
                        return true  // an empty batch means caught up
                    }
                    if let filter, try !filter(.object(doc)) { return true }
                }
                rows.append(ChangeEntry(seq: .int(Int64(row.sequence)), id: row.id, revs: row.leaves ?? [row.rev],
                                        deleted: row.deleted))
                return rows.count < request.limit
            }
            return ChangesBatch(results: rows, lastSeq: .int(Int64(last)))
        }
    }

    public func revsDiff(_ revisions: [(id: String, revs: [RevID])]) async throws(ReplicationError) -> [String: RevTree.RevsDiff] {
        try await ReplicationError.mapping {
            let c = collection
            return try await offload {
                var out: [String: RevTree.RevsDiff] = [:]
                for (id, diff) in try c.revsDiff(revisions) { out[id] = diff }
                return out
            }
        }
    }

    public func fetch(_ requests: [FetchRequest]) async throws(ReplicationError) -> [ReplicatedRevision] {
        try await ReplicationError.mapping {
            let c = collection
            return try await offload {
                var out: [ReplicatedRevision] = []
                out.reserveCapacity(requests.count)
                // One read for the batch (one snapshot, the read locks taken once).
                let records = try c.records(ids: requests.map(\.id), withTree: true)
                for (request, record) in zip(requests, records) {
                    guard let record, let tree = record.tree else { continue }
                    for (rev, found) in record.openRevisions(request.revs, latest: true) where found {
                        guard let revision = record.revision(rev),
                              case .object(var body) = try JSON.parse(revision.body) else { continue }
                        let history = tree.history(of: rev)
                        var blobs: [String: [UInt8]] = [:]
                        var staged: [String: StagedAttachment] = [:]
                        var encodings: [String: String] = [:]
                        if case .object(let atts)? = body["_attachments"] {
                            // Only attachments newer than the newest ancestor the target has travel with the revision.
                            let known = Set(history)
                            let knownGeneration = request.attsSince.filter { known.contains($0) }.map(\.generation).max() ?? 0
                            var stubs = JSONObject()
                            for (name, meta) in atts {
                                guard case .object(var m) = meta else { continue }
                                m["stub"] = true
                                m.removeValue(forKey: "data")
                                // Bodies travel as stored (a gzip-stored one stays gzip).
                                if Int(m["revpos"]?.intValue ?? 0) > knownGeneration, let digest = m["digest"]?.stringValue,
                                   let info = try c.database.blobInfo(digest: digest) {
                                    if info.length > StagedAttachment.threshold {
                                        // A large body travels in a staging file, copied out a megabyte at a time.
                                        staged[digest] = try LocalEndpoint.stage(digest: digest, length: info.length, from: c.database)
                                    } else if let stored = try c.database.storedBlob(digest: digest) {
                                        blobs[digest] = stored.data
                                    }
                                    if let encoding = info.encoding { encodings[digest] = encoding }
                                }
                                stubs[name] = .object(m)
                            }
                            body["_attachments"] = .object(stubs)
                        }
                        var replicated = ReplicatedRevision(id: record.id, history: history, deleted: revision.deleted,
                                                            body: body, attachments: blobs)
                        replicated.attachmentEncodings = encodings
                        replicated.stagedAttachments = staged
                        out.append(replicated)
                    }
                }
                return out
            }
        }
    }

    /// Purges the documents (those present): a pull's auto-purge of documents the user lost access to.
    func purge(_ ids: [String]) async throws(ReplicationError) {
        try await ReplicationError.mapping {
            let c = collection
            try await offload {
                for id in ids where try c.record(id: id) != nil { try c.purge(id: id) }
            }
        }
    }

    public func write(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> [DocumentFailure] {
        try await ReplicationError.mapping {
            let c = collection
            let context = writeContext
            return try await offload {
                var failures: [DocumentFailure] = []
                var writes: [RevisionWrite] = []
                writes.reserveCapacity(revisions.count)
                for revision in revisions {
                    if let refusal = refusal(of: revision) {
                        failures.append(refusal)
                        continue
                    }
                    do {
                        writes.append(try LocalEndpoint.revisionWrite(revision, collection: c))
                    } catch let error as SetteeError {
                        failures.append(DocumentFailure(id: revision.id, rev: revision.rev.description,
                                                        error: error.couchName, reason: error.reason))
                    }
                }
                let outcomes = try c.write(writes, as: context)
                for (write, outcome) in zip(writes, outcomes) {
                    if case .failure(let error) = outcome {
                        let rev = if case .replicated(let h) = write.mode { h.first?.description } else { nil as String? }
                        failures.append(DocumentFailure(id: write.id, rev: rev, error: error.couchName, reason: error.reason))
                    }
                }
                return failures
            }
        }
    }

    /// A stored attachment body copied into a staging file a megabyte at a time, or nil if it is gone (compacted
    /// away meanwhile).
    static func stage(digest: String, length: Int, from db: Database) throws -> StagedAttachment? {
        let file = try StagingFile(directory: StagedAttachment.directory, compressingAt: nil)
        var offset = 0
        while offset < length {
            guard let piece = try db.readBlob(digest: digest, offset: offset, count: min(1 << 20, length - offset)),
                  !piece.isEmpty else { return nil }
            try piece.withUnsafeBytes { try file.append($0) }
            offset += piece.count
        }
        let blob = try file.finish()
        return StagedAttachment(path: blob.path, length: blob.length)
    }

    /// The refusal of a revision past this endpoint's size limits, or nil.
    func refusal(of revision: ReplicatedRevision) -> DocumentFailure? {
        if maxAttachmentSize < .max, case .object(let atts)? = revision.body["_attachments"] {
            for (name, meta) in atts {
                guard let digest = meta["digest"]?.stringValue,
                      let carried = revision.attachments[digest]?.count ?? revision.stagedAttachments[digest]?.length else { continue }
                let length = meta["length"]?.intValue.map(Int.init) ?? carried
                if length > maxAttachmentSize {
                    return DocumentFailure(id: revision.id, rev: revision.rev.description, error: "attachment_too_large",
                                           reason: name)
                }
            }
        }
        if maxDocumentSize < .max, JSON.object(revision.body).serializedBytes.count > maxDocumentSize {
            return DocumentFailure(id: revision.id, rev: revision.rev.description, error: "too_large",
                                   reason: "the document is larger than the target accepts")
        }
        return nil
    }

    /// The store write for a replicated revision. Attachment stubs must name a body the store has, one that
    /// travels with the revision, or an attachment of the same name the document already has.
    static func revisionWrite(_ revision: ReplicatedRevision, collection c: SetteeStore.Collection) throws -> RevisionWrite {
        var body = revision.body
        var blobs: [(digest: String, data: [UInt8])] = []
        var staged: [StagedBlob] = []
        if case .object(var atts)? = body["_attachments"], !atts.isEmpty {
            var unknown: [(name: String, digest: String)] = []
            var digests: [String] = []
            for (name, meta) in atts {
                guard case .object(let m) = meta, let digest = m["digest"]?.stringValue else {
                    throw SetteeError(.missingStub, "Invalid attachment stub in \(revision.id) for \(name)")
                }
                if let data = revision.attachments[digest] {
                    blobs.append((digest, data))
                } else if let file = revision.stagedAttachments[digest] {
                    // Copied from its file a megabyte at a time (the revision keeps the file until written).
                    staged.append(StagedBlob(digest: digest, path: file.path, length: file.length,
                                             encoding: revision.attachmentEncodings[digest]))
                } else {
                    digests.append(digest)
                    unknown.append((name, digest))
                }
            }
            if !unknown.isEmpty {
                let present = try c.database.existingBlobs(digests)
                var existing: JSONObject?
                for (name, digest) in unknown where !present.contains(digest) {
                    // A peer may describe an attachment we hold under another digest (CouchDB digests the
                    // stored, possibly compressed form): match it by name among the document's revisions.
                    if existing == nil { existing = try existingAttachments(of: revision.id, collection: c) }
                    guard let previous = existing?[name] else {
                        throw SetteeError(.missingStub, "Invalid attachment stub in \(revision.id) for \(name)")
                    }
                    atts[name] = previous
                }
                body["_attachments"] = .object(atts)
            }
        }
        var write = RevisionWrite(id: revision.id, body: body, deleted: revision.deleted,
                                  mode: .replicated(history: revision.history), blobs: blobs)
        for (digest, _) in blobs { if let encoding = revision.attachmentEncodings[digest] { write.blobEncodings[digest] = encoding } }
        write.stagedBlobs = staged
        return write
    }

    /// Attachments of every stored revision of a document, by name (newest revision first wins).
    static func existingAttachments(of id: String, collection c: SetteeStore.Collection) throws -> JSONObject {
        guard let record = try c.record(id: id, withTree: true), let tree = record.tree else { return [:] }
        var out = JSONObject()
        for node in tree.nodes.sorted(by: { $0.rev.generation > $1.rev.generation }) {
            guard let revision = record.revision(node.rev), case .object(let body) = try JSON.parse(revision.body),
                  case .object(let atts)? = body["_attachments"] else { continue }
            for (name, meta) in atts where out[name] == nil { out[name] = meta }
        }
        return out
    }

    public func localDocument(id: String) async throws(ReplicationError) -> JSONObject? {
        try await ReplicationError.mapping {
            let c = collection
            return try await offload {
                guard let doc = try c.localDocument(id: id) else { return nil }
                var body = doc.body
                body["_id"] = .string(doc.id)
                body["_rev"] = .string(doc.rev)
                return body
            }
        }
    }

    public func putLocalDocument(id: String, body: JSONObject) async throws(ReplicationError) -> String {
        try await ReplicationError.mapping {
            let c = collection
            return try await offload {
                var b = body
                let rev = b.removeValue(forKey: "_rev")?.stringValue
                b.removeValue(forKey: "_id")
                do {
                    return try c.putLocal(id: id, body: b, rev: rev)
                } catch let error as SetteeError where error.code == .conflict {
                    throw ReplicationError(.badRequest, "checkpoint \(id) changed underneath: \(error.reason)", status: 409)
                }
            }
        }
    }

    /// Commits are durable when `write` returns (WAL, one transaction per batch): nothing to do.
    public func ensureFullCommit() async throws(ReplicationError) {}

    private func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        do {
            return try await Database.offload(work)
        } catch let error as SetteeError where error.code == .closed {
            throw ReplicationError(.cancelled, "database \(collection.database.name) is closed")
        }
    }
}

extension SetteeError {
    /// CouchDB's `error` string for this error in a `_bulk_docs` row.
    var couchName: String {
        switch code {
        case .conflict: return "conflict"
        case .forbidden: return "forbidden"
        case .unauthorized: return "unauthorized"
        case .badDocID: return "illegal_docid"
        case .missingStub: return "missing_stub"
        case .tooLarge: return "too_large"
        case .notFound: return "not_found"
        default: return code.rawValue
        }
    }
}
