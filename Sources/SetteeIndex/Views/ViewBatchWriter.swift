import SetteeCore
import SetteeStore

extension ViewManager {
    /// Where a view stands, as its registry row says at the start of a batch's transaction.
    struct ViewPosition {
        let lastSeq: Int64
        let building: Bool
        let fullText: Bool
        /// The feed's sequence when the build started.
        let buildSeq: Int64
        /// The last row id given out.
        let nextID: Int64
        let reduce: String

        /// Nil when the view was dropped.
        init?(_ view: StoredView, db: Connection) throws {
            let row = try db.withStatement("SELECT last_seq, state, full_text, build_seq, next_id, reduce FROM views WHERE id = ?",
                                           [.integer(view.id)]) { state in
                try state.step() ? (lastSeq: state.int64(0), building: IndexBuildState(rawValue: state.string(1) ?? "") == .building,
                                    fullText: state.int64(2) != 0, buildSeq: state.int64(3), nextID: state.int64(4),
                                    reduce: state.string(5) ?? "") : nil
            }
            guard let row else { return nil }
            (lastSeq, building, fullText, buildSeq, nextID, reduce) = (row.lastSeq, row.building, row.fullText, row.buildSeq,
                                                                       row.nextID, row.reduce)
        }
    }

    /// Writes one batch's map output into a view's tables: each changed document's old rows out, its new rows in
    /// (grouped, several rows per INSERT), its text keys into the full-text table, and the chunks whose reductions
    /// the change touched marked.
    struct BatchWriter {
        let view: StoredView
        let position: ViewPosition
        /// A build batch whose rows are sorted and stored at the end (``storeBuildRows()``), not per piece.
        let bulk: Bool
        let db: Connection
        /// The next row id (the view's `next_id` when the batch is done).
        private(set) var nextID: Int64
        /// Whether the view has a full-text table in use.
        private(set) var fullText: Bool
        /// Documents whose map function threw.
        private(set) var mapErrors = 0
        /// The chunks whose reductions the batch changed (not tracked while building: the build rebuilds them all).
        private(set) var dirty: ChunkMarks
        private var pending: [PendingRow] = []
        private let oldRows: Statement
        private let remove: Statement
        /// The full-text table's statements, once it has one.
        private var text: (remove: Statement, insert: Statement)?

        init(view: StoredView, position: ViewPosition, bulk: Bool, rowCapacity: Int, db: Connection) throws {
            self.view = view
            self.position = position
            self.bulk = bulk
            self.db = db
            nextID = position.nextID
            fullText = position.fullText
            dirty = ChunkMarks(view: view)
            pending.reserveCapacity(bulk ? rowCapacity : ViewManager.insertGroup)
            oldRows = try db.prepare("SELECT id, key, docid FROM \(view.table) WHERE doc = ?")
            remove = try db.prepare("DELETE FROM \(view.table) WHERE doc = ?")
            if fullText { _ = try textStatements() }
        }

        private mutating func textStatements() throws -> (remove: Statement, insert: Statement) {
            if let text { return text }
            let made = (remove: try db.prepare("DELETE FROM \(view.fts) WHERE rowid = ?"),
                        insert: try db.prepare("INSERT INTO \(view.fts)(rowid, text, docid, k, v) VALUES (?, ?, ?, ?, ?)"))
            text = made
            return made
        }

        /// A changed document's rows: the old ones removed, the map output's added (a map error is counted and
        /// logged, and the document has no rows, as in CouchDB).
        mutating func replace(_ change: Change, with output: MapOutput) throws {
            try removeRows(of: change)
            let rows: [MappedRow]
            switch output {
            case .rows(let r): rows = r
            case .skipped: return
            case .failed(let error):
                mapErrors += 1
                ViewManager.logger.info("view \(view.name): map function threw for document \(change.docID): \(error) — skipped")
                return
            }
            for row in rows { try add(row, of: change) }
        }

        /// While building, a document comes round again only if it changed after the build started (its old rows
        /// are from an earlier batch); one unchanged since is seen for the first time and has no rows.
        private mutating func removeRows(of change: Change) throws {
            guard !position.building || change.seq > position.buildSeq else { return }
            oldRows.bind(change.rowid, at: 1)
            defer { oldRows.reset() }
            var had = false
            while try oldRows.step() {
                had = true
                if !position.building { try dirty.mark(key: oldRows.blob(1) ?? [], doc: oldRows.string(2) ?? "", db: db) }
                if let removeText = text?.remove {
                    removeText.bind(oldRows.int64(0), at: 1)
                    try removeText.run()
                }
            }
            if had {
                remove.bind(change.rowid, at: 1)
                try remove.run()
            }
        }

        private mutating func add(_ row: MappedRow, of change: Change) throws {
            nextID += 1
            pending.append(PendingRow(doc: change.rowid, docID: change.docID, row: row, id: nextID))
            if pending.count == ViewManager.insertGroup && !bulk { try flush(into: view.table) }
            if let rowText = row.text {
                if !fullText {
                    try ViewManager.createFullTextTable(view, db: db)
                    try db.prepare("UPDATE views SET full_text = 1 WHERE id = ?").run([.integer(view.id)])
                    fullText = true
                }
                let insertText = try textStatements().insert
                insertText.bind(nextID, at: 1)
                insertText.bind(rowText, at: 2)
                insertText.bind(change.docID, at: 3)
                insertText.bind(text: row.keyJSON, at: 4)
                if let valueJSON = row.valueJSON { insertText.bind(text: valueJSON, at: 5) } else { insertText.bindNull(at: 5) }
                try insertText.run()
            }
            if !position.building { try dirty.mark(key: row.key, doc: change.docID, db: db) }
        }

        /// Inserts the pending rows into `table`, ``ViewManager/insertGroup`` rows per statement.
        mutating func flush(into table: String) throws {
            let insert = try db.prepare("INSERT INTO \(table)(doc, key, docid, k, v, id) VALUES (?, ?, ?, ?, ?, ?)")
            let insertMany = try db.prepare("INSERT INTO \(table)(doc, key, docid, k, v, id) VALUES "
                + Array(repeating: "(?, ?, ?, ?, ?, ?)", count: ViewManager.insertGroup).joined(separator: ", "))
            var start = 0
            while start < pending.count {
                let group = pending[start..<min(pending.count, start + ViewManager.insertGroup)]
                let full = group.count == ViewManager.insertGroup
                for (i, p) in group.enumerated() {
                    let statement = full ? insertMany : insert
                    let base = full ? Int32(i * 6) : 0
                    statement.bind(p.doc, at: base + 1)
                    statement.bind(bytes: p.row.key, at: base + 2)
                    statement.bind(p.docID, at: base + 3)
                    statement.bind(text: p.row.keyJSON, at: base + 4)
                    if let v = p.row.valueJSON { statement.bind(text: v, at: base + 5) } else { statement.bindNull(at: base + 5) }
                    statement.bind(p.id, at: base + 6)
                    if !full { try insert.run() }
                }
                if full { try insertMany.run() }
                start += group.count
            }
            pending.removeAll(keepingCapacity: true)
        }

        /// A build batch's rows, sorted by key: appended to the clustered table when they all come after its last
        /// row, else staged (``ViewManager/mergeStage(_:db:)`` moves them in key order when the build ends).
        mutating func storeBuildRows() throws {
            guard !pending.isEmpty else { return }
            pending.sort {
                let c = ViewRange.compareBytes($0.row.key, $1.row.key)
                return c != 0 ? c < 0 : $0.docID.utf8.lexicographicallyPrecedes($1.docID.utf8)
            }
            let first = pending[0]
            let appends = try db.withStatement("SELECT key, docid FROM \(view.table) ORDER BY key DESC, docid DESC LIMIT 1") { last in
                guard try last.step() else { return true }
                let c = ViewRange.compareBytes(last.blob(0) ?? [], first.row.key)
                return c < 0 || (c == 0 && (last.string(1) ?? "").utf8.lexicographicallyPrecedes(first.docID.utf8))
            }
            if !appends {
                try db.execute("CREATE TABLE IF NOT EXISTS \(view.stage)(key BLOB NOT NULL, docid TEXT NOT NULL, id INTEGER NOT NULL, doc INTEGER NOT NULL, k TEXT NOT NULL, v TEXT)")
            }
            try flush(into: appends ? view.table : view.stage)
        }
    }
}
