import Foundation
import SetteeCore
import SetteeSQLPP
import SetteeStore
package import SetteeVector

/// The in-memory side of one vector index: the IVF structure (centroids, quantizer, lists of codes) loaded from its
/// tables on first use and kept in step with them by every catch-up. `lock` serializes mutation and search.
// @unchecked: `ivf` is guarded by `lock`, which callers hold across loading, searching and absorbing changes (a
// Mutex's closure would have to span database reads and the caller's search body).
final class VectorIndexState: @unchecked Sendable {
    let lock = NSLock()
    /// nil until loaded (and after a failed write, so that the next use reloads what was committed).
    var ivf: IVFIndex?
}

/// Vector indexes on disk: `vecidx_N(doc, list, code, vector)` holds each document's list, its encoded vector and
/// the raw float32 vector (kept for exact search before training and for retraining); `vecidx_N_meta` holds the
/// trained centroids and quantizer; a lazy index's `vecidx_N_pending(doc, seq, value)` holds the values the app
/// has yet to embed.
extension IndexManager {
    static func vectorTables(_ table: String) -> (meta: String, pending: String) { ("\(table)_meta", "\(table)_pending") }

    static func createVectorTables(_ info: IndexInfo, db: Connection) throws {
        let t = vectorTables(info.table)
        try db.execute("CREATE TABLE \(info.table)(doc INTEGER PRIMARY KEY, list INTEGER NOT NULL, code BLOB, vector BLOB NOT NULL)")
        try db.execute("CREATE TABLE \(t.meta)(key TEXT PRIMARY KEY, value)")
        try db.execute("CREATE TABLE \(t.pending)(doc INTEGER PRIMARY KEY, seq INTEGER NOT NULL, value TEXT NOT NULL)")
    }

    static func dropVectorTables(_ info: IndexInfo, db: Connection) throws {
        let t = vectorTables(info.table)
        try db.execute("DROP TABLE IF EXISTS \(t.meta)")
        try db.execute("DROP TABLE IF EXISTS \(t.pending)")
    }

    /// Runs `body` with the loaded IVF structure of a vector index, holding its lock. Catch the index up first.
    ///
    /// ```swift
    /// let matches = try manager.withVectorIndex(info) { ivf in try ivf.search(query, k: 10, nprobes: 8) }
    /// ```
    package func withVectorIndex<T>(_ info: IndexInfo, _ body: (IVFIndex) throws -> T) throws -> T {
        let state = vectorState(info)
        state.lock.lock()
        defer { state.lock.unlock() }
        if let ivf = state.ivf { return try body(ivf) }
        let ivf = try database.read { db in try loadedIndex(state, info, db: db) }
        return try body(ivf)
    }

    /// Whether a vector index has trained (searches before that are exact).
    public func isVectorIndexTrained(_ info: IndexInfo) throws -> Bool {
        try withVectorIndex(info) { $0.isTrained }
    }

    /// Loads the IVF structure of `info` from its tables if it is not in memory. Caller holds `state.lock`.
    func loadedIndex(_ state: VectorIndexState, _ info: IndexInfo, db: Connection) throws -> IVFIndex {
        if let ivf = state.ivf { return ivf }
        guard let options = info.spec.vector else { throw SetteeError(.internalError, "\(info.name) is not a vector index") }
        let t = IndexManager.vectorTables(info.table)
        let stored = try db.withStatement("SELECT value FROM \(t.meta) WHERE key = 'params'") { params in
            try params.step() ? params.blob(0) : nil
        }
        let ivf: IVFIndex
        do {
            if let stored {
                ivf = try IVFIndex(parameters: stored)
            } else {
                ivf = try IVFIndex(dimensions: options.dimensions, centroids: options.centroids, metric: options.metric,
                                   encoding: options.encoding)
            }
            let rows = try db.prepare("SELECT doc, list, code, vector FROM \(info.table)")
            defer { rows.reset() }
            while try rows.step() {
                let doc = rows.int64(0)
                if ivf.isTrained, let code = rows.blob(2) {
                    try ivf.add(id: doc, list: rows.int(1), code: code)
                } else {
                    let vector = IndexManager.floats(rows, 3)
                    guard vector.count == options.dimensions else { continue }
                    try vector.withUnsafeBufferPointer { buffer throws(VectorError) in try ivf.add(id: doc, vector: buffer) }
                }
            }
        } catch let error as VectorError {
            throw SetteeError(.storage, "Vector index \(info.name) could not be loaded: \(error)")
        }
        state.ivf = ivf
        return ivf
    }

    static func floats(_ stmt: Statement, _ column: Int32) -> [Float] {
        stmt.withTextBytes(column) { bytes in
            let n = bytes.count / MemoryLayout<Float>.size
            return [Float](unsafeUninitializedCapacity: n) { buffer, initialized in
                if n > 0 { UnsafeMutableRawBufferPointer(buffer).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<(n * 4)])) }
                initialized = n
            }
        }
    }

    static func bytes(_ vector: [Float]) -> [UInt8] { vector.withUnsafeBytes { Array($0) } }

    /// One catch-up batch of a vector index inside a write transaction; true when every change is absorbed.
    func catchUpVectorBatch(_ info: IndexInfo, collection: Collection, db: Connection, lastSeq: Int64,
                            building: Bool, purged: Bool) throws -> Bool {
        guard let options = info.spec.vector, let expression = info.spec.expressions.first else { return true }
        let state = vectorState(info)
        state.lock.lock()
        defer { state.lock.unlock() }
        do {
            if purged {
                try db.execute("DELETE FROM \(IndexManager.vectorTables(info.table).pending) WHERE doc NOT IN (\(DocumentTable.allRowIDs(collection)))")
                state.ivf = nil  // the purged documents' entries were deleted from the table; reload
            }
            let ivf = try loadedIndex(state, info, db: db)
            return try absorbVectorChanges(info, options: options, expression: expression, ivf: ivf, collection: collection,
                                           db: db, lastSeq: lastSeq, building: building, state: state)
        } catch {
            state.ivf = nil  // memory may be ahead of a transaction that will roll back
            throw error
        }
    }

    private func absorbVectorChanges(_ info: IndexInfo, options: VectorIndexOptions, expression: SQLExpression,
                                     ivf: IVFIndex, collection: Collection, db: Connection, lastSeq: Int64,
                                     building: Bool, state: VectorIndexState) throws -> Bool {
        let t = IndexManager.vectorTables(info.table)
        let remove = try db.prepare("DELETE FROM \(info.table) WHERE doc = ?")
        let upsert = try db.prepare("INSERT OR REPLACE INTO \(info.table)(doc, list, code, vector) VALUES (?, ?, ?, ?)")
        let removePending = try db.prepare("DELETE FROM \(t.pending) WHERE doc = ?")
        let upsertPending = try db.prepare("INSERT OR REPLACE INTO \(t.pending)(doc, seq, value) VALUES (?, ?, ?)")
        var evaluator = Evaluator()
        evaluator.predictor = Database.prediction.predictor
        let wanted = PropertyUsage.topLevelKeys(of: [expression] + (info.spec.whereClause.map { [$0] } ?? []),
                                                source: "_", primary: "_", aliases: []).map(JSONMemberSelector.init)
        let progress = try ChangeFeed.read(collection, after: lastSeq, limit: IndexManager.batchSize, db: db) { change in
            let rowid = change.rowid
            func drop() throws {
                if building { return }
                remove.bind(rowid, at: 1)
                try remove.run()
                if options.isLazy {
                    removePending.bind(rowid, at: 1)
                    try removePending.run()
                }
                ivf.remove(id: rowid)
            }
            if change.isDeleted { try drop(); return }
            guard let body = try? change.body(members: wanted) else { try drop(); return }
            let document = change.document(body: body)
            let value: JSON?
            if let condition = info.spec.whereClause,
               (try? evaluator.isTrue(condition, in: Row(primaryName: "_", primary: document))) != true {
                value = nil
            } else {
                do { value = try evaluator.evaluate(expression, document: document) } catch { value = nil }
            }
            if options.isLazy {
                // The vector is the app's to compute: hand out the value (again, if the document changed).
                try drop()
                guard let value else { return }
                upsertPending.bind(rowid, at: 1)
                upsertPending.bind(change.seq, at: 2)
                upsertPending.bind(text: value.serializedBytes, at: 3)
                try upsertPending.run()
                return
            }
            guard let vector = VectorSearch.floats(value), vector.count == options.dimensions else {
                try drop()  // not a vector of the index's dimensions: not indexed, never an error
                return
            }
            try store(vector, for: rowid, in: info, ivf: ivf, upsert: upsert)
        }
        if !building || progress.isComplete { try trainIfDue(info, options: options, ivf: ivf, db: db, state: state) }
        try IndexManager.recordProgress(info, progress, building: building, db: db)
        return progress.isComplete
    }

    /// Writes one document's vector (encoded if the index is trained) and adds it to the in-memory lists.
    func store(_ vector: [Float], for rowid: Int64, in info: IndexInfo, ivf: IVFIndex, upsert: Statement) throws {
        let (list, code) = try vector.withUnsafeBufferPointer { buffer throws(VectorError) in try ivf.encode(buffer) }
        upsert.bind(rowid, at: 1)
        upsert.bind(list, at: 2)
        if ivf.isTrained { upsert.bind(bytes: code, at: 3) } else { upsert.bindNull(at: 3) }
        upsert.bind(bytes: IndexManager.bytes(vector), at: 4)
        try upsert.run()
        if ivf.isTrained {
            try ivf.add(id: rowid, list: list, code: code)
        } else {
            try vector.withUnsafeBufferPointer { buffer throws(VectorError) in try ivf.add(id: rowid, vector: buffer) }
        }
    }

    /// Trains once `minTrainingSize` vectors exist, and again whenever the index has doubled since its last training
    /// on fewer than `maxTrainingSize` vectors: k-means on a seeded sample, then every vector re-assigned and re-encoded.
    func trainIfDue(_ info: IndexInfo, options: VectorIndexOptions, ivf: IVFIndex, db: Connection,
                    state: VectorIndexState) throws {
        let t = IndexManager.vectorTables(info.table)
        let count = ivf.count
        if ivf.isTrained {
            let trainedOn = Int(try db.int64("SELECT value FROM \(t.meta) WHERE key = 'trained_count'") ?? 0)
            guard trainedOn < options.effectiveMaxTrainingSize, count >= 2 * max(trainedOn, 1) else { return }
        } else {
            guard count >= options.effectiveMinTrainingSize else { return }
        }
        try train(info, options: options, db: db, state: state)
    }

    /// Trains the index of `info` on its stored vectors and re-encodes them all.
    func train(_ info: IndexInfo, options: VectorIndexOptions, db: Connection, state: VectorIndexState) throws {
        let t = IndexManager.vectorTables(info.table)
        var docs: [Int64] = []
        var data: [Float] = []
        try db.withStatement("SELECT doc, vector FROM \(info.table) ORDER BY doc") { rows in
            while try rows.step() {
                let v = IndexManager.floats(rows, 1)
                guard v.count == options.dimensions else { continue }
                docs.append(rows.int64(0))
                data.append(contentsOf: v)
            }
        }
        let n = docs.count
        let d = options.dimensions
        // A seeded sample of at most maxTrainingSize vectors (partial Fisher–Yates over the row positions).
        var order = Array(0..<n)
        var rng = SeededGenerator(seed: 0x5E77EE ^ UInt64(n))
        let sampleSize = min(n, options.effectiveMaxTrainingSize)
        if sampleSize < n {
            for i in 0..<sampleSize { order.swapAt(i, Int.random(in: i..<n, using: &rng)) }
        }
        var sample = [Float]()
        sample.reserveCapacity(sampleSize * d)
        for i in order.prefix(sampleSize) { sample.append(contentsOf: data[(i * d)..<((i + 1) * d)]) }
        let fresh: IVFIndex
        do {
            fresh = try IVFIndex(dimensions: d, centroids: options.centroids, metric: options.metric, encoding: options.encoding)
            try sample.withUnsafeBufferPointer { buffer throws(VectorError) in
                try fresh.train(buffer, seed: 0x5E77EE, parallel: IndexManager.parallel)
            }
        } catch {
            throw SetteeError(.storage, "Training vector index \(info.name) failed: \(error)")
        }
        let update = try db.prepare("UPDATE \(info.table) SET list = ?, code = ? WHERE doc = ?")
        try data.withUnsafeBufferPointer { all in
            for (i, doc) in docs.enumerated() {
                let vector = UnsafeBufferPointer(rebasing: all[(i * d)..<((i + 1) * d)])
                let (list, code) = try fresh.encode(vector)
                update.bind(list, at: 1)
                update.bind(bytes: code, at: 2)
                update.bind(doc, at: 3)
                try update.run()
                try fresh.add(id: doc, list: list, code: code)
            }
        }
        let meta = try db.prepare("INSERT OR REPLACE INTO \(t.meta)(key, value) VALUES (?, ?)")
        try meta.run([.text("params"), .blob(fresh.parameters())])
        try meta.run([.text("trained_count"), .integer(Int64(n))])
        state.ivf = fresh
    }

    /// Runs k-means' assignment chunks on every core.
    static func parallel(_ n: Int, _ body: @Sendable (Int) -> Void) {
        DispatchQueue.concurrentPerform(iterations: n, execute: body)
    }
}
