public import SetteeCore

/// Purging revisions for good (CouchDB's `_purge`).
extension Collection {
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
        let found = try db.withStatement("SELECT rowid, rev, tree, body FROM \(docsTable) WHERE id = ?", [.text(id)]) { lookup in
            guard try lookup.step() else { return nil as (Int64, RevTree)? }
            var tree = try RevTree(encoded: lookup.blob(2) ?? [])
            if let oldWinner = RevID(lookup.string(1) ?? "") { tree.setBody(lookup.blob(3), for: oldWinner) }
            return (lookup.int64(0), tree)
        }
        guard case (let rowid, var tree)? = found else { return [] }
        let purged = tree.purge(leaves: revisions ?? tree.leafIndices.map { tree.nodes[$0].rev })
        guard !purged.isEmpty else { return [] }
        let seq = Int64(database.nextSequence())
        try purgeArchive(rowid: rowid, keeping: tree, db: db)
        if tree.isEmpty {
            try db.prepare("DELETE FROM \(docsTable) WHERE rowid = ?").run([.integer(rowid)])
            try db.prepare("INSERT INTO purges(seq, collection, id) VALUES (?, ?, ?)")
                .run([.integer(seq), .integer(self.id), .text(id)])
            try db.prepare("DELETE FROM expiry WHERE collection = ? AND id = ?").run([.integer(self.id), .text(id)])
            try db.prepare("DELETE FROM routes WHERE collection = ? AND id = ?").run([.integer(self.id), .text(id)])
        } else {
            let winner = tree.winner!
            let body = winner.body ?? Array("{}".utf8)
            let flags = DocFlags(deleted: winner.deleted, liveLeaves: tree.leafIndices.filter({ !tree.nodes[$0].deleted }).count,
                                 hasAttachments: body.containsAttachments)
            try db.withStatement("UPDATE \(docsTable) SET seq = ?, rev = ?, flags = ?, body = ?, tree = ? WHERE rowid = ?") { update in
                update.bind(seq, at: 1)
                update.bind(winner.rev.description, at: 2)
                update.bind(flags.rawValue, at: 3)
                update.bind(text: body, at: 4)
                update.bind(bytes: tree.encoded(omitBodyOf: winner.rev), at: 5)
                update.bind(rowid, at: 6)
                _ = try update.step()
            }
        }
        database.noteChanges(collection: fullName, ids: [id])
        return purged
    }

    /// Drops the archived bodies of a document's revisions that `tree` no longer holds (all of them when it is
    /// empty), so a purged revision is gone at once; the bodies kept are linked again in order and the row's
    /// `arch` names the newest (the row itself is deleted when the tree is empty).
    private func purgeArchive(rowid: Int64, keeping tree: RevTree, db: Connection) throws {
        let first = try db.withStatement("SELECT arch FROM \(docsTable) WHERE rowid = ?", [.integer(rowid)]) { head in
            try head.step() && !head.isNull(0) ? head.int64(0) : nil
        }
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
