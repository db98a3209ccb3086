import Foundation
import Logging
import SetteeCore
import SetteeStore

/// Catching a view up with the change feed, a batch at a time (``ViewManager/update(_:definition:collection:)``):
/// a batch is read from a snapshot and mapped on other threads with no lock held, then written in one write
/// transaction that checks the view is still where the batch started.
extension ViewManager {
    /// A batch of changes read from the feed, mapping in pieces on other threads.
    struct CatchUpBatch: Sendable {
        /// The view's sequence the batch follows.
        let from: Int64
        let changed: [Change]
        let pieces: [Range<Int>]
        let mapped: [Pending<[MapOutput]>]
        /// The highest sequence in the batch (`from` when it is empty).
        let maxSeq: Int64

        /// A full batch: more changes may follow it.
        var isFull: Bool { changed.count >= ViewManager.batchSize }

        /// The map outputs, in batch order (waits for the mapping; a JavaScript engine's failure is thrown).
        func outputs() throws -> [MapOutput] {
            var all: [MapOutput] = []
            all.reserveCapacity(changed.count)
            for future in mapped { all += try future.get() }
            return all
        }
    }

    /// What writing a batch came to.
    enum CatchUpOutcome {
        case applied
        /// The view's sequence is no longer the batch's `from`: it is read again.
        case stale
        /// The view was dropped.
        case dropped
        /// The view's reduce is no longer the one the caller holds (re-registered with another): nothing written.
        case redefined
    }

    /// Reads up to ``batchSize`` changes after `sequence` in a read transaction and starts mapping them, a piece at a
    /// time as they are read (the first piece small, so the mapping starts soon).
    func readBatch(after sequence: Int64, definition: ViewDefinition, collection: Collection) throws -> CatchUpBatch {
        try database.read { db in
            // A document in conflict is mapped with its `_conflicts`, as CouchDB's indexer opens it.
            let treeOf = try db.prepare("SELECT tree FROM \(collection.docsTable) WHERE rowid = ?")
            var changed: [Change] = []
            var pieces: [Range<Int>] = []
            var mapped: [Pending<[MapOutput]>] = []
            func startPiece(upTo end: Int) {
                let start = pieces.last?.upperBound ?? 0
                guard end > start else { return }
                let piece = Array(changed[start..<end])
                pieces.append(start..<end)
                mapped.append(Pending { try ViewManager.map(piece, definition: definition) })
            }
            var nextPiece = ViewManager.firstMapPiece
            let progress = try ChangeFeed.read(collection, after: sequence, limit: ViewManager.batchSize, db: db) { change in
                let deleted = change.isDeleted
                var conflicts: [String] = []
                if !deleted && change.flags.contains(.conflicted) {
                    treeOf.bind(change.rowid, at: 1)
                    defer { treeOf.reset() }
                    if try treeOf.step(), let tree = try? RevTree(encoded: treeOf.blob(0) ?? []) {
                        conflicts = tree.conflicts.map(\.description)
                    }
                }
                changed.append(Change(rowid: change.rowid, docID: change.docID, seq: change.seq,
                                      rev: change.revisionID, deleted: deleted,
                                      body: deleted ? [] : change.withBody { Array($0) }, conflicts: conflicts))
                if changed.count == nextPiece {
                    startPiece(upTo: nextPiece)
                    nextPiece += ViewManager.mapPiece
                }
            }
            startPiece(upTo: changed.count)
            return CatchUpBatch(from: sequence, changed: changed, pieces: pieces, mapped: mapped, maxSeq: progress.lastSeq)
        }
    }

    /// Writes a mapped batch inside a write transaction: each changed document's old rows out, its new rows in,
    /// the touched chunks' reductions recomputed, the view's sequence moved to the batch's end.
    func apply(_ batch: CatchUpBatch, _ outputs: [MapOutput], view: StoredView, definition: ViewDefinition,
               collection: Collection, db: Connection) throws -> CatchUpOutcome {
        let row = try db.withStatement("SELECT last_seq, state, full_text, build_seq, next_id, reduce FROM views WHERE id = ?",
                                       [.integer(view.id)]) { state in
            try state.step() ? (lastSeq: state.int64(0), building: IndexBuildState(rawValue: state.string(1) ?? "") == .building,
                                fullText: state.int64(2) != 0, buildSeq: state.int64(3), nextID: state.int64(4),
                                reduce: state.string(5) ?? "") : nil
        }
        guard let row else { return .dropped }
        let (lastSeq, building, buildSeq, reduce) = (row.lastSeq, row.building, row.buildSeq, row.reduce)
        var fullText = row.fullText
        var nextID = row.nextID
        guard reduce == view.reduce else { return .redefined }
        guard lastSeq == batch.from else { return .stale }
        var dirty = ChunkMarks(view: view)
        let changed = batch.changed

        // While the view is built (every change so far older than the build), a batch's rows are sorted and
        // appended to the clustered table when they all come after its last row (keys emitted in the feed's order);
        // otherwise they go to a staging table, moved into the clustered table in key order when the build ends:
        // inserted directly they would touch pages all over it (the whole table, rewritten at every commit).
        // A batch with a document changed since the build started needs the rows stored so far: they move first.
        let bulk = building && !changed.contains(where: { $0.seq > buildSeq })
        if !bulk {
            try mergeStage(view, db: db)
            try db.execute("CREATE INDEX IF NOT EXISTS \(view.table)_doc ON \(view.table)(doc)")
        }
        let oldRows = try db.prepare("SELECT id, key, docid FROM \(view.table) WHERE doc = ?")
        let remove = try db.prepare("DELETE FROM \(view.table) WHERE doc = ?")
        let removeText = try db.prepare("DELETE FROM \(view.fts) WHERE rowid = ?")
        let insertText = try db.prepare("INSERT INTO \(view.fts)(rowid, text, docid, k, v) VALUES (?, ?, ?, ?, ?)")
        var mapErrors = 0

        // Remove each changed document's old rows, insert its new ones — by groups of rows per statement.
        var pending: [PendingRow] = []
        pending.reserveCapacity(bulk ? changed.count : ViewManager.insertGroup)
        func flushRows(into table: String) throws {
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
        for piece in batch.pieces {
            for index in piece {
                let change = changed[index], output = outputs[index]
                let rowid = change.rowid
                // While building, a document comes round again only if it changed after the build started (its old
                // rows are from an earlier batch); one unchanged since is seen for the first time and has no rows.
                if !building || change.seq > buildSeq {
                    oldRows.bind(rowid, at: 1)
                    var had = false
                    while try oldRows.step() {
                        had = true
                        if !building { try dirty.mark(key: oldRows.blob(1) ?? [], doc: oldRows.string(2) ?? "", db: db) }
                        if fullText {
                            removeText.bind(oldRows.int64(0), at: 1)
                            try removeText.run()
                        }
                    }
                    oldRows.reset()
                    if had {
                        remove.bind(rowid, at: 1)
                        try remove.run()
                    }
                }
                let rows: [MappedRow]
                switch output {
                case .rows(let r): rows = r
                case .skipped: continue
                case .failed(let error):
                    mapErrors += 1
                    ViewManager.logger.info("view \(view.name): map function threw for document \(change.docID): \(error) — skipped")
                    continue
                }
                for row in rows {
                    nextID += 1
                    pending.append(PendingRow(doc: rowid, docID: change.docID, row: row, id: nextID))
                    if pending.count == ViewManager.insertGroup && !bulk { try flushRows(into: view.table) }
                    if let text = row.text {
                        if !fullText {
                            fullText = true
                            try db.prepare("UPDATE views SET full_text = 1 WHERE id = ?").run([.integer(view.id)])
                        }
                        insertText.bind(nextID, at: 1)
                        insertText.bind(text, at: 2)
                        insertText.bind(change.docID, at: 3)
                        insertText.bind(text: row.keyJSON, at: 4)
                        if let valueJSON = row.valueJSON { insertText.bind(text: valueJSON, at: 5) } else { insertText.bindNull(at: 5) }
                        try insertText.run()
                    }
                    if !building { try dirty.mark(key: row.key, doc: change.docID, db: db) }
                }
            }
            if !bulk { try flushRows(into: view.table) }
        }

        // Purges leave no change: the rows of documents gone since the batch's start are dropped — after the
        // batch's own rows, which may belong to a document purged after the batch was read.
        if bulk && !pending.isEmpty {
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
            try flushRows(into: appends ? view.table : view.stage)
        }
        let anyPurged = try ChangeFeed.anyPurged(collection, since: lastSeq, db: db)
        let done = !batch.isFull
        if bulk && (done || anyPurged) {
            try mergeStage(view, db: db)
        }
        if anyPurged {
            try db.execute("DELETE FROM \(view.fts) WHERE rowid IN (SELECT id FROM \(view.table) WHERE doc NOT IN (SELECT rowid FROM \(collection.docsTable)))")
            try db.execute("DELETE FROM \(view.table) WHERE doc NOT IN (SELECT rowid FROM \(collection.docsTable))")
            dirty.all = true
        }
        if building {
            if done {
                // The build's index of rows by document, sorted at once (SQLite's sorter on every core).
                let threads = min(ProcessInfo.processInfo.activeProcessorCount, 4)
                try db.execute("PRAGMA threads = \(threads)")
                defer { try? db.execute("PRAGMA threads = 0") }
                try db.execute("CREATE INDEX IF NOT EXISTS \(view.table)_doc ON \(view.table)(doc)")
                try rebuildChunks(view, definition: definition, db: db)
            }
        } else if dirty.all {
            try rebuildChunks(view, definition: definition, db: db)
        } else {
            for chunk in dirty.chunks.sorted() { try refreshChunk(chunk, view: view, definition: definition, db: db) }
        }
        let count = changed.count
        try db.prepare("UPDATE views SET last_seq = ?, state = ?, map_errors = map_errors + ?, chunk_version = chunk_version + ?, next_id = ? WHERE id = ?")
            .run([.integer(batch.maxSeq), .text((done || !building ? IndexBuildState.ready : .building).rawValue), .integer(Int64(mapErrors)),
                  .integer(count > 0 || anyPurged || (building && done) ? 1 : 0), .integer(nextID), .integer(view.id)])
        return .applied
    }

    /// Moves a build's staged rows into the view's clustered table, in key order (one sort, sequential inserts),
    /// and drops the staging table; nothing when there is none.
    func mergeStage(_ view: StoredView, db: Connection) throws {
        guard try db.int64("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(view.stage)]) != nil else { return }
        // SQLite's sorter may use every core for this sort.
        try db.execute("PRAGMA threads = \(min(ProcessInfo.processInfo.activeProcessorCount, 4))")
        defer { try? db.execute("PRAGMA threads = 0") }
        try db.execute("INSERT INTO \(view.table)(key, docid, id, doc, k, v) SELECT key, docid, id, doc, k, v FROM \(view.stage) ORDER BY key, docid, id")
        try db.execute("DROP TABLE \(view.stage)")
    }
}
