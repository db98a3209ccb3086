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
            try writes.map { try self.apply($0, db: db, revsLimit: limit) }
        }
    }

    /// Stores one revision; throws its error (conflict, bad id) instead of returning it.
    @discardableResult
    public func write(_ write: RevisionWrite) throws -> RevID {
        try self.write([write])[0].get()
    }

    /// Applies one write inside the writer's transaction.
    func apply(_ w: RevisionWrite, db: Connection, revsLimit: Int) throws -> Result<RevID, SetteeError> {
        do {
            switch try DocumentID.validate(w.id) {
            case .local:
                return .failure(SetteeError(.badDocID, "Local documents are written with putLocal"))
            case .regular, .design:
                break
            }
        } catch {
            return .failure(error)
        }
        if !w.blobs.isEmpty {
            let insertBlob = try db.prepare("INSERT OR IGNORE INTO blobs(digest, length, data) VALUES (?, ?, ?)")
            for blob in w.blobs {
                insertBlob.bind(blob.digest, at: 1)
                insertBlob.bind(blob.data.count, at: 2)
                insertBlob.bind(bytes: blob.data, at: 3)
                _ = try insertBlob.step()
                insertBlob.reset()
            }
        }
        let bodyJSON = JSON.object(w.body)
        let bodyBytes = bodyJSON.serializedBytes
        var createdRev: RevID?
        if case .edit(parent: nil) = w.mode {
            // Most new-document saves: insert directly, and fall back to the full path if the id exists.
            let rev = RevID.next(after: nil, deleted: w.deleted, canonicalBody: bodyJSON.canonicalBytes)
            if try insertIfAbsent(id: w.id, rev: rev, deleted: w.deleted, body: bodyBytes, db: db) {
                return .success(rev)
            }
            createdRev = rev
        }
        let lookup = try db.prepare(sql.lookup)
        lookup.bind(w.id, at: 1)
        var rowid: Int64?
        var oldWinner: RevID?
        var tree = RevTree()
        if try lookup.step() {
            rowid = lookup.int64(0)
            oldWinner = RevID(lookup.string(1) ?? "")
            do {
                tree = try RevTree(encoded: lookup.blob(2) ?? [])
            } catch {
                lookup.reset()
                return .failure(error)
            }
        }
        lookup.reset()

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
            } else {
                newRev = RevID.next(after: parent, deleted: w.deleted, canonicalBody: bodyJSON.canonicalBytes)
            }
            do {
                try tree.addChild(newRev, of: parent, deleted: w.deleted, body: bodyBytes)
            } catch {
                return .failure(.updateConflict)
            }
        case .overwrite:
            let parent = tree.winner?.rev
            newRev = RevID.next(after: parent, deleted: w.deleted, canonicalBody: bodyJSON.canonicalBytes)
            do {
                try tree.addChild(newRev, of: parent, deleted: w.deleted, body: bodyBytes)
            } catch {
                return .failure(.updateConflict)
            }
        case .replicated(let history):
            guard let first = history.first else {
                return .failure(SetteeError(.badRequest, "Empty revision history"))
            }
            newRev = first
            do {
                guard try tree.insert(path: history, deleted: w.deleted, body: bodyBytes) else {
                    return .success(newRev)  // already stored: replication is idempotent
                }
            } catch {
                return .failure(SetteeError(.badRequest, "Invalid revision history for \(w.id)"))
            }
        }
        tree.stem(limit: revsLimit)
        guard let winner = tree.winner else {
            throw SetteeError(.internalError, "Revision tree without leaves for \(w.id)")
        }
        // The stored tree omits the old winner's body (it lives in the body column). If the old winner
        // is still a leaf but no longer wins, its body must move into the tree.
        if let old = oldWinner, old != winner.rev, let rowid,
           let i = tree.index(of: old), tree.isLeaf(i), tree.nodes[i].body == nil {
            let fetch = try db.prepare(sql.fetchBody)
            fetch.bind(rowid, at: 1)
            if try fetch.step() { tree.setBody(fetch.blob(0), for: old) }
            fetch.reset()
        }
        var flags: Int64 = winner.deleted ? DocFlags.deleted : 0
        var live = 0
        for i in tree.leafIndices where !tree.nodes[i].deleted { live += 1 }
        if live > 1 { flags |= DocFlags.conflicted }
        let winnerChanged = winner.rev != oldWinner
        let winnerBody = winner.body ?? Array("{}".utf8)
        if winnerChanged {
            if winnerBody.containsAttachments { flags |= DocFlags.hasAttachments }
        }
        let encodedTree = tree.encoded(omitBodyOf: winner.rev)
        let seq = Int64(database.nextSequence())
        if let rowid {
            if winnerChanged {
                let update = try db.prepare(sql.updateAll)
                update.bind(seq, at: 1)
                update.bind(winner.rev.description, at: 2)
                update.bind(flags, at: 3)
                update.bind(text: winnerBody, at: 4)
                update.bind(bytes: encodedTree, at: 5)
                update.bind(rowid, at: 6)
                _ = try update.step()
                update.reset()
            } else {
                let update = try db.prepare(sql.updateTree)
                update.bind(seq, at: 1)
                update.bind(flags, at: 2)
                update.bind(bytes: encodedTree, at: 3)
                update.bind(rowid, at: 4)
                _ = try update.step()
                update.reset()
            }
        } else {
            let insert = try db.prepare(sql.insert)
            insert.bind(w.id, at: 1)
            insert.bind(seq, at: 2)
            insert.bind(winner.rev.description, at: 3)
            insert.bind(flags, at: 4)
            insert.bind(text: winnerBody, at: 5)
            insert.bind(bytes: encodedTree, at: 6)
            _ = try insert.step()
            insert.reset()
        }
        database.noteChange(collection: fullName, id: w.id)
        return .success(newRev)
    }

    /// Inserts a brand-new document with a single revision unless the id exists. Returns whether it inserted.
    private func insertIfAbsent(id: String, rev: RevID, deleted: Bool, body: [UInt8], db: Connection) throws -> Bool {
        var tree = RevTree()
        try? tree.addChild(rev, of: nil, deleted: deleted, body: nil)
        var flags: Int64 = deleted ? DocFlags.deleted : 0
        if body.containsAttachments { flags |= DocFlags.hasAttachments }
        let seq = Int64(database.nextSequence())
        let insert = try db.prepare(sql.insertIfAbsent)
        insert.bind(id, at: 1)
        insert.bind(seq, at: 2)
        insert.bind(rev.description, at: 3)
        insert.bind(flags, at: 4)
        insert.bind(text: body, at: 5)
        insert.bind(bytes: tree.encoded(), at: 6)
        _ = try insert.step()
        insert.reset()
        guard db.changes == 1 else {
            database.releaseSequence()
            return false
        }
        database.noteChange(collection: fullName, id: id)
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
        if tree.isEmpty {
            try db.prepare("DELETE FROM \(docsTable) WHERE rowid = ?").run([.integer(rowid)])
            try db.prepare("INSERT INTO purges(seq, collection, id) VALUES (?, ?, ?)")
                .run([.integer(seq), .integer(self.id), .text(id)])
        } else {
            let winner = tree.winner!
            var flags: Int64 = winner.deleted ? DocFlags.deleted : 0
            if tree.leafIndices.filter({ !tree.nodes[$0].deleted }).count > 1 { flags |= DocFlags.conflicted }
            let body = winner.body ?? Array("{}".utf8)
            if body.containsAttachments { flags |= DocFlags.hasAttachments }
            let update = try db.prepare(
                "UPDATE \(docsTable) SET seq = ?, rev = ?, flags = ?, body = ?, tree = ? WHERE rowid = ?")
            update.bind(seq, at: 1)
            update.bind(winner.rev.description, at: 2)
            update.bind(flags, at: 3)
            update.bind(text: body, at: 4)
            update.bind(bytes: tree.encoded(omitBodyOf: winner.rev), at: 5)
            update.bind(rowid, at: 6)
            _ = try update.step()
            update.reset()
        }
        database.noteChange(collection: fullName, id: id)
        return purged
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
