public import SetteeCore

/// Reading documents by id, and `_all_docs`.
extension Collection {
    /// The stored record of a document (including tombstones), or nil if it never existed or was purged.
    ///
    /// ```swift
    /// // An older revision's body, while compaction has not dropped it:
    /// let record = try c.record(id: "a", withTree: true, archived: .revisions([old]))
    /// let body = record?.revision(old)?.body
    /// ```
    ///
    /// - Parameter withTree: also load the revision tree (needed for history, conflicts, older revisions).
    /// - Parameter archived: which replaced revisions' bodies to load from the archive (implies the tree); nil: none.
    package func record(id: String, withTree: Bool = false, archived: ArchivedBodies? = nil) throws -> DocumentRecord? {
        try database.read { db in try self.readRecord(id: id, withTree: withTree, archived: archived, db: db) }
    }

    func readRecord(id: String, withTree: Bool, archived: ArchivedBodies? = nil, db: Connection) throws -> DocumentRecord? {
        let withTree = withTree || archived != nil
        let stmt = try db.prepare(withTree ? sql.recordWithTree : sql.record)
        defer { stmt.reset() }
        stmt.bind(id, at: 1)
        guard try stmt.step() else { return nil }
        guard let rev = RevID(stmt.string(1) ?? "") else {
            throw SetteeError(.internalError, "Corrupt revision id for \(id)")
        }
        let flags = DocFlags(rawValue: stmt.int64(2))
        let body = stmt.blob(3) ?? Array("{}".utf8)
        var tree: RevTree?
        var bodies: [RevID: [UInt8]] = [:]
        if withTree {
            var t = try RevTree(encoded: stmt.blob(4) ?? [])
            t.setBody(body, for: rev)
            tree = t
            if let archived, !stmt.isNull(6) {
                bodies = try archivedBodies(archived, of: t, rowid: stmt.int64(5), head: stmt.int64(6), db: db)
            }
        }
        return DocumentRecord(id: id, sequence: UInt64(stmt.int64(0)), revID: rev,
                              deleted: flags.contains(.deleted),
                              conflicted: flags.contains(.conflicted), body: body, tree: tree, archived: bodies)
    }

    /// The archived bodies a read asked for, of revisions the tree holds without a body, from the document's
    /// archive chain (newest first; `.revisions` stops walking once it has them all).
    private func archivedBodies(_ wanted: ArchivedBodies, of tree: RevTree, rowid: Int64, head: Int64,
                                db: Connection) throws -> [RevID: [UInt8]] {
        var missing: Set<RevID>?
        if case .revisions(let revs) = wanted {
            missing = Set(revs.filter { tree.node($0).map { $0.body == nil } ?? false })
            if missing!.isEmpty { return [:] }
        }
        var out: [RevID: [UInt8]] = [:]
        let stmt = try db.prepare(sql.archived)
        defer { stmt.reset() }
        var next: Int64? = head
        var seen = Set<Int64>()
        while let id = next, seen.insert(id).inserted {
            stmt.bind(id, at: 1)
            guard try stmt.step(), stmt.int64(0) == rowid else { break }
            next = stmt.isNull(3) ? nil : stmt.int64(3)
            // A revision stemmed from the tree since it was archived is unreachable: left for compaction.
            if let rev = RevID(stmt.string(1) ?? ""), out[rev] == nil, let node = tree.node(rev), node.body == nil,
               missing?.contains(rev) ?? true {
                out[rev] = stmt.blob(2) ?? Array("{}".utf8)
                missing?.remove(rev)
            }
            stmt.reset()
            if missing?.isEmpty == true { break }
        }
        return out
    }

    /// Many documents in one read transaction (a consistent snapshot), in the order of `ids`; nil where missing.
    ///
    /// - Parameter archived: per id (same order), which replaced revisions' bodies to load; empty for none.
    package func records(ids: [String], withTree: Bool = false, archived: [ArchivedBodies?] = []) throws -> [DocumentRecord?] {
        precondition(archived.isEmpty || archived.count == ids.count, "one ArchivedBodies per id")
        return try database.read { db in
            let all = {
                try ids.indices.map { i in
                    try self.readRecord(id: ids[i], withTree: withTree, archived: archived.isEmpty ? nil : archived[i], db: db)
                }
            }
            // One read transaction for them all: one snapshot, and the file's and WAL's read locks taken once rather
            // than once per document (each statement alone is its own transaction).
            return ids.count > 1 ? try db.transaction(.deferred, all) : try all()
        }
    }

    /// One row of `_all_docs`.
    package struct AllDocsRow: Sendable {
        public let id: String
        public let rev: RevID
        public let deleted: Bool
        public let body: [UInt8]?
    }

    /// Options of `_all_docs` (CouchDB's meaning: with `descending`, `startKey` is the upper bound).
    package struct AllDocsOptions: Sendable {
        public var startKey: String?
        public var endKey: String?
        public var inclusiveEnd = true
        public var descending = false
        public var limit: Int?
        public var skip = 0
        public var includeDocs = false
        /// Count `totalRows` and `offset` (two counts over the whole collection); without, both are 0.
        public var countsRows = true
        public init() {}
    }

    /// Live documents in id order (raw UTF-8 byte order, as CouchDB's `_all_docs`), and the total live count.
    package func allDocs(_ options: AllDocsOptions) throws -> (totalRows: Int, offset: Int, rows: [AllDocsRow]) {
        try database.read { db in
            var conditions = [DocumentTable.live()]
            var binds: [SQLiteValue] = []
            let lowerOp = options.descending ? (options.inclusiveEnd ? ">=" : ">") : ">="
            let upperOp = options.descending ? "<=" : (options.inclusiveEnd ? "<=" : "<")
            let lower = options.descending ? options.endKey : options.startKey
            let upper = options.descending ? options.startKey : options.endKey
            if let lower { conditions.append("id \(lowerOp) ?"); binds.append(.text(lower)) }
            if let upper { conditions.append("id \(upperOp) ?"); binds.append(.text(upper)) }
            let order = options.descending ? "DESC" : "ASC"
            let columns = options.includeDocs ? "id, rev, flags, body" : "id, rev, flags"
            let limit = options.limit.map { max(0, $0) } ?? -1
            let sql = "SELECT \(columns) FROM \(docsTable) WHERE \(conditions.joined(separator: " AND ")) ORDER BY id \(order) LIMIT ? OFFSET ?"
            let stmt = try db.prepare(sql)
            defer { stmt.reset() }
            stmt.bind(binds + [.integer(Int64(limit)), .integer(Int64(max(0, options.skip)))])
            var rows: [AllDocsRow] = []
            while try stmt.step() {
                rows.append(AllDocsRow(id: stmt.string(0) ?? "", rev: RevID(stmt.string(1) ?? "")!,
                                       deleted: stmt.int64(2) & 1 != 0,
                                       body: options.includeDocs ? stmt.blob(3) : nil))
            }
            if !options.countsRows { return (0, 0, rows) }
            func live(_ condition: String, _ bound: String?) throws -> Int {
                let counts = try rowCounts(db, idCondition: condition, bound: bound)
                return counts.all - counts.deleted
            }
            let total = try live("", nil)
            // CouchDB's offset: rows that precede the range in iteration order, plus skip.
            var offset = max(0, options.skip)
            if let bound = options.descending ? upper : lower {
                offset += try live(options.descending ? " AND id > ?" : " AND id < ?", bound)
            }
            return (total, min(offset, total), rows)
        }
    }

    /// `_all_docs` with `keys`: one entry per key, nil where the document does not exist
    /// (deleted documents are returned with `deleted: true`).
    package func allDocs(keys: [String], includeDocs: Bool) throws -> [AllDocsRow?] {
        try database.read { db in
            let stmt = try db.prepare("SELECT rev, flags, body FROM \(docsTable) WHERE id = ?")
            return try keys.map { key in
                defer { stmt.reset() }
                stmt.bind(key, at: 1)
                guard try stmt.step(), let rev = RevID(stmt.string(0) ?? "") else { return nil }
                let deleted = stmt.int64(1) & 1 != 0
                return AllDocsRow(id: key, rev: rev, deleted: deleted,
                                  body: includeDocs && !deleted ? stmt.blob(2) : nil)
            }
        }
    }

    /// `_revs_diff` for many documents in one read: for each id, the revisions this collection lacks
    /// and its leaves that could be their ancestors. Ids with nothing missing are omitted.
    public func revsDiff(_ request: [(id: String, revs: [RevID])]) throws -> [(id: String, diff: RevTree.RevsDiff)] {
        try database.read { db in
            let all = {
                try db.withStatement("SELECT tree FROM \(self.docsTable) WHERE id = ?") { stmt in
                    var out: [(String, RevTree.RevsDiff)] = []
                    for (id, revs) in request {
                        stmt.bind(id, at: 1)
                        var tree = RevTree()
                        if try stmt.step() { tree = try RevTree(encoded: stmt.blob(0) ?? []) }
                        stmt.reset()
                        let diff = tree.revsDiff(revs)
                        if !diff.missing.isEmpty { out.append((id, diff)) }
                    }
                    return out
                }
            }
            // One read transaction, as records(ids:): one snapshot, the read locks taken once, not once per id.
            return request.count > 1 ? try db.transaction(.deferred, all) : try all()
        }
    }
}
