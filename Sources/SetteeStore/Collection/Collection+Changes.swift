package import SetteeCore

/// The change feed: each document's latest change, in sequence order.
extension Collection {
    /// One row of the change feed.
    package struct ChangeRow: Sendable {
        /// The sequence of the document's latest change.
        public let sequence: UInt64
        public let id: String
        /// The winning revision.
        public let rev: RevID
        /// Whether the winning revision is a tombstone.
        public let deleted: Bool
        /// Every leaf (winner first) when `style=all_docs` was asked, else nil.
        public let leaves: [RevID]?
        /// Live non-winning leaves, when `conflicts` was asked and there are some.
        public let conflicts: [RevID]?
        /// The winning body when `include_docs` was asked.
        public let body: [UInt8]?

        /// A row as a feed follower that kept it (an index of the feed) gives it back.
        package init(sequence: UInt64, id: String, rev: RevID, deleted: Bool, leaves: [RevID]? = nil,
                     conflicts: [RevID]? = nil, body: [UInt8]? = nil) {
            self.sequence = sequence
            self.id = id
            self.rev = rev
            self.deleted = deleted
            self.leaves = leaves
            self.conflicts = conflicts
            self.body = body
        }
    }

    /// What to read from the feed.
    package struct ChangesOptions: Sendable {
        /// Only changes after this sequence.
        public var since: UInt64 = 0
        public var limit: Int?
        /// Newest first.
        public var descending = false
        /// Include the winning body.
        public var includeDocs = false
        /// List every leaf revision (CouchDB's `style=all_docs`).
        public var allLeaves = false
        /// List live conflicting leaves.
        public var conflicts = false
        /// Only these documents (CouchDB's `_doc_ids` filter).
        public var documentIDs: [String]?
        public init(since: UInt64 = 0) { self.since = since }
    }

    /// Reads the change feed. Each document appears once, at its latest change; `_local` documents never do.
    package func changes(_ options: ChangesOptions) throws -> [ChangeRow] {
        try database.read { db in
            var rows: [ChangeRow] = []
            try self.scanChanges(options, db: db) { rows.append($0); return true }
            return rows
        }
    }

    /// Streams the change feed to `body` row by row (no intermediate array); return false to stop.
    package func forEachChange(_ options: ChangesOptions, _ body: (ChangeRow) throws -> Bool) throws {
        try database.read { db in
            try self.scanChanges(options, db: db, body)
        }
    }

    /// Changes counted exactly by ``changeCount(since:)``; past this many it answers an estimate.
    public static let exactChangeCount = 10_000

    /// How many documents changed after `since` (the feed's `pending`): exact up to ``exactChangeCount``, else
    /// the number of sequence numbers after `since` (an upper bound: one per change, fewer documents when some
    /// changed more than once) — SQLite's indexes keep no counts, and counting a million index entries for every
    /// page of a feed made reading it quadratic. (CouchDB's clustered `pending` is an estimate too.)
    public func changeCount(since: UInt64) throws -> Int {
        try database.read { db in
            let stmt = try db.prepare("SELECT count(*) FROM (SELECT 1 FROM \(docsTable) WHERE seq > ? LIMIT ?)")
            defer { stmt.reset() }
            stmt.bind(Int64(clamping: since), at: 1)
            stmt.bind(Self.exactChangeCount + 1, at: 2)
            let counted = try stmt.step() ? Int(stmt.int64(0)) : 0
            guard counted > Self.exactChangeCount else { return counted }
            let last = try db.prepare("SELECT max(seq) FROM \(docsTable)")
            defer { last.reset() }
            let top = try last.step() ? UInt64(clamping: last.int64(0)) : since
            return max(counted, Int(clamping: top &- min(top, since)))
        }
    }

    /// ``forEachChange(_:_:)`` on a connection the caller holds (in its read transaction, with other reads).
    package func forEachChange(_ options: ChangesOptions, db: Connection, _ body: (ChangeRow) throws -> Bool) throws {
        try scanChanges(options, db: db, body)
    }

    /// Steps through the feed, stopping as soon as `emit` returns false.
    func scanChanges(_ options: ChangesOptions, db: Connection, _ emit: (ChangeRow) throws -> Bool) throws {
        let needTree = options.allLeaves || options.conflicts
        var columns = "seq, id, rev, flags"
        columns += options.includeDocs ? ", body" : ", NULL"
        columns += needTree ? ", tree" : ", NULL"
        var sql = "SELECT \(columns) FROM \(docsTable) WHERE seq > ?"
        var binds: [SQLiteValue] = [.integer(Int64(clamping: options.since))]
        var cached = true
        if let ids = options.documentIDs {
            var unique = Array(Set(ids))
            if unique.isEmpty { return }
            // The list is padded (with its first id again) to a power of two from 8, so that statements repeat and
            // come from the connection's cache: a channel feed reads its documents this way on every request.
            let padded = max(8, 1 << (Int.bitWidth - (unique.count - 1).leadingZeroBitCount))
            cached = padded <= 2048
            if cached { unique += Array(repeating: unique[0], count: padded - unique.count) }
            sql += " AND id IN (\(Array(repeating: "?", count: unique.count).joined(separator: ",")))"
            binds += unique.map { .text($0) }
        }
        sql += options.descending ? " ORDER BY seq DESC" : " ORDER BY seq ASC"
        if let limit = options.limit {
            sql += " LIMIT ?"
            binds.append(.integer(Int64(max(0, limit))))
        }
        let stmt = cached ? try db.prepare(sql) : try db.prepareUncached(sql)
        defer { stmt.reset() }
        stmt.bind(binds)
        while try stmt.step() {
            guard let rev = RevID(stmt.string(2) ?? "") else { continue }
            let flags = DocFlags(rawValue: stmt.int64(3))
            var leaves: [RevID]?
            var conflicts: [RevID]?
            if needTree {
                let tree = try RevTree(encoded: stmt.blob(5) ?? [])
                let ranked = tree.rankedLeaves
                if options.allLeaves { leaves = ranked.map(\.rev) }
                if options.conflicts, flags.contains(.conflicted) {
                    conflicts = ranked.dropFirst().filter { !$0.deleted }.map(\.rev)
                }
            }
            let more = try emit(ChangeRow(sequence: UInt64(stmt.int64(0)), id: stmt.string(1) ?? "", rev: rev,
                                          deleted: flags.contains(.deleted), leaves: leaves, conflicts: conflicts,
                                          body: options.includeDocs ? stmt.blob(4) : nil))
            if !more { return }
        }
    }

    /// How many documents were purged from this collection (CouchDB's `purge_seq` counts purges).
    public func purgeCount() throws -> Int {
        try database.read { db in
            let stmt = try db.prepare("SELECT count(*) FROM purges WHERE collection = ?")
            defer { stmt.reset() }
            stmt.bind(id, at: 1)
            return try stmt.step() ? stmt.int(0) : 0
        }
    }

    /// Ids purged after `since`, with the sequence of each purge (for feed followers such as indexes).
    public func purges(since: UInt64) throws -> [(sequence: UInt64, id: String)] {
        try database.read { db in
            let stmt = try db.prepare("SELECT seq, id FROM purges WHERE collection = ? AND seq > ? ORDER BY seq")
            defer { stmt.reset() }
            stmt.bind(id, at: 1)
            stmt.bind(Int64(clamping: since), at: 2)
            var out: [(UInt64, String)] = []
            while try stmt.step() { out.append((UInt64(stmt.int64(0)), stmt.string(1) ?? "")) }
            return out
        }
    }
}
