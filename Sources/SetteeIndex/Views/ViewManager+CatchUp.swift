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
            let treeOf = try db.prepare(DocumentTable.treeByRowID(collection))
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
        guard let position = try ViewPosition(view, db: db) else { return .dropped }
        guard position.reduce == view.reduce else { return .redefined }
        guard position.lastSeq == batch.from else { return .stale }

        // While the view is built (every change so far older than the build), a batch's rows are sorted and
        // appended to the clustered table when they all come after its last row (keys emitted in the feed's order);
        // otherwise they go to a staging table, moved into the clustered table in key order when the build ends:
        // inserted directly they would touch pages all over it (the whole table, rewritten at every commit).
        // A batch with a document changed since the build started needs the rows stored so far: they move first.
        let bulk = position.building && !batch.changed.contains(where: { $0.seq > position.buildSeq })
        if !bulk {
            try mergeStage(view, db: db)
            try db.execute("CREATE INDEX IF NOT EXISTS \(view.table)_doc ON \(view.table)(doc)")
        }
        var writer = try BatchWriter(view: view, position: position, bulk: bulk, rowCapacity: batch.changed.count, db: db)
        for piece in batch.pieces {
            for index in piece { try writer.replace(batch.changed[index], with: outputs[index]) }
            if !bulk { try writer.flush(into: view.table) }
        }
        if bulk { try writer.storeBuildRows() }
        try finish(batch, writer, view: view, definition: definition, collection: collection, db: db)
        return .applied
    }

    /// After a batch's rows: the rows of documents purged since the batch's start dropped (purges leave no change;
    /// after the batch's own rows, which may belong to a document purged after the batch was read), the chunks'
    /// reductions rebuilt or refreshed, and the view's position and counters stored.
    private func finish(_ batch: CatchUpBatch, _ writer: BatchWriter, view: StoredView, definition: ViewDefinition,
                        collection: Collection, db: Connection) throws {
        let building = writer.position.building
        var dirty = writer.dirty
        let anyPurged = try ChangeFeed.anyPurged(collection, since: writer.position.lastSeq, db: db)
        let done = !batch.isFull
        if writer.bulk && (done || anyPurged) {
            try mergeStage(view, db: db)
        }
        if anyPurged {
            if writer.fullText { try db.execute("DELETE FROM \(view.fts) WHERE rowid IN (SELECT id FROM \(view.table) WHERE doc NOT IN (\(DocumentTable.allRowIDs(collection))))") }
            try db.execute("DELETE FROM \(view.table) WHERE doc NOT IN (\(DocumentTable.allRowIDs(collection)))")
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
        let count = batch.changed.count
        try db.prepare("UPDATE views SET last_seq = ?, state = ?, map_errors = map_errors + ?, chunk_version = chunk_version + ?, next_id = ? WHERE id = ?")
            .run([.integer(batch.maxSeq), .text((done || !building ? IndexBuildState.ready : .building).rawValue),
                  .integer(Int64(writer.mapErrors)), .integer(count > 0 || anyPurged || (building && done) ? 1 : 0),
                  .integer(writer.nextID), .integer(view.id)])
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
