import SetteeCore

/// Writing revisions: the one path every save, delete and replicated revision goes through.
extension Collection {
    /// Stores revisions in one transaction and returns each one's outcome in order.
    ///
    /// A write that conflicts (stale parent, bad id) fails alone with its error; the others commit.
    /// Returns only after the commit, so a returned success survives a crash.
    ///
    /// - Throws: ``SetteeError`` `.storage`/`.closed` when the transaction itself fails (nothing is written).
    public func write(_ writes: [RevisionWrite]) throws -> [Result<RevID, SetteeError>] {
        let limit = database.revsLimit
        return try database.write { db in
            let session = try WriteSession(db: db, sql: self.sql, revsLimit: limit)
            let refused = try self.overflowingWrites(writes, db: db)
            let results = try writes.enumerated().map { i, w -> Result<RevID, SetteeError> in
                if refused.contains(i) {
                    return .failure(SetteeError(.partitionOverflow, "Partition limit exceeded due to update on '\(w.id)'"))
                }
                return try self.apply(w, session)
            }
            try self.storePendingTree(session)
            try session.flushArchive()
            self.database.noteChanges(collection: self.fullName, ids: session.changed)
            return results
        }
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

    /// Stores one revision; throws its error (conflict, bad id) instead of returning it.
    @discardableResult
    public func write(_ write: RevisionWrite) throws -> RevID {
        try self.write([write])[0].get()
    }

    /// Statements and scratch buffers shared by the writes of one batch (writer thread only).
    final class WriteSession {
        let db: Connection
        let revsLimit: Int
        let lookup: Statement
        let insertIfAbsent: Statement
        let updateAll: Statement
        let updateTree: Statement
        let insert: Statement
        private let sql: SQL
        var changed: [String] = []
        var body: [UInt8] = []
        var tree: [UInt8] = []
        var rev: [UInt8] = []

        init(db: Connection, sql: SQL, revsLimit: Int) throws {
            self.db = db
            self.sql = sql
            self.revsLimit = revsLimit
            lookup = try db.prepare(sql.lookup)
            insertIfAbsent = try db.prepare(sql.insertIfAbsent)
            updateAll = try db.prepare(sql.updateAll)
            updateTree = try db.prepare(sql.updateTree)
            insert = try db.prepare(sql.insert)
            body.reserveCapacity(1024)
            tree.reserveCapacity(256)
        }

        func fetchBody(rowid: Int64) throws -> [UInt8]? {
            let fetch = try db.prepare(sql.fetchBody)
            defer { fetch.reset() }
            fetch.bind(rowid, at: 1)
            return try fetch.step() ? fetch.blob(0) : nil
        }

        /// A document whose replicated revisions are merged in memory: consecutive replicated writes of one
        /// document in a batch (a document receiving many conflicting leaves at once) update this tree instead of
        /// encoding and rewriting the row each time — which made such a batch quadratic in its leaves, every leaf's
        /// body being rewritten with the tree at every write. It is stored when the batch moves on or ends.
        struct PendingTree {
            let id: String
            let rowid: Int64?
            var tree: RevTree
            /// The winner the row holds (its body is in the row, not in the tree).
            let storedWinner: RevID?
            let archiveHead: Int64?
            let archived: Bool
        }
        var pendingTree: PendingTree?

        /// The document's newest archived revision (its row's `arch`, as the lookup read it), then the ones this
        /// write archives: each new archive row links to it, and the row's update stores the last.
        var archiveHead: Int64?
        /// Whether this write archived something (the row's `arch` is then set to ``archiveHead``).
        var archived = false

        /// Archive rows not inserted yet: they are written many per statement (``flushArchive()``), with ids given
        /// here (the table's next rowids), so a document's row can name its newest one at once.
        private var pending: [(id: Int64, doc: Int64, rev: String, body: [UInt8], prev: Int64?)] = []
        private var nextArchiveID: Int64?
        /// Archive rows per INSERT statement.
        static let archiveGroup = 32

        /// Keeps a replaced revision's body (the row's winner, or a leaf the tree held) in the archive until
        /// compaction, linked to the document's archived revision before it.
        func archive(body: [UInt8], of rev: String, rowid: Int64) throws {
            let id: Int64
            if let next = nextArchiveID {
                id = next
            } else {
                let max = try db.prepare(sql.archiveNextID)
                defer { max.reset() }
                id = try max.step() ? max.int64(0) : 1
            }
            nextArchiveID = id + 1
            pending.append((id, rowid, rev, body.isEmpty ? Array("{}".utf8) : body, archiveHead))
            archiveHead = id
            archived = true
            if pending.count >= 8 * Self.archiveGroup { try flushArchive() }
        }

        /// Inserts the pending archive rows (before the transaction commits).
        func flushArchive() throws {
            guard !pending.isEmpty else { return }
            var start = 0
            if pending.count >= Self.archiveGroup {
                let many = try db.prepare(sql.archiveMany)
                while pending.count - start >= Self.archiveGroup {
                    for k in 0..<Self.archiveGroup { bindArchiveRow(pending[start + k], many, base: Int32(k * 5)) }
                    try many.run()
                    start += Self.archiveGroup
                }
            }
            if start < pending.count {
                let one = try db.prepare(sql.archiveBody)
                for row in pending[start...] {
                    bindArchiveRow(row, one, base: 0)
                    try one.run()
                }
            }
            pending.removeAll(keepingCapacity: true)
        }

        private func bindArchiveRow(_ row: (id: Int64, doc: Int64, rev: String, body: [UInt8], prev: Int64?),
                                    _ statement: Statement, base: Int32) {
            statement.bind(row.id, at: base + 1)
            statement.bind(row.doc, at: base + 2)
            statement.bind(row.rev, at: base + 3)
            statement.bind(text: row.body, at: base + 4)
            if let prev = row.prev { statement.bind(prev, at: base + 5) } else { statement.bindNull(at: base + 5) }
        }

        /// Binds the row's new `arch` (NULL keeps it: nothing was archived).
        func bindArchiveHead(_ statement: Statement, at index: Int32) {
            if archived, let archiveHead { statement.bind(archiveHead, at: index) } else { statement.bindNull(at: index) }
        }
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
        if !w.blobs.isEmpty {
            let insertBlob = try db.prepare("INSERT OR IGNORE INTO blobs(digest, length, data, encoding) VALUES (?, ?, ?, ?)")
            for blob in w.blobs {
                insertBlob.bind(blob.digest, at: 1)
                insertBlob.bind(blob.data.count, at: 2)
                insertBlob.bind(w.blobEncodings[blob.digest], at: 4)
                // Not copied by SQLite (an attachment can be tens of megabytes): the bytes outlive the step.
                try blob.data.withUnsafeBytes { bytes in
                    insertBlob.bindNoCopy(blob: bytes, at: 3)
                    _ = try insertBlob.step()
                }
                insertBlob.reset()
            }
        }
        for staged in w.stagedBlobs { try db.insertStagedBlob(staged) }
        session.body.removeAll(keepingCapacity: true)
        // A new edit's id is CouchDB's, from the parent, the deleted flag and the body with its attachment stubs.
        // For an edit of a given parent (or a new document) it is computed while the body is serialized, in one
        // pass; another parent (a tombstone re-created, an overwrite's winner) hashes the body again.
        var givenParentRev: RevID?
        if case .edit(let parent) = w.mode {
            givenParentRev = RevID.next(after: parent, deleted: w.deleted, body: w.body, serializingInto: &session.body)
        } else {
            JSON.object(w.body).serialize(into: &session.body)
        }
        func nextRev(after parent: RevID?) -> RevID {
            if let givenParentRev, case .edit(let given) = w.mode, given == parent { return givenParentRev }
            return RevID.next(after: parent, deleted: w.deleted, body: w.body)
        }
        var createdRev: RevID?
        if case .edit(parent: nil) = w.mode {
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
        // The leaves before the edit that it may extend: one that stops being a leaf loses its body from the row
        // or the tree, and keeps it in the archive instead (below). Only the new revision's ancestors can stop
        // being leaves (stemming never removes a leaf): an edit's parent (the winner for an overwrite or a
        // re-created tombstone), a replicated revision's history. (Looking at every leaf made each write of a
        // document with n conflicts cost n searches.) Copy-on-write: no body is copied here.
        var extended: [RevID] = []
        switch w.mode {
        case .edit(let parent): extended = [parent, tree.winner?.rev].compactMap { $0 }
        case .overwrite: extended = [tree.winner?.rev].compactMap { $0 }
        case .replicated(let history): extended = Array(history.dropFirst())
        }
        let oldLeaves: [(rev: RevID, body: [UInt8]?)]
        if extended.isEmpty || tree.isEmpty {
            oldLeaves = []
        } else {
            let leafIndices = Set(tree.leafIndices)
            oldLeaves = extended.compactMap { rev in
                tree.index(of: rev).flatMap { leafIndices.contains($0) ? (rev, tree.nodes[$0].body) : nil }
            }
        }

        let newRev: RevID
        switch w.mode {
        case .edit(let given):
            var parent = given
            if parent == nil, let winner = tree.winner {
                guard winner.deleted else { return .failure(.updateConflict) }
                parent = winner.rev
            }
            if parent != nil && tree.isEmpty {
                return .failure(w.deleted ? .missing : .updateConflict)
            }
            if parent == nil, let createdRev {
                newRev = createdRev
            } else if let chainChild, parent == given {
                newRev = chainChild
            } else {
                newRev = nextRev(after: parent)
            }
            do {
                try tree.addChild(newRev, of: parent, deleted: w.deleted, body: bodyBytes)
            } catch {
                return .failure(.updateConflict)
            }
        case .overwrite:
            let parent = tree.winner?.rev
            newRev = nextRev(after: parent)
            do {
                try tree.addChild(newRev, of: parent, deleted: w.deleted, body: bodyBytes)
            } catch {
                return .failure(.updateConflict)
            }
        case .replicated(let history):
            guard let first = history.first else {
                keepCarried(tree)
                return .failure(SetteeError(.badRequest, "Empty revision history"))
            }
            newRev = first
            do {
                guard try tree.insert(path: history, deleted: w.deleted, body: bodyBytes) else {
                    keepCarried(tree)
                    return .success(newRev)  // already stored: replication is idempotent
                }
            } catch {
                keepCarried(tree)  // (insert checks the history before it changes anything)
                return .failure(SetteeError(.badRequest, "Invalid revision history for \(w.id)"))
            }
        }
        tree.stem(limit: session.revsLimit)
        // (A set for the membership tests below: with many conflicting leaves an array made each write quadratic in
        // them, and a batch adding n leaves to one document cubic.)
        let leafSet = Set(tree.leafIndices)
        var winnerIndex = 0, live = 0
        Self.winner(of: tree, index: &winnerIndex, live: &live)
        let winner = tree.nodes[winnerIndex]
        if let rowid {
            for old in oldLeaves {
                guard let i = tree.index(of: old.rev), !leafSet.contains(i) else { continue }  // still a leaf, or stemmed
                if old.rev == oldWinner {
                    // The winner's body is in the row (rewritten below), not in the tree.
                    try session.archive(body: try session.fetchBody(rowid: rowid) ?? Array("{}".utf8),
                                        of: old.rev.description, rowid: rowid)
                } else if let body = old.body {
                    try session.archive(body: body, of: old.rev.description, rowid: rowid)
                }
            }
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

    // MARK: Purge

    /// Removes revisions for good (CouchDB's `_purge`): the given leaves and the ancestors only they had.
    /// When no leaf remains, the document disappears entirely, from the feed too.
    ///
    /// - Returns: the revisions purged (leaves not found are skipped).
    @discardableResult
    public func purge(id: String, revisions: [RevID]) throws -> [RevID] {
        try database.write { db in try self.applyPurge(id: id, revisions: revisions, db: db) }
    }

    /// Purges a document and its whole revision tree. Throws `.notFound` if it does not exist.
    public func purge(id: String) throws {
        let found: Bool = try database.write { db in
            try self.applyPurge(id: id, revisions: nil, db: db) != []
        }
        if !found { throw SetteeError.missing }
    }

    func applyPurge(id: String, revisions: [RevID]?, db: Connection) throws -> [RevID] {
        let lookup = try db.prepare("SELECT rowid, rev, tree, body FROM \(docsTable) WHERE id = ?")
        lookup.bind(id, at: 1)
        guard try lookup.step() else {
            lookup.reset()
            return []
        }
        let rowid = lookup.int64(0)
        let oldWinner = RevID(lookup.string(1) ?? "")
        var tree = try RevTree(encoded: lookup.blob(2) ?? [])
        if let oldWinner { tree.setBody(lookup.blob(3), for: oldWinner) }
        lookup.reset()
        let purged = tree.purge(leaves: revisions ?? tree.leafIndices.map { tree.nodes[$0].rev })
        guard !purged.isEmpty else { return [] }
        let seq = Int64(database.nextSequence())
        try purgeArchive(rowid: rowid, keeping: tree, db: db)
        if tree.isEmpty {
            try db.prepare("DELETE FROM \(docsTable) WHERE rowid = ?").run([.integer(rowid)])
            try db.prepare("INSERT INTO purges(seq, collection, id) VALUES (?, ?, ?)")
                .run([.integer(seq), .integer(self.id), .text(id)])
            try db.prepare("DELETE FROM expiry WHERE collection = ? AND id = ?").run([.integer(self.id), .text(id)])
        } else {
            let winner = tree.winner!
            let body = winner.body ?? Array("{}".utf8)
            let flags = DocFlags(deleted: winner.deleted, liveLeaves: tree.leafIndices.filter({ !tree.nodes[$0].deleted }).count,
                                 hasAttachments: body.containsAttachments)
            let update = try db.prepare(
                "UPDATE \(docsTable) SET seq = ?, rev = ?, flags = ?, body = ?, tree = ? WHERE rowid = ?")
            update.bind(seq, at: 1)
            update.bind(winner.rev.description, at: 2)
            update.bind(flags.rawValue, at: 3)
            update.bind(text: body, at: 4)
            update.bind(bytes: tree.encoded(omitBodyOf: winner.rev), at: 5)
            update.bind(rowid, at: 6)
            _ = try update.step()
            update.reset()
        }
        database.noteChanges(collection: fullName, ids: [id])
        return purged
    }

    /// Drops the archived bodies of a document's revisions that `tree` no longer holds (all of them when it is
    /// empty), so a purged revision is gone at once; the bodies kept are linked again in order and the row's
    /// `arch` names the newest (the row itself is deleted when the tree is empty).
    private func purgeArchive(rowid: Int64, keeping tree: RevTree, db: Connection) throws {
        let head = try db.prepare("SELECT arch FROM \(docsTable) WHERE rowid = ?")
        head.bind(rowid, at: 1)
        let first: Int64? = try head.step() && !head.isNull(0) ? head.int64(0) : nil
        head.reset()
        let chain = try archiveChain(from: first, of: rowid, withBodies: false, db: db)
        guard !chain.isEmpty else { return }
        let keep = tree.isEmpty ? [] : chain.filter { RevID($0.rev).map(tree.contains) ?? false }
        guard keep.count != chain.count else { return }
        let delete = try db.prepare("DELETE FROM \(archiveTable) WHERE id = ?")
        for link in chain where !keep.contains(where: { $0.id == link.id }) { try delete.run([.integer(link.id)]) }
        let relink = try db.prepare("UPDATE \(archiveTable) SET prev = ? WHERE id = ?")
        for (k, link) in keep.enumerated() {
            try relink.run([k + 1 < keep.count ? .integer(keep[k + 1].id) : .null, .integer(link.id)])
        }
        if !tree.isEmpty {
            try db.prepare("UPDATE \(docsTable) SET arch = ? WHERE rowid = ?")
                .run([keep.first.map { SQLiteValue.integer($0.id) } ?? .null, .integer(rowid)])
        }
    }

    /// A document's archived revisions, newest first, following its chain from `head` (its row's `arch`): each
    /// row's id, revision and (when asked) body. A link to a row of another document (none should exist) ends it.
    func archiveChain(from head: Int64?, of rowid: Int64, withBodies: Bool,
                      db: Connection) throws -> [(id: Int64, rev: String, body: [UInt8]?)] {
        var out: [(id: Int64, rev: String, body: [UInt8]?)] = []
        guard var next = head else { return out }
        let stmt = try db.prepare(sql.archived)
        defer { stmt.reset() }
        var seen = Set<Int64>()
        while seen.insert(next).inserted {
            stmt.bind(next, at: 1)
            guard try stmt.step(), stmt.int64(0) == rowid else { break }
            out.append((next, stmt.string(1) ?? "", withBodies ? (stmt.blob(2) ?? Array("{}".utf8)) : nil))
            let prev: Int64? = stmt.isNull(3) ? nil : stmt.int64(3)
            stmt.reset()
            guard let prev else { break }
            next = prev
        }
        return out
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
