package import SetteeCore

/// Writing revisions: the one path every save, delete and replicated revision goes through.
extension Collection {
    /// Stores revisions in one transaction, made on behalf of `context`, and returns each one's outcome in order.
    ///
    /// This is the store's one write entry point: every save, delete and replicated revision comes here. The
    /// database's ``Database/admission`` (a node's `validate_doc_update`, `_users` rules and size
    /// limits) judges the writes first, outside the transaction; a write it refuses fails alone with its error.
    /// A write that conflicts (stale parent, bad id) fails alone too; the others commit.
    /// Returns only after the commit, so a returned success survives a crash.
    ///
    /// ```swift
    /// let outcomes = try collection.write([RevisionWrite(id: "a", body: ["n": 1], mode: .edit(parent: nil))],
    ///                                     as: WriteContext(name: "alice", roles: []))
    /// ```
    ///
    /// - Throws: ``SetteeError`` `.storage`/`.closed` when the transaction itself fails (nothing is written), or
    ///   the admission's error when it could not judge the batch.
    package func write(_ writes: [RevisionWrite], as context: WriteContext) throws -> [Result<RevID, SetteeError>] {
        try writeReportingSequences(writes, as: context).map(\.outcome)
    }

    /// ``write(_:as:)``, with each stored local edit's sequence (nil for a failure or a replicated revision).
    func writeReportingSequences(_ writes: [RevisionWrite], as context: WriteContext) throws -> [StoredWrite] {
        guard !writes.isEmpty, let admission = database.admission else { return try store(writes) }
        let verdicts = try admission.admit(writes, to: self, as: context)
        precondition(verdicts.count == writes.count, "WriteAdmission.admit must judge every write")
        var admitted: [RevisionWrite] = []
        admitted.reserveCapacity(writes.count)
        var positions: [Int] = []
        var results = [StoredWrite](repeating: (.failure(SetteeError(.internalError, "not written")), nil),
                                    count: writes.count)
        for (i, verdict) in verdicts.enumerated() {
            switch verdict {
            case .success(let write):
                admitted.append(write)
                positions.append(i)
            case .failure(let error):
                results[i] = (.failure(error), nil)
            }
        }
        if admitted.isEmpty { return results }
        for (i, outcome) in zip(positions, try store(admitted)) { results[i] = outcome }
        return results
    }

    /// A write's outcome, and the document's sequence after it when it stored a local edit.
    typealias StoredWrite = (outcome: Result<RevID, SetteeError>, sequence: UInt64?)

    /// ``write(_:as:)`` made as the database's owner (``WriteContext/owner``), as Couchbase Lite's API writes.
    package func write(_ writes: [RevisionWrite]) throws -> [Result<RevID, SetteeError>] {
        try write(writes, as: .owner)
    }

    /// Stores admitted revisions in one transaction. Inside `inBatch` the writes take no savepoint of their own
    /// (``Database/writeInBatchOrGroup(_:)``): a write refused (a conflict, a bad id) is refused before it changes
    /// its document, as with a savepoint; what throws after changing a row is a storage error, which fails the batch.
    private func store(_ writes: [RevisionWrite]) throws -> [StoredWrite] {
        let limit = database.revsLimit
        return try database.writeInBatchOrGroup { db in
            let session = try self.writeSession(db: db, revsLimit: limit)
            let refused = try self.overflowingWrites(writes, db: db)
            let results = try writes.enumerated().map { i, w -> StoredWrite in
                if refused.contains(i) {
                    return (.failure(SetteeError(.partitionOverflow, "Partition limit exceeded due to update on '\(w.id)'")), nil)
                }
                session.lastWasAlreadyStored = false
                let outcome = try self.apply(w, session)
                // (A revision the document had already keeps the routing it was stored with: the body sent with it
                // again is not what was stored.)
                if case .success(let rev) = outcome, !session.lastWasAlreadyStored {
                    if let routing = w.routing { try self.storeRouting(routing, id: w.id, rev: rev, session: session) }
                    if let millis = w.expiresAtMillis {
                        try db.prepare("INSERT OR REPLACE INTO expiry(collection, id, expires) VALUES (?, ?, ?)")
                            .run([.integer(self.id), .text(w.id), .integer(millis)])
                        self.database.expiry.schedule(atMillis: millis)
                    }
                }
                // A local edit that succeeded stored its row with the last sequence allocated (a replicated
                // revision's tree may still be held in memory).
                guard case .success = outcome else { return (outcome, nil) }
                if case .replicated = w.mode { return (outcome, nil) }
                return (outcome, self.database.writerState.withLock { $0.sequence })
            }
            try self.storePendingTree(session)
            try session.flushArchive()
            self.database.noteChanges(collection: self.fullName, ids: session.changed)
            return results
        }
    }

    /// The session for a write: inside `inBatch`, the batch's for this collection (its statements prepared once for
    /// the batch's saves), else a new one.
    private func writeSession(db: Connection, revsLimit: Int) throws -> WriteSession {
        guard let batch = Batch.current(of: database), batch.connection === db else {
            return try WriteSession(db: db, sql: sql, revsLimit: revsLimit)
        }
        if let kept = batch.writeSessions[id], kept.revsLimit == revsLimit {
            kept.reset()
            return kept
        }
        let made = try WriteSession(db: db, sql: sql, revsLimit: revsLimit)
        batch.writeSessions[id] = made
        return made
    }

    /// The writes of a batch a full partition refuses (CouchDB's `max_partition_size`): in a partitioned database,
    /// local edits of regular documents whose partition's size before the batch is at the limit, when the edit
    /// makes the document bigger. Deletions and shrinking edits, design documents and replicated revisions pass.
    func overflowingWrites(_ writes: [RevisionWrite], db: Connection) throws -> Set<Int> {
        guard database.isPartitioned else { return [] }
        let limit = database.partitionSizeLimit?() ?? Database.defaultPartitionSizeLimit
        guard limit > 0 else { return [] }
        var sizes: [String: Int] = [:]
        var refused: Set<Int> = []
        let current = try db.prepare("SELECT \(Collection.externalSizeSQL) FROM \(docsTable) WHERE id = ?")
        defer { current.reset() }
        for (i, w) in writes.enumerated() {
            if case .replicated = w.mode { continue }
            guard let partition = DocumentIDs.partition(of: w.id) else { continue }
            if sizes[partition] == nil { sizes[partition] = try partitionExternalSize(partition, db: db) }
            guard sizes[partition]! >= limit else { continue }
            current.bind(w.id, at: 1)
            let old = try current.step() ? current.int(0) : 0
            current.reset()
            let new = JSON.object(w.body).serializedBytes.count
                + (w.body["_attachments"]?.objectValue?.reduce(0) { $0 + Int($1.value["length"]?.intValue ?? 0) } ?? 0)
            if new > old { refused.insert(i) }
        }
        return refused
    }

    /// A document's size as CouchDB counts it in `sizes.external`: its body's JSON and its attachments' lengths.
    /// The attachment stubs' JSON is not counted, their lengths are (only bodies with `_attachments` are parsed;
    /// the member's key and separator count as 16 bytes).
    static let externalSizeSQL = """
        coalesce(sum(CASE WHEN instr(body, '"_attachments"') = 0 THEN length(body) ELSE \
        max(2, length(body) - 16 - coalesce(length(json_extract(CAST(body AS TEXT), '$._attachments')), 0)) \
        + coalesce((SELECT sum(json_extract(a.value, '$.length')) \
        FROM json_each(CAST(body AS TEXT), '$._attachments') AS a), 0) END), 0)
        """

    /// The external size of a partition's documents (their winning revisions, tombstones included).
    func partitionExternalSize(_ partition: String, db: Connection) throws -> Int {
        let stmt = try db.prepare("SELECT \(Collection.externalSizeSQL) FROM \(docsTable) WHERE id >= ? AND id < ?")
        defer { stmt.reset() }
        stmt.bind(partition + ":", at: 1)
        stmt.bind(partition + ";", at: 2)
        return try stmt.step() ? stmt.int(0) : 0
    }

    /// Stores one revision as the database's owner; throws its error (conflict, bad id, a refusal of the
    /// database's admission) instead of returning it.
    @discardableResult
    package func write(_ write: RevisionWrite) throws -> RevID {
        try self.write([write], as: .owner)[0].get()
    }

    /// Applies one write inside the writer's transaction.
    func apply(_ w: RevisionWrite, _ session: WriteSession) throws -> Result<RevID, SetteeError> {
        do {
            switch try (database.isPartitioned ? DocumentIDs.validatePartitioned(w.id) : DocumentIDs.validate(w.id)) {
            case .local:
                return .failure(SetteeError(.badDocID, "Local documents are written with putLocal"))
            case .regular, .design:
                break
            }
        } catch {
            return .failure(error)
        }
        let db = session.db
        // Another replicated revision of the document whose tree is held in memory continues it; any other write
        // stores that tree first.
        var replicated = false
        if case .replicated = w.mode { replicated = true }
        var carried: WriteSession.PendingTree?
        var carriedTree = RevTree()
        if replicated && session.pendingTree?.id == w.id {
            // Moved out, not copied: the tree is then this write's alone, and editing it copies nothing.
            var pending = session.pendingTree!
            session.pendingTree = nil
            swap(&carriedTree, &pending.tree)
            carried = pending
        } else if session.pendingTree != nil {
            try storePendingTree(session)
        }
        /// A write that changes nothing (or fails) leaves the tree held in memory as it was.
        func keepCarried(_ tree: RevTree) {
            if var kept = carried {
                kept.tree = tree
                session.pendingTree = kept
            }
        }
        try storeBlobs(of: w, db: db)
        let names = NewRevisionNames(w, serializingInto: &session.body)
        func nextRev(after parent: RevID?) -> RevID { names.next(after: parent) }
        var createdRev: RevID?
        if w.createsWhenAbsent {
            // Most new-document saves: insert directly, and fall back to the full path if the id exists.
            let rev = nextRev(after: nil)
            if try insertIfAbsent(id: w.id, rev: rev, deleted: w.deleted,
                                  hasAttachments: w.body.contains(key: "_attachments"), session) {
                return .success(rev)
            }
            createdRev = rev
        }
        let bodyBytes = session.body
        let lookup = session.lookup
        var rowid: Int64?
        var oldWinner: RevID?
        var tree = RevTree()
        var chainChild: RevID?  // the new revision when the fast path below computed it
        session.archived = false
        session.archiveHead = nil
        if carried == nil { lookup.bind(w.id, at: 1) }
        if let carried {
            rowid = carried.rowid
            swap(&tree, &carriedTree)
            oldWinner = carried.storedWinner
            session.archiveHead = carried.archiveHead
            session.archived = carried.archived
        } else if try lookup.step() {
            rowid = lookup.int64(0)
            session.archiveHead = lookup.isNull(2) ? nil : lookup.int64(2)
            // The common updates: a document whose history is one chain ending at the new revision's parent
            // (a local edit of the current revision, or a replicated child of it). The encoded tree gets one
            // node appended, without decoding it.
            var edge: (parent: RevID, child: RevID)?
            switch w.mode {
            case .edit(let parent?):
                let child = nextRev(after: parent)
                chainChild = child
                edge = (parent, child)
            case .replicated(let history) where history.count >= 2 && history.isConsecutive:
                edge = (history[1], history[0])
            default:
                edge = nil
            }
            if let (parent, child) = edge {
                session.tree.removeAll(keepingCapacity: true)
                let appended = lookup.withTextBytes(1) { encoded in
                    RevTree.appendChild(toChain: encoded, parent: parent, child: child, deleted: w.deleted,
                                        limit: session.revsLimit, into: &session.tree)
                }
                if appended {
                    // The parent was the winner: its body leaves the row for the archive.
                    try session.archive(body: lookup.withTextBytes(4) { Array($0) }, of: lookup.string(3) ?? "",
                                        rowid: rowid!)
                    lookup.reset()
                    let flags = DocFlags(deleted: w.deleted, hasAttachments: w.body.contains(key: "_attachments"))
                    try updateRow(rowid: rowid!, rev: child, flags: flags, body: session.body, session)
                    session.changed.append(w.id)
                    return .success(child)
                }
            }
            do {
                tree = try lookup.withTextBytes(1) { try RevTree(encoded: $0) }
            } catch {
                lookup.reset()
                return .failure(error as? SetteeError ?? SetteeError(.internalError, "\(error)"))
            }
            oldWinner = tree.winner?.rev  // the stored `rev` column always equals the tree's winner
        }
        lookup.reset()
        let oldLeaves = Self.leaves(extendedBy: w.mode, in: tree)

        let newRev: RevID
        let added: AddedRevision
        switch w.mode {
        case .edit(let given):
            added = addEdit(of: given, w, to: &tree, names: names, createdRev: createdRev, chainChild: chainChild, body: bodyBytes)
        case .overwrite:
            added = addOverwrite(w, to: &tree, names: names, body: bodyBytes)
        case .replicated(let history):
            added = addReplicated(history, w, to: &tree, body: bodyBytes)
        }
        switch added {
        case .added(let rev):
            newRev = rev
        case .alreadyStored(let rev):
            session.lastWasAlreadyStored = true
            keepCarried(tree)
            return .success(rev)  // replication is idempotent
        case .refused(let error):
            keepCarried(tree)  // (the tree is unchanged: every case checks before it edits)
            return .failure(error)
        }
        tree.stem(limit: session.revsLimit)
        // (A set for the membership tests below: with many conflicting leaves an array made each write quadratic in
        // them, and a batch adding n leaves to one document cubic.)
        let leafSet = Set(tree.leafIndices)
        var winnerIndex = 0, live = 0
        Self.winner(of: tree, index: &winnerIndex, live: &live)
        let winner = tree.nodes[winnerIndex]
        if let rowid {
            try archiveReplaced(oldLeaves, tree: tree, leafSet: leafSet, oldWinner: oldWinner, rowid: rowid, session)
        }
        // The stored tree omits the old winner's body (it lives in the body column). If the old winner
        // is still a leaf but no longer wins, its body must move into the tree.
        if let old = oldWinner, old != winner.rev, let rowid,
           let i = tree.index(of: old), leafSet.contains(i), tree.nodes[i].body == nil {
            tree.setBody(try session.fetchBody(rowid: rowid), for: old)
        }
        session.changed.append(w.id)
        if replicated, rowid != nil {
            // Kept in memory: the next write, if it is another revision of this document, continues from it.
            // (A new document's row is inserted at once: bodies its later revisions replace are archived under it.)
            session.pendingTree = .init(id: w.id, rowid: rowid, tree: tree, storedWinner: oldWinner,
                                        archiveHead: session.archiveHead, archived: session.archived)
            return .success(newRev)
        }
        let hasAttachments = winner.rev == newRev ? w.body.contains(key: "_attachments") : nil
        try storeTree(id: w.id, rowid: rowid, tree: tree, winnerIndex: winnerIndex, live: live, oldWinner: oldWinner,
                      winnerHasAttachments: hasAttachments, session)
        return .success(newRev)
    }

    /// What adding a write's revision to its document's tree came to.
    private enum AddedRevision {
        /// The tree has the new revision.
        case added(RevID)
        /// A replicated revision the tree already had: nothing changed.
        case alreadyStored(RevID)
        /// The write is refused; the tree is unchanged.
        case refused(SetteeError)
    }

    /// A local edit: a child of `given` (nil: a new document, or a new revision on top of a deleted winner).
    private func addEdit(of given: RevID?, _ w: RevisionWrite, to tree: inout RevTree, names: NewRevisionNames,
                         createdRev: RevID?, chainChild: RevID?, body: [UInt8]) -> AddedRevision {
        var parent = given
        if parent == nil, let winner = tree.winner {
            guard winner.deleted else { return .refused(.updateConflict) }
            parent = winner.rev
        }
        if parent != nil && tree.isEmpty {
            return .refused(w.deleted ? .missing : .updateConflict)
        }
        let newRev: RevID
        if parent == nil, let createdRev {
            newRev = createdRev
        } else if let chainChild, parent == given {
            newRev = chainChild
        } else {
            newRev = names.next(after: parent)
        }
        do {
            try tree.addChild(newRev, of: parent, deleted: w.deleted, body: body)
        } catch {
            return .refused(.updateConflict)
        }
        return .added(newRev)
    }

    /// An overwrite: a child of the current winner, whatever it is (a save without a revision check).
    private func addOverwrite(_ w: RevisionWrite, to tree: inout RevTree, names: NewRevisionNames,
                              body: [UInt8]) -> AddedRevision {
        let parent = tree.winner?.rev
        let newRev = names.next(after: parent)
        do {
            try tree.addChild(newRev, of: parent, deleted: w.deleted, body: body)
        } catch {
            return .refused(.updateConflict)
        }
        return .added(newRev)
    }

    /// A replicated revision with its history (newest first), as `new_edits=false` stores it.
    private func addReplicated(_ history: [RevID], _ w: RevisionWrite, to tree: inout RevTree,
                               body: [UInt8]) -> AddedRevision {
        guard let first = history.first else { return .refused(SetteeError(.badRequest, "Empty revision history")) }
        do {
            // (insert checks the history before it changes anything)
            guard try tree.insert(path: history, deleted: w.deleted, body: body) else { return .alreadyStored(first) }
        } catch {
            return .refused(SetteeError(.badRequest, "Invalid revision history for \(w.id)"))
        }
        return .added(first)
    }

    /// The leaves before a write that it may extend: one that stops being a leaf loses its body from the row or the
    /// tree, and keeps it in the archive instead (``archiveReplaced(_:tree:leafSet:oldWinner:rowid:_:)``). Only the
    /// new revision's ancestors can stop being leaves (stemming never removes a leaf): an edit's parent (the winner
    /// for an overwrite or a re-created tombstone), a replicated revision's history. (Looking at every leaf made each
    /// write of a document with n conflicts cost n searches.) Copy-on-write: no body is copied here.
    private static func leaves(extendedBy mode: RevisionWrite.Mode, in tree: RevTree) -> [(rev: RevID, body: [UInt8]?)] {
        let extended: [RevID]
        switch mode {
        case .edit(let parent): extended = [parent, tree.winner?.rev].compactMap { $0 }
        case .overwrite: extended = [tree.winner?.rev].compactMap { $0 }
        case .replicated(let history): extended = Array(history.dropFirst())
        }
        guard !extended.isEmpty && !tree.isEmpty else { return [] }
        let leafIndices = Set(tree.leafIndices)
        return extended.compactMap { rev in
            tree.index(of: rev).flatMap { leafIndices.contains($0) ? (rev, tree.nodes[$0].body) : nil }
        }
    }

    /// Archives the bodies of the leaves the write replaced (no longer leaves in `tree`): the old winner's from the
    /// row, another's from the tree.
    private func archiveReplaced(_ oldLeaves: [(rev: RevID, body: [UInt8]?)], tree: RevTree, leafSet: Set<Int>,
                                 oldWinner: RevID?, rowid: Int64, _ session: WriteSession) throws {
        for old in oldLeaves {
            guard let i = tree.index(of: old.rev), !leafSet.contains(i) else { continue }  // still a leaf, or stemmed
            if old.rev == oldWinner {
                // The winner's body is in the row (rewritten by the caller), not in the tree.
                try session.archive(body: try session.fetchBody(rowid: rowid) ?? Array("{}".utf8),
                                    of: old.rev.description, rowid: rowid)
            } else if let body = old.body {
                try session.archive(body: body, of: old.rev.description, rowid: rowid)
            }
        }
    }

    /// Stores a write's attachment bodies: those in memory (bound without copying: an attachment can be tens of
    /// megabytes) and those staged in files.
    private func storeBlobs(of w: RevisionWrite, db: Connection) throws {
        if !w.blobs.isEmpty {
            try db.withStatement("INSERT OR IGNORE INTO blobs(digest, length, data, encoding) VALUES (?, ?, ?, ?)") { insert in
                for blob in w.blobs {
                    insert.bind(blob.digest, at: 1)
                    insert.bind(blob.data.count, at: 2)
                    insert.bind(w.blobEncodings[blob.digest], at: 4)
                    try blob.data.withUnsafeBytes { bytes in
                        insert.bindNoCopy(blob: bytes, at: 3)
                        _ = try insert.step()
                    }
                    insert.reset()
                }
            }
        }
        for staged in w.stagedBlobs { try db.insertStagedBlob(staged) }
        if !w.blobSHA1.isEmpty { try db.recordSHA1(w.blobSHA1) }
    }

    /// Stores the tree held in memory for a document's replicated revisions (``WriteSession/PendingTree``).
    func storePendingTree(_ session: WriteSession) throws {
        guard let pending = session.pendingTree else { return }
        session.pendingTree = nil
        session.archiveHead = pending.archiveHead
        session.archived = pending.archived
        var winnerIndex = 0, live = 0
        Self.winner(of: pending.tree, index: &winnerIndex, live: &live)
        try storeTree(id: pending.id, rowid: pending.rowid, tree: pending.tree, winnerIndex: winnerIndex, live: live,
                      oldWinner: pending.storedWinner, winnerHasAttachments: nil, session)
    }

    /// The winning leaf's index and the number of live leaves.
    static func winner(of tree: RevTree, index winnerIndex: inout Int, live: inout Int) {
        let leaves = tree.leafIndices
        winnerIndex = leaves[0]
        live = 0
        for i in leaves {
            if !tree.nodes[i].deleted { live += 1 }
            if RevTree.ranksBefore(tree.nodes[i], tree.nodes[winnerIndex]) { winnerIndex = i }
        }
    }

    /// Writes a document's row from its tree: a new row, the winner's body and the tree when the winner changed,
    /// or only the tree, flags and sequence when it didn't. `winnerHasAttachments` is known for a new revision;
    /// otherwise the winner's body is scanned.
    private func storeTree(id: String, rowid: Int64?, tree: RevTree, winnerIndex: Int, live: Int, oldWinner: RevID?,
                           winnerHasAttachments: Bool?, _ session: WriteSession) throws {
        let winner = tree.nodes[winnerIndex]
        let winnerChanged = winner.rev != oldWinner
        let winnerBody = winner.body ?? Array("{}".utf8)
        // The new revision's properties are at hand; only another leaf's body needs a byte scan. When the winner
        // stays, the row keeps its attachment bit (``CollectionSQL/updateTree``).
        let flags = DocFlags(deleted: winner.deleted, liveLeaves: live,
                             hasAttachments: winnerChanged && (winnerHasAttachments ?? winnerBody.containsAttachments))
        session.tree.removeAll(keepingCapacity: true)
        tree.encode(omitBodyOf: winner.rev, into: &session.tree)
        if let rowid, winnerChanged {
            try updateRow(rowid: rowid, rev: winner.rev, flags: flags, body: winnerBody, session)
        } else if let rowid {
            // Same winner: its row keeps rev and body; only the tree, flags and sequence change.
            let seq = Int64(database.nextSequence())
            let update = session.updateTree
            try session.tree.withUnsafeBytes { treeBytes in
                update.bind(seq, at: 1)
                update.bind(flags.rawValue, at: 2)
                update.bindNoCopy(blob: treeBytes, at: 3)
                session.bindArchiveHead(update, at: 4)
                update.bind(rowid, at: 5)
                defer { update.reset() }
                _ = try update.step()
            }
        } else {
            session.rev.removeAll(keepingCapacity: true)
            winner.rev.write(into: &session.rev)
            let seq = Int64(database.nextSequence())
            let insert = session.insert
            try session.tree.withUnsafeBytes { treeBytes in
                try session.rev.withUnsafeBytes { revBytes in
                    try winnerBody.withUnsafeBytes { bodyBytes in
                        insert.bind(id, at: 1)
                        insert.bind(seq, at: 2)
                        insert.bindNoCopy(text: revBytes, at: 3)
                        insert.bind(flags.rawValue, at: 4)
                        insert.bindNoCopy(text: bodyBytes, at: 5)
                        insert.bindNoCopy(blob: treeBytes, at: 6)
                        defer { insert.reset() }
                        _ = try insert.step()
                    }
                }
            }
        }
    }

    /// Rewrites a document's row with a new winning revision (its body and the encoded tree in
    /// `session.tree`).
    private func updateRow(rowid: Int64, rev: RevID, flags: DocFlags, body: [UInt8], _ session: WriteSession) throws {
        session.rev.removeAll(keepingCapacity: true)
        rev.write(into: &session.rev)
        let seq = Int64(database.nextSequence())
        let update = session.updateAll
        try session.tree.withUnsafeBytes { treeBytes in
            try session.rev.withUnsafeBytes { revBytes in
                try body.withUnsafeBytes { bodyBytes in
                    update.bind(seq, at: 1)
                    update.bindNoCopy(text: revBytes, at: 2)
                    update.bind(flags.rawValue, at: 3)
                    update.bindNoCopy(text: bodyBytes, at: 4)
                    update.bindNoCopy(blob: treeBytes, at: 5)
                    session.bindArchiveHead(update, at: 6)
                    update.bind(rowid, at: 7)
                    defer { update.reset() }
                    _ = try update.step()
                }
            }
        }
    }

    /// Inserts a brand-new document with a single revision (body in `session.body`) unless the id exists.
    /// Returns whether it inserted.
    private func insertIfAbsent(id: String, rev: RevID, deleted: Bool, hasAttachments: Bool,
                                _ session: WriteSession) throws -> Bool {
        let flags = DocFlags(deleted: deleted, hasAttachments: hasAttachments)
        // A one-node tree whose body (the winner's) lives in the body column.
        session.tree.removeAll(keepingCapacity: true)
        RevTree(singleRoot: rev, deleted: deleted).encode(into: &session.tree)
        session.rev.removeAll(keepingCapacity: true)
        rev.write(into: &session.rev)
        let seq = Int64(database.nextSequence())
        let insert = session.insertIfAbsent
        try session.tree.withUnsafeBytes { treeBytes in
            try session.rev.withUnsafeBytes { revBytes in
                try session.body.withUnsafeBytes { bodyBytes in
                    insert.bind(id, at: 1)
                    insert.bind(seq, at: 2)
                    insert.bindNoCopy(text: revBytes, at: 3)
                    insert.bind(flags.rawValue, at: 4)
                    insert.bindNoCopy(text: bodyBytes, at: 5)
                    insert.bindNoCopy(blob: treeBytes, at: 6)
                    defer { insert.reset() }
                    _ = try insert.step()
                }
            }
        }
        guard session.db.changes == 1 else {
            database.releaseSequence()
            return false
        }
        session.changed.append(id)
        return true
    }

}

extension Array where Element == UInt8 {
    /// Cheap test for an `"_attachments"` key in serialized JSON (a false positive only costs a lookup).
    var containsAttachments: Bool {
        let needle: [UInt8] = Array("\"_attachments\"".utf8)
        guard count >= needle.count else { return false }
        return withUnsafeBufferPointer { buf in
            var i = 0
            let last = buf.count - needle.count
            while i <= last {
                if buf[i] == 0x22 && buf[i + 1] == 0x5f {
                    var match = true
                    for k in 2..<needle.count where buf[i + k] != needle[k] { match = false; break }
                    if match { return true }
                }
                i += 1
            }
            return false
        }
    }
}

extension Array where Element == RevID {
    /// Whether the generations count down by one from the first (a replicated revision's history, newest first).
    var isConsecutive: Bool {
        guard let first else { return true }
        for (k, rev) in enumerated() where rev.generation != first.generation - k { return false }
        return true
    }
}

extension RevisionWrite {
    /// Whether the write, when its document doesn't exist, creates it as a first revision with no parent: an edit
    /// of no parent, or a save that overwrites whatever is current (Couchbase Lite's last-write-wins save of a
    /// new document). Such a write tries the one-statement insert first.
    var createsWhenAbsent: Bool {
        switch mode {
        case .edit(parent: nil): return true
        case .overwrite: return !deleted  // (deleting what doesn't exist is refused on the full path)
        default: return false
        }
    }
}

/// The id of a write's new revision: CouchDB's, from the parent, the deleted flag and the body with its attachment
/// stubs. For an edit of a given parent (or a new document, or an overwrite that may create one) it is computed
/// while the body is serialized, in one pass; another parent (a tombstone re-created, an overwrite's winner)
/// hashes the body again.
struct NewRevisionNames {
    private let write: RevisionWrite
    /// The parent the child named while serializing has.
    private let expectedParent: RevID?
    private let expectedChild: RevID?

    /// Serializes the write's body into `body` (emptied first), naming the given parent's child on the way.
    init(_ write: RevisionWrite, serializingInto body: inout [UInt8]) {
        self.write = write
        body.removeAll(keepingCapacity: true)
        if case .edit(let parent) = write.mode {
            expectedParent = parent
            expectedChild = RevID.next(after: parent, deleted: write.deleted, body: write.body, serializingInto: &body)
        } else if write.createsWhenAbsent {
            expectedParent = nil
            expectedChild = RevID.next(after: nil, deleted: write.deleted, body: write.body, serializingInto: &body)
        } else {
            expectedParent = nil
            expectedChild = nil
            JSON.object(write.body).serialize(into: &body)
        }
    }

    /// The new revision's id as a child of `parent`.
    func next(after parent: RevID?) -> RevID {
        if let expectedChild, expectedParent == parent { return expectedChild }
        return RevID.next(after: parent, deleted: write.deleted, body: write.body)
    }
}
