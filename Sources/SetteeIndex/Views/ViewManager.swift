import Foundation
import Logging
import SetteeCore
import SetteeStore

/// A view index as the registry holds it.
struct StoredView: Sendable, Hashable {
    let id: Int64
    let collectionID: Int64
    let name: String
    let version: String
    let reduce: String
    var table: String { "view_\(id)" }
    var chunks: String { "view_\(id)_chunks" }
    var fts: String { "view_\(id)_fts" }
    /// Rows of a build, appended in the order they are mapped, then moved into `table` in key order at once.
    var stage: String { "view_\(id)_stage" }
}

/// Keeps a database's map/reduce views current by reading its change feed (the index manager's view kind).
///
/// Each view has a row in the `views` registry (name, version, the reduce its stored reductions were made with, the
/// last sequence absorbed) and three tables: `view_N(id, doc, key, docid, k, v)` — one row per emitted pair, `key` the
/// collatable encoding (``ViewCollator``), `k`/`v` the key's and value's JSON — with an index on `(key, docid)`;
/// `view_N_fts`, an FTS5 table of the rows emitted with a ``TextKey``; and `view_N_chunks`, which cuts the rows, in
/// key order, into chunks of about ``chunkSize`` rows and keeps each chunk's row count and reduction. A reduce over a
/// range reads the stored reductions of the chunks inside it and reduces only the rows of the (at most two) chunks at
/// its ends — CouchDB's B-tree inner-node reductions, in a table.
///
/// Catching up reads the changes after the view's sequence and runs the map function on each winning revision with
/// no lock held, then, in one write transaction per batch, deletes each changed document's rows, inserts the new
/// ones and recomputes the chunks they touched (``update(_:definition:collection:)``, `ViewManager+CatchUp.swift`).
/// A view is brought up to date when queried (unless the query says not to).
// @unchecked: the registry, up-to-date marks, chunk directories and per-view update locks are guarded by `lock`;
// one view's catch-up holds its own lock from `updating` (held across a batch's map and write, which a Mutex's
// closure can't span).
final class ViewManager: @unchecked Sendable {
    /// Rows per chunk after a build or a split; a chunk splits above twice that.
    static let chunkSize = 64
    /// Documents per catch-up transaction.
    static let batchSize = 5_000

    unowned let database: Database
    private let lock = NSLock()
    private var registry: [Int64: [String: StoredView]] = [:]
    private var upToDate: [Int64: UInt64] = [:]
    private var loaded = false
    private var directories: [Int64: ChunkDirectory] = [:]
    /// Per view: held by the one caller bringing it up to date.
    private var updating: [Int64: NSLock] = [:]
    private let preparing = NSLock()

    /// Runs `body` with a collator from the process's pool (opening an ICU collator costs more than a short query).
    func withCollator<T>(_ body: (ViewCollator) throws -> T) throws -> T {
        try ViewCollator.withPooled(body)
    }

    /// The view's chunk directory as of `version` (read in the caller's transaction).
    func directory(_ view: StoredView, version: Int64, db: Connection) throws -> ChunkDirectory {
        if let cached = lock.withLock({ directories[view.id] }), cached.version == version { return cached }
        let loaded = try ChunkDirectory.load(view, version: version, db: db)
        lock.withLock { directories[view.id] = loaded }
        return loaded
    }

    static func shared(for database: Database) throws -> ViewManager {
        let manager = database.extensionObject("settee.view-manager") { ViewManager(database: database) }
        try manager.loadIfNeeded()
        return manager
    }

    private init(database: Database) {
        self.database = database
    }

    /// The `meta` key recording the collator version the stored views' keys were encoded with.
    static let collatorMetaKey = "views-collator"

    /// The `views` registry's schema, versioned in `meta` (``Migrator/init(metaKey:)``). Version 1 is the table as
    /// it stood before it was versioned (`IF NOT EXISTS`: databases made then have it already). A later change is
    /// a new version that only adds (see ``Migrator``).
    package static let registryMigrations: [(version: Int, migrate: @Sendable (Connection) throws -> Void)] = [
        (1, { db in
            try db.execute("""
                CREATE TABLE IF NOT EXISTS views(
                    id INTEGER PRIMARY KEY AUTOINCREMENT, collection INTEGER NOT NULL, name TEXT NOT NULL,
                    version TEXT NOT NULL, reduce TEXT NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0,
                    state TEXT NOT NULL, full_text INTEGER NOT NULL DEFAULT 0, map_errors INTEGER NOT NULL DEFAULT 0,
                    build_seq INTEGER NOT NULL DEFAULT 0, chunk_version INTEGER NOT NULL DEFAULT 0,
                    next_id INTEGER NOT NULL DEFAULT 0,
                    UNIQUE(collection, name))
                """)
        }),
    ]
    package static let registryMetaKey = "schema views"

    private func loadIfNeeded() throws {
        if lock.withLock({ loaded }) { return }
        let collator = try withCollator { $0.version }
        try database.write { db in
            try Migrator(metaKey: Self.registryMetaKey, migrations: Self.registryMigrations).migrate(inTransaction: db)
            try Self.dropViews(ifCollatorIsNot: collator, db: db)
        }
        let rows = try database.read { db -> [StoredView] in
            let stmt = try db.prepare("SELECT id, collection, name, version, reduce FROM views ORDER BY id")
            defer { stmt.reset() }
            var out: [StoredView] = []
            while try stmt.step() {
                out.append(StoredView(id: stmt.int64(0), collectionID: stmt.int64(1), name: stmt.string(2) ?? "",
                                      version: stmt.string(3) ?? "", reduce: stmt.string(4) ?? ""))
            }
            return out
        }
        lock.withLock {
            if loaded { return }
            for view in rows { registry[view.collectionID, default: [:]][view.name] = view }
            loaded = true
        }
    }

    /// Stored keys are ICU sort keys, which another version of the collation data (an ICU upgrade) orders
    /// differently: when the collator is not the one the stored views were built with (or that is not recorded,
    /// as in databases from before it was), every stored view is dropped, to be rebuilt when next queried — as
    /// CouchDB rebuilds a view whose `collator_versions` changed.
    static func dropViews(ifCollatorIsNot current: String, db: Connection) throws {
        guard try db.metaValue(collatorMetaKey) != current else { return }
        let ids = try db.prepare("SELECT id FROM views")
        var stale: [Int64] = []
        while try ids.step() { stale.append(ids.int64(0)) }
        ids.reset()
        for id in stale {
            let view = StoredView(id: id, collectionID: 0, name: "", version: "", reduce: "")
            for table in [view.table, view.chunks, view.fts, view.stage] { try db.execute("DROP TABLE IF EXISTS \(table)") }
        }
        try db.execute("DELETE FROM views")
        try db.setMetaValue(collatorMetaKey, current)
    }

    func storedViews(of collection: Collection) -> [String] {
        lock.withLock { (registry[collection.id] ?? [:]).keys.sorted() }
    }

    func stored(view: String, collection: Collection) -> StoredView? {
        lock.withLock { registry[collection.id]?[view] }
    }

    // MARK: Creating and dropping

    /// The stored index of a registered view, created (or rebuilt, when the version changed) as needed.
    func prepare(view name: String, collection: Collection) throws -> (StoredView, ViewDefinition) {
        guard let definition = ViewManager.definition(view: name, collection: collection) else {
            throw SetteeError(.notFound, "View '\(name)' has no map function registered (call setMapBlock first)")
        }
        if let existing = stored(view: name, collection: collection), existing.version == definition.version,
           existing.reduce == definition.reduceIdentity {
            return (existing, definition)
        }
        // Creating, rebuilding or re-reducing: one caller at a time (two first queries of a new view race here).
        return try preparing.withLock { try prepareSlow(name, definition, collection) }
    }

    private func prepareSlow(_ name: String, _ definition: ViewDefinition,
                             _ collection: Collection) throws -> (StoredView, ViewDefinition) {
        if let existing = stored(view: name, collection: collection), existing.version == definition.version {
            if existing.reduce != definition.reduceIdentity {
                // Same map, another reduce: recompute the stored reductions, keep the rows.
                let updated = StoredView(id: existing.id, collectionID: existing.collectionID, name: name,
                                         version: existing.version, reduce: definition.reduceIdentity)
                try database.write { db in
                    try db.prepare("UPDATE views SET reduce = ?, chunk_version = chunk_version + 1 WHERE id = ?")
                        .run([.text(updated.reduce), .integer(updated.id)])
                    try self.rebuildChunks(updated, definition: definition, db: db)
                }
                lock.withLock { registry[collection.id]?[name] = updated }
                return (updated, definition)
            }
            return (existing, definition)
        }
        try deleteIndex(view: name, collection: collection)
        let created = try database.write { db -> StoredView in
            // build_seq: the database's sequence when the build starts (see ``apply(_:_:view:definition:collection:db:)``).
            let buildSeq = try db.int64(DocumentTable.lastSequence(collection)) ?? 0
            try db.prepare("INSERT INTO views(collection, name, version, reduce, state, build_seq) VALUES (?, ?, ?, ?, '\(IndexBuildState.building.rawValue)', ?)")
                .run([.integer(collection.id), .text(name), .text(definition.version), .text(definition.reduceIdentity),
                      .integer(buildSeq)])
            let view = StoredView(id: db.lastInsertRowID, collectionID: collection.id, name: name,
                                  version: definition.version, reduce: definition.reduceIdentity)
            // Rows are clustered on (key, docid, id): a key range is a sequential read, as in CouchDB's B-tree.
            try db.execute("CREATE TABLE \(view.table)(key BLOB NOT NULL, docid TEXT NOT NULL, id INTEGER NOT NULL, doc INTEGER NOT NULL, k TEXT NOT NULL, v TEXT, PRIMARY KEY(key, docid, id)) WITHOUT ROWID")
            try db.execute("CREATE TABLE \(view.chunks)(id INTEGER PRIMARY KEY, skey BLOB NOT NULL, sdoc TEXT NOT NULL, count INTEGER NOT NULL, reduction TEXT, fkey BLOB, fdoc TEXT, fk TEXT, lkey BLOB, ldoc TEXT, lk TEXT)")
            // (The index on `doc` is created when the build ends — a sort is faster than growing it row by row —
            // or earlier, by a batch that must find the old rows of a document changed during the build.)
            try db.execute("CREATE UNIQUE INDEX \(view.chunks)_start ON \(view.chunks)(skey, sdoc)")
            // (The full-text table is created by the first full-text row: ``createFullTextTable(_:db:)``.)
            return view
        }
        lock.withLock { registry[collection.id, default: [:]][name] = created }
        return (created, definition)
    }

    /// Creates a view's full-text table, in the transaction that stores its first full-text row (and sets its
    /// `full_text` flag: a reader that sees the flag finds the table). A view that emits none has no such table
    /// (an FTS5 table is five more b-trees, a page each). Views made before this have one, empty.
    static func createFullTextTable(_ view: StoredView, db: Connection) throws {
        try db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS \(view.fts) USING fts5(text, docid UNINDEXED, k UNINDEXED, v UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2')")
    }

    /// Drops a view's index and tables (nothing happens when it has none).
    func deleteIndex(view name: String, collection: Collection) throws {
        guard let view = stored(view: name, collection: collection) else { return }
        try database.write { db in
            try db.prepare("DELETE FROM views WHERE id = ?").run([.integer(view.id)])
            try db.execute("DROP TABLE IF EXISTS \(view.table)")
            try db.execute("DROP TABLE IF EXISTS \(view.chunks)")
            try db.execute("DROP TABLE IF EXISTS \(view.fts)")
            try db.execute("DROP TABLE IF EXISTS \(view.stage)")
        }
        lock.withLock {
            if registry[collection.id]?[name]?.id == view.id { registry[collection.id]?[name] = nil }
            upToDate[view.id] = nil
            directories[view.id] = nil
            updating[view.id] = nil
        }
    }

    func info(view name: String, collection: Collection) throws -> ViewInfo {
        let (view, _) = try prepare(view: name, collection: collection)
        return try database.read { db in
            let stmt = try db.prepare("SELECT last_seq, full_text, map_errors FROM views WHERE id = ?")
            defer { stmt.reset() }
            stmt.bind(view.id, at: 1)
            guard try stmt.step() else { throw SetteeError(.notFound, "View '\(name)' was deleted") }
            let rows = try ViewManager.totalRows(view, db: db)  // (info is rare: no directory needed)
            var info = ViewInfo(name: name, version: view.version, rowCount: rows, lastSequence: UInt64(stmt.int64(0)),
                                isFullText: stmt.int64(1) != 0, mapErrors: stmt.int(2))
            // The pages of the view's tables and indexes (its "file", inside the database's) and their rows' bytes.
            let names = [view.table, view.table + "_doc", view.chunks, view.chunks + "_start", view.fts, view.stage]
                + ["_data", "_idx", "_content", "_docsize", "_config"].map { view.fts + $0 }
            let sizes = try Database.liveBytes(db, tables: names)
            info.fileSize = sizes.file
            info.dataSize = sizes.active
            info.collatorVersion = (try? withCollator { $0.version }) ?? ""
            return info
        }
    }

    // MARK: Catching up

    /// Brings a registered view up to date with the change feed; returns its stored index.
    @discardableResult
    func update(view name: String, collection: Collection) throws -> StoredView {
        let (view, definition) = try prepare(view: name, collection: collection)
        try update(view, definition: definition, collection: collection)
        return view
    }

    /// Brings a prepared view up to date: one updater per view at a time (a second caller waits, then finds it
    /// current). Each batch of changes is read and mapped outside any transaction — the next one while the one before
    /// is written — so the write lock is held only to store rows, not while map functions run.
    func update(_ view: StoredView, definition: ViewDefinition, collection: Collection) throws {
        var (view, definition) = (view, definition)
        let gate = lock.withLock { () -> NSLock in
            if let existing = updating[view.id] { return existing }
            let created = NSLock()
            updating[view.id] = created
            return created
        }
        try gate.withLock {
            catchUp: while true {
                let target = database.lastSequence
                if lock.withLock({ (upToDate[view.id] ?? 0) >= target && upToDate[view.id] != nil }) { return }
                guard let from = try lastSequence(of: view) else { return }  // dropped meanwhile
                var batch = try readBatch(after: from, definition: definition, collection: collection)
                while true {
                    // The next batch is read, and its mapping started, on another thread while this one is written.
                    let after = batch.maxSeq
                    let next = batch.isFull ? Pending { [self, definition] in
                        try readBatch(after: after, definition: definition, collection: collection)
                    } : nil
                    // Whatever ends this round waits for that read: it uses the database, which may be closed
                    // once this returns.
                    defer { _ = try? next?.get() }
                    let outputs = try batch.outputs()
                    let outcome = try database.write { db in
                        try self.apply(batch, outputs, view: view, definition: definition, collection: collection, db: db)
                    }
                    switch outcome {
                    case .dropped:
                        return
                    case .stale:
                        continue catchUp  // the view moved meanwhile (rebuilt): read again from where it is
                    case .redefined:
                        // Its reduce was changed meanwhile: go on with the registered definition.
                        let (current, registered) = try prepare(view: view.name, collection: collection)
                        guard current.id == view.id else { return }
                        (view, definition) = (current, registered)
                        continue catchUp
                    case .applied:
                        if let next {
                            batch = try next.get()
                            continue
                        }
                        lock.withLock {
                            if registry[collection.id]?[view.name]?.id == view.id {
                                upToDate[view.id] = max(upToDate[view.id] ?? 0, target)
                            }
                        }
                        return
                    }
                }
            }
        }
    }

    /// The sequence a view has absorbed; nil when it no longer exists.
    private func lastSequence(of view: StoredView) throws -> Int64? {
        try database.read { db in
            let stmt = try db.prepare("SELECT last_seq FROM views WHERE id = ?")
            defer { stmt.reset() }
            stmt.bind(view.id, at: 1)
            return try stmt.step() ? stmt.int64(0) : nil
        }
    }

    /// Where a view's map and reduce failures are reported (the node's log: `settee serve --log-level/--log-format`).
    static let logger = Logger(label: "settee.views")

    // MARK: Chunks

    /// The chunks a batch touched.
    struct ChunkMarks {
        let view: StoredView
        var chunks = Set<Int64>()
        var all = false

        mutating func mark(key: [UInt8], doc: String, db: Connection) throws {
            if all { return }
            let stmt = try db.prepare("SELECT id FROM \(view.chunks) WHERE (skey, sdoc) <= (?, ?) ORDER BY skey DESC, sdoc DESC LIMIT 1")
            defer { stmt.reset() }
            stmt.bind(bytes: key, at: 1)
            stmt.bind(doc, at: 2)
            if try stmt.step() { chunks.insert(stmt.int64(0)) } else { all = true }
        }
    }

    /// One row as chunk maintenance and reduce read it.
    struct RowRef {
        let key: [UInt8]
        let doc: String
        let k: String
        let v: String?
    }

    /// Recuts every chunk from the rows in key order (after a build, a purge or a reduce change).
    func rebuildChunks(_ view: StoredView, definition: ViewDefinition, db: Connection) throws {
        try db.execute("DELETE FROM \(view.chunks)")
        // Values are read only for a reduce that uses them (`_count` and no reduce don't).
        let needsValues: Bool
        switch definition.reduce {
        case nil, .builtIn(.count)?: needsValues = false
        default: needsValues = true
        }
        let rows = try db.prepare("SELECT key, docid, k\(needsValues ? ", v" : "") FROM \(view.table) ORDER BY key, docid")
        defer { rows.reset() }
        var pending: [RowRef] = []
        pending.reserveCapacity(ViewManager.chunkSize + 1)
        var first = true
        while try rows.step() {
            let row = RowRef(key: rows.blob(0) ?? [], doc: rows.string(1) ?? "", k: rows.string(2) ?? "null",
                             v: needsValues ? rows.string(3) : nil)
            if pending.count >= ViewManager.chunkSize, let last = pending.last, last.key != row.key || last.doc != row.doc {
                try writeChunk(view, start: first ? ([], "") : (pending[0].key, pending[0].doc), rows: pending,
                               definition: definition, db: db)
                first = false
                pending.removeAll(keepingCapacity: true)
            }
            pending.append(row)
        }
        try writeChunk(view, start: first ? ([], "") : (pending[0].key, pending[0].doc), rows: pending,
                       definition: definition, db: db)
    }

    /// Recomputes one chunk from its rows; splits it when it grew past twice ``chunkSize``, drops it when empty.
    func refreshChunk(_ id: Int64, view: StoredView, definition: ViewDefinition, db: Connection) throws {
        let bounds = try db.withStatement("SELECT skey, sdoc FROM \(view.chunks) WHERE id = ?", [.integer(id)]) { bounds in
            try bounds.step() ? (bounds.blob(0) ?? [], bounds.string(1) ?? "") : nil
        }
        guard let start = bounds else { return }
        let end = try db.withStatement("SELECT skey, sdoc FROM \(view.chunks) WHERE (skey, sdoc) > (?, ?) ORDER BY skey, sdoc LIMIT 1",
                                       [.blob(start.0), .text(start.1)]) { next in
            try next.step() ? (next.blob(0) ?? [], next.string(1) ?? "") : nil
        }
        let rows = try ViewManager.rows(view, from: start, to: end, db: db)
        try db.prepare("DELETE FROM \(view.chunks) WHERE id = ?").run([.integer(id)])
        if rows.isEmpty && !start.0.isEmpty {
            return  // an empty chunk merges into the one before it
        }
        if rows.count <= 2 * ViewManager.chunkSize {
            try writeChunk(view, start: start, rows: rows, definition: definition, db: db)
            return
        }
        var piece: [RowRef] = []
        var pieceStart = start
        for row in rows {
            if piece.count >= ViewManager.chunkSize, let last = piece.last, last.key != row.key || last.doc != row.doc {
                try writeChunk(view, start: pieceStart, rows: piece, definition: definition, db: db)
                piece.removeAll(keepingCapacity: true)
                pieceStart = (row.key, row.doc)
            }
            piece.append(row)
        }
        try writeChunk(view, start: pieceStart, rows: piece, definition: definition, db: db)
    }

    /// The rows in `[from, to)` in `(key, docid)` order.
    static func rows(_ view: StoredView, from: ([UInt8], String), to: ([UInt8], String)?, db: Connection) throws -> [RowRef] {
        let sql = "SELECT key, docid, k, v FROM \(view.table) WHERE (key, docid) >= (?, ?)"
            + (to == nil ? "" : " AND (key, docid) < (?, ?)") + " ORDER BY key, docid"
        let stmt = try db.prepare(sql)
        defer { stmt.reset() }
        stmt.bind(bytes: from.0, at: 1)
        stmt.bind(from.1, at: 2)
        if let to {
            stmt.bind(bytes: to.0, at: 3)
            stmt.bind(to.1, at: 4)
        }
        var out: [RowRef] = []
        while try stmt.step() {
            out.append(RowRef(key: stmt.blob(0) ?? [], doc: stmt.string(1) ?? "", k: stmt.string(2) ?? "null", v: stmt.string(3)))
        }
        return out
    }

    private func writeChunk(_ view: StoredView, start: ([UInt8], String), rows: [RowRef], definition: ViewDefinition,
                            db: Connection) throws {
        var reduction: SQLiteValue = .null
        if let reduce = definition.reduce, !rows.isEmpty {
            do {
                reduction = .text(try ViewManager.reduceRows(rows, reduce).jsonString)
            } catch {
                ViewManager.logger.warning("view \(view.name): reduce function threw: \(error) — reduced at query time instead")
            }
        }
        let insert = try db.prepare("INSERT INTO \(view.chunks)(skey, sdoc, count, reduction, fkey, fdoc, fk, lkey, ldoc, lk) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        let first = rows.first, last = rows.last
        insert.bind([.blob(start.0), .text(start.1), .integer(Int64(rows.count)), reduction,
                     first.map { .blob($0.key) } ?? .null, first.map { .text($0.doc) } ?? .null,
                     first.map { .text($0.k) } ?? .null,
                     last.map { .blob($0.key) } ?? .null, last.map { .text($0.doc) } ?? .null,
                     last.map { .text($0.k) } ?? .null])
        try insert.run()
    }

    /// Reduces rows (not rereduce); `_count` reads no values.
    static func reduceRows(_ rows: [RowRef], _ reduce: Reducer) throws -> JSON {
        if case .builtIn(.count) = reduce { return .int(Int64(rows.count)) }
        var keys: [JSON] = []
        var values: [JSON] = []
        keys.reserveCapacity(rows.count)
        values.reserveCapacity(rows.count)
        let withIDs = reduce.usesDocumentIDs
        for row in rows {
            let key = (try? JSON.parse(Array(row.k.utf8))) ?? .null
            keys.append(withIDs ? .array([key, .string(row.doc)]) : key)
            values.append(row.v.flatMap { try? JSON.parse(Array($0.utf8)) } ?? .null)
        }
        return try reduce.reduce(keys: keys, values: values, rereduce: false)
    }

    static func totalRows(_ view: StoredView, db: Connection) throws -> Int {
        let stmt = try db.prepare("SELECT coalesce(sum(count), 0) FROM \(view.chunks)")
        defer { stmt.reset() }
        return try stmt.step() ? stmt.int(0) : 0
    }
}
