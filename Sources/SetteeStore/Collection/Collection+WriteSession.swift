import SetteeCore

extension Collection {
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
        /// Whether the last write applied was a replicated revision the document had already (nothing stored).
        var lastWasAlreadyStored = false
        var body: [UInt8] = []
        var tree: [UInt8] = []
        var rev: [UInt8] = []
        /// Stores a revision's routing (``Collection/storeRouting(_:id:rev:session:)``), prepared at its first use.
        lazy var storeRouting: Statement? = try? db.prepare(Collection.storeRoutingSQL)

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

        /// Readies a session kept by an `inBatch` for its next write (``Collection/writeSession(db:revsLimit:)``):
        /// what one write leaves behind is cleared, the prepared statements and buffers stay.
        func reset() {
            changed.removeAll(keepingCapacity: true)
            pendingTree = nil
            archiveHead = nil
            archived = false
            resetArchive()
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

        /// Forgets the archive rows' next id (another write of the batch may have archived since) and what is
        /// pending (flushed by the write that queued it).
        private func resetArchive() {
            pending.removeAll(keepingCapacity: true)
            nextArchiveID = nil
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
}
