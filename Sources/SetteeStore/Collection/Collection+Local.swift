public import SetteeCore

/// `_local` documents: per-node state (replication checkpoints) that is never replicated and never in the feed.
extension Collection {
    /// A stored local document.
    package struct LocalDocument: Sendable {
        /// The id including the `_local/` prefix.
        public let id: String
        /// `0-N`, counting the document's saves.
        public let rev: String
        /// The body without `_id`/`_rev`.
        public let body: JSONObject
    }

    /// The local document `id` (with or without the `_local/` prefix), or nil.
    package func localDocument(id: String) throws -> LocalDocument? {
        let id = Collection.localID(id)
        return try database.read { db in
            let stmt = try db.prepare("SELECT rev, body FROM \(localTable) WHERE id = ?")
            defer { stmt.reset() }
            stmt.bind(id, at: 1)
            guard try stmt.step() else { return nil }
            return LocalDocument(id: id, rev: stmt.string(0) ?? "0-1",
                                 body: try DocumentRecord.parseBody(stmt.blob(1) ?? []))
        }
    }

    /// Saves a local document. `rev` must be the current revision when the document exists.
    ///
    /// - Returns: the new revision, `0-N`.
    /// - Throws: `.conflict` when `rev` is not the current revision, `.badDocID` for an empty id.
    @discardableResult
    public func putLocal(id: String, body: JSONObject, rev: String?) throws -> String {
        let id = Collection.localID(id)
        guard id.utf8.count > 7 else { throw SetteeError(.badDocID, "Illegal document id `\(id)`") }
        let bytes = JSON.object(body).serializedBytes
        return try database.write { db in
            let current = try self.localRev(id: id, db: db)
            if let current, rev != current { throw SetteeError.updateConflict }
            if current == nil, let rev, rev != "0-0", !rev.hasPrefix("0-") { throw SetteeError.updateConflict }
            let n = (current.flatMap { Int($0.dropFirst(2)) } ?? 0) + 1
            let newRev = "0-\(n)"
            try db.withStatement("INSERT OR REPLACE INTO \(self.localTable)(id, rev, body) VALUES (?, ?, ?)") { stmt in
                stmt.bind(id, at: 1)
                stmt.bind(newRev, at: 2)
                stmt.bind(text: bytes, at: 3)
                _ = try stmt.step()
            }
            return newRev
        }
    }

    /// Deletes a local document. `rev` must be its current revision.
    /// - Throws: `.notFound` if missing, `.conflict` on a stale `rev`.
    public func deleteLocal(id: String, rev: String?) throws {
        let id = Collection.localID(id)
        try database.write { db in
            guard let current = try self.localRev(id: id, db: db) else { throw SetteeError.missing }
            if let rev, rev != current { throw SetteeError.updateConflict }
            try db.prepare("DELETE FROM \(self.localTable) WHERE id = ?").run([.text(id)])
        }
    }

    /// Local documents in id order, with `_all_docs`' range, order and paging options (`includeDocs` is ignored:
    /// bodies always come with them).
    package func localDocuments(_ options: AllDocsOptions) throws -> [LocalDocument] {
        var conditions: [String] = []
        var values: [SQLiteValue] = []
        let (low, high) = options.descending ? (options.endKey, options.startKey) : (options.startKey, options.endKey)
        if let low {
            conditions.append(options.descending && !options.inclusiveEnd ? "id > ?" : "id >= ?")
            values.append(.text(Collection.localID(low)))
        }
        if let high {
            conditions.append(!options.descending && !options.inclusiveEnd ? "id < ?" : "id <= ?")
            values.append(.text(Collection.localID(high)))
        }
        let filter = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        let sql = "SELECT id, rev, body FROM \(localTable)\(filter) ORDER BY id \(options.descending ? "DESC" : "ASC") LIMIT ? OFFSET ?"
        values.append(.integer(Int64(min(options.limit ?? Int(Int64.max), Int(Int64.max)))))
        values.append(.integer(Int64(options.skip)))
        return try database.read { db in
            let stmt = try db.prepare(sql)
            defer { stmt.reset() }
            stmt.bind(values)
            var docs: [LocalDocument] = []
            while try stmt.step() {
                docs.append(LocalDocument(id: stmt.string(0) ?? "", rev: stmt.string(1) ?? "0-1",
                                          body: try DocumentRecord.parseBody(stmt.blob(2) ?? [])))
            }
            return docs
        }
    }

    private func localRev(id: String, db: Connection) throws -> String? {
        let stmt = try db.prepare("SELECT rev FROM \(localTable) WHERE id = ?")
        defer { stmt.reset() }
        stmt.bind(id, at: 1)
        return try stmt.step() ? stmt.string(0) : nil
    }

    static func localID(_ id: String) -> String {
        id.hasPrefix("_local/") ? id : "_local/" + id
    }
}
