package import SetteeCore

/// A sync function's outcome per revision (``RevisionWrite/routing``): stored with the revision, read by the
/// server's channel index.
extension Collection {
    static let storeRoutingSQL = "INSERT OR REPLACE INTO routes(collection, id, rev, data) VALUES (?, ?, ?, ?)"

    /// Stores a revision's routing in the write's transaction.
    func storeRouting(_ routing: [UInt8], id: String, rev: RevID, db: Connection) throws {
        try db.withStatement(Self.storeRoutingSQL) { insert in
            try bindRouting(insert, routing, id: id, rev: rev)
        }
    }

    /// ``storeRouting(_:id:rev:db:)`` with the write session's statement and buffers (a batch stores many).
    func storeRouting(_ routing: [UInt8], id: String, rev: RevID, session: WriteSession) throws {
        guard let insert = session.storeRouting else { return try storeRouting(routing, id: id, rev: rev, db: session.db) }
        defer { insert.reset() }
        try bindRouting(insert, routing, id: id, rev: rev)
    }

    private func bindRouting(_ insert: Statement, _ routing: [UInt8], id: String, rev: RevID) throws {
        var text: [UInt8] = []
        rev.write(into: &text)
        insert.bind(self.id, at: 1)
        insert.bind(id, at: 2)
        try text.withUnsafeBytes { revBytes in
            try routing.withUnsafeBytes { data in
                insert.bindNoCopy(text: revBytes, at: 3)
                insert.bindNoCopy(blob: data, at: 4)
                _ = try insert.step()
            }
        }
    }

    /// The routing stored with a revision of a document (nil: none, e.g. written before the sync function), on a
    /// connection the caller holds (a reader's or the writer's).
    package func routing(id: String, rev: RevID, db: Connection) throws -> [UInt8]? {
        try db.withStatement("SELECT data FROM routes WHERE collection = ? AND id = ? AND rev = ?",
                             [.integer(self.id), .text(id), .text(rev.description)]) { stmt in
            try stmt.step() ? stmt.blob(0) : nil
        }
    }

    /// Drops the routing of a document's revisions that are no longer leaves of its tree (its current leaves'
    /// stay: a conflict's loser may win again), in the caller's write transaction.
    package func pruneRouting(id: String, db: Connection) throws {
        let leaves = try db.withStatement("SELECT tree FROM \(docsTable) WHERE id = ?", [.text(id)]) { stmt -> [RevID] in
            guard try stmt.step() else { return [] }
            return try RevTree(encoded: stmt.blob(0) ?? []).rankedLeaves.map(\.rev)
        }
        let kept = Set(leaves.map(\.description))
        let stale = try db.withStatement("SELECT rev FROM routes WHERE collection = ? AND id = ?",
                                         [.integer(self.id), .text(id)]) { stmt in
            var out: [String] = []
            while try stmt.step() { if let r = stmt.string(0), !kept.contains(r) { out.append(r) } }
            return out
        }
        for rev in stale {
            try db.prepare("DELETE FROM routes WHERE collection = ? AND id = ? AND rev = ?")
                .run([.integer(self.id), .text(id), .text(rev)])
        }
    }
}

extension Collection {
    /// Stores the routing of revisions already stored (a sync function run again over them: `_resync`), in one
    /// transaction.
    package func setRouting(_ routings: [(id: String, rev: RevID, routing: [UInt8])]) throws {
        guard !routings.isEmpty else { return }
        try database.write { db in
            for r in routings { try self.storeRouting(r.routing, id: r.id, rev: r.rev, db: db) }
        }
    }
}
