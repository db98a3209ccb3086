public import SetteeCore

/// How a save behaves when the document changed since it was read (Couchbase Lite's `ConcurrencyControl`).
public enum ConcurrencyControl: UInt8, Sendable {
    /// The save replaces whatever revision is current.
    case lastWriteWins
    /// The save fails (returns false) if the document changed since it was read.
    case failOnConflict
}

/// The Couchbase Lite-style document API.
extension Collection {
    /// The document's current winning revision, or nil if it does not exist or is deleted.
    public func document(id: String) throws -> Document? {
        // The row read straight into the snapshot: the revision id as stored (not parsed and printed again).
        let row = try database.read { db -> (rev: String, sequence: UInt64, flags: DocFlags, body: [UInt8])? in
            let stmt = try db.prepare(sql.record)
            defer { stmt.reset() }
            stmt.bind(id, at: 1)
            let flags = try stmt.step() ? DocFlags(rawValue: stmt.int64(2)) : .deleted
            guard !flags.contains(.deleted) else { return nil }
            guard let rev = stmt.string(1), !rev.isEmpty else { throw SetteeError(.internalError, "Corrupt revision id for \(id)") }
            return (rev, UInt64(stmt.int64(0)), flags, stmt.withTextBytes(3) { Array($0) })
        }
        guard let row else { return nil }
        // The body's bytes, parsed as properties are asked for (a read of one property builds no other); the row's
        // flags say whether it has attachments to take apart.
        return try Document(id: id, revisionID: row.rev, sequence: row.sequence, storedBody: row.body,
                            hasAttachments: row.flags.contains(.hasAttachments), collection: self)
    }

    /// A specific revision of a document (a conflict's losing branch, say), or nil if the store lacks it or its
    /// body. A tombstone revision comes back with `isDeleted` set.
    public func document(id: String, revision: RevID) throws -> Document? {
        guard let record = try record(id: id, withTree: true), let rev = record.revision(revision) else { return nil }
        return Document(id: id, revisionID: revision.description, sequence: record.sequence, deleted: rev.deleted,
                        properties: try DocumentRecord.parseBody(rev.body), collection: self)
    }

    /// Ids of documents with more than one live leaf (unresolved conflicts), in id order.
    public func conflictedDocumentIDs() throws -> [String] {
        try database.read { db in
            let stmt = try db.prepare("SELECT id FROM \(docsTable) WHERE \(DocumentTable.has(.conflicted)) ORDER BY id")
            defer { stmt.reset() }
            var ids: [String] = []
            while try stmt.step() { if let id = stmt.string(0) { ids.append(id) } }
            return ids
        }
    }

    /// Saves with last-write-wins.
    public func save(document: MutableDocument) throws {
        _ = try save(document: document, concurrencyControl: .lastWriteWins)
    }

    /// Saves a document.
    ///
    /// - Returns: false when `failOnConflict` found that the document changed since it was read.
    /// - Throws: `.badDocID` for an invalid id, `.badRequest` for reserved property names, storage errors.
    @discardableResult
    public func save(document: MutableDocument, concurrencyControl: ConcurrencyControl) throws -> Bool {
        try store(document, deleted: false, concurrencyControl: concurrencyControl)
    }

    /// Saves a document, asking `conflictHandler` to merge when it changed since it was read.
    ///
    /// The handler gets the document being saved and the current stored one (nil if deleted); it edits the
    /// first and returns true to save it, or false to give up (the save then returns false).
    @discardableResult
    public func save(document: MutableDocument,
                     conflictHandler: (MutableDocument, Document?) throws -> Bool) throws -> Bool {
        while true {
            if try store(document, deleted: false, concurrencyControl: .failOnConflict) { return true }
            let current = try record(id: document.id)
            let currentDoc = try current.flatMap { r -> Document? in
                r.deleted ? nil : Document(id: r.id, revisionID: r.revID.description, sequence: r.sequence,
                                           deleted: false, properties: try r.json(), collection: self)
            }
            guard try conflictHandler(document, currentDoc) else { return false }
            document.revisionID = current?.revID.description
        }
    }

    /// Deletes a document (writes a tombstone revision) with last-write-wins.
    public func delete(document: Document) throws {
        _ = try delete(document: document, concurrencyControl: .lastWriteWins)
    }

    /// Deletes a document; returns false when `failOnConflict` found it changed since it was read.
    @discardableResult
    public func delete(document: Document, concurrencyControl: ConcurrencyControl) throws -> Bool {
        try store(document, deleted: true, concurrencyControl: concurrencyControl)
    }

    /// Purges a document: removes it and its history for good. Unlike delete, nothing replicates.
    public func purge(document: Document) throws {
        try purge(id: document.id)
    }

    private func store(_ document: Document, deleted: Bool, concurrencyControl: ConcurrencyControl) throws -> Bool {
        let generation = (document.revisionID.flatMap(RevID.init)?.generation ?? 0) + 1
        var body = JSONObject()
        var blobs: [(digest: String, data: [UInt8])] = []
        if deleted {
            if let atts = document.attachments, !atts.isEmpty { body["_attachments"] = .object(atts) }
        } else {
            for key in document.keys where key.hasPrefix("_") {
                throw SetteeError(.badRequest, "Property name `\(key)` is reserved")
            }
            (body, blobs) = try document.revisionBody(for: database, generation: generation)
        }
        let mode: RevisionWrite.Mode
        switch concurrencyControl {
        case .lastWriteWins: mode = .overwrite
        case .failOnConflict: mode = .edit(parent: document.revisionID.flatMap(RevID.init))
        }
        let written = try writeReportingSequences(
            [RevisionWrite(id: document.id, body: body, deleted: deleted, mode: mode, blobs: blobs)], as: .owner)[0]
        switch written.outcome {
        case .success(let rev):
            let sequence = try written.sequence ?? record(id: document.id)?.sequence
            document.didSave(revision: rev.description, sequence: sequence.map { Int64($0) } ?? Int64(database.lastSequence),
                             deleted: deleted, collection: self, body: body)
            return true
        case .failure(let error) where error.code == .conflict || (error.code == .notFound && deleted):
            if concurrencyControl == .failOnConflict { return false }
            throw error
        case .failure(let error):
            throw error
        }
    }
}
