import Foundation
import Logging
package import SetteeCore
package import SetteeSQLPP
package import SetteeStore
import Synchronization

/// An index as the registry holds it.
package struct IndexInfo: Sendable, Hashable {
    /// Registry row id; the index's tables are named after it.
    public let id: Int64
    /// The index's name (unique within its collection).
    public let name: String
    /// The collection's id and full name (`scope.collection`).
    public let collectionID: Int64
    public let collectionName: String
    public let spec: IndexSpec
    /// The table holding the entries.
    public let table: String
    /// The SQLite index over the keys (what `EXPLAIN QUERY PLAN` names).
    public let sqliteIndexName: String

    static func tableName(id: Int64, kind: IndexSpec.Kind) -> String {
        switch kind {
        case .value: return "vidx_\(id)"
        case .fullText: return "ftsidx_\(id)"
        case .array: return "aidx_\(id)"
        case .vector: return "vecidx_\(id)"
        }
    }

    /// The FTS5 tokenizer for a full-text index: Porter stemming for English, diacritics folded or kept.
    var tokenizer: String {
        let base = "unicode61 remove_diacritics \(spec.ignoreAccents ? 2 : 0)"
        return spec.language == nil ? base : "porter " + base
    }
    static func sqliteIndexName(collection: String, name: String) -> String { "\(collection).\(name)" }
}

/// Keeps a database's indexes current by reading its change feed.
///
/// Each index has a row in the `indexes` registry with its definition and the last sequence it has absorbed.
/// Catching up reads the changes after that sequence, removes each changed document's old entries, evaluates the
/// index's expressions (and partial `WHERE`) on the winning revision, inserts the new entries and advances the
/// sequence — one transaction per batch. Queries catch up the indexes they use first; a background task also
/// catches up shortly after each commit. The store never writes index tables from its own write paths.
package final class IndexManager: Sendable {
    /// Documents per catch-up transaction.
    public static let batchSize = 5_000
    /// Delay between a commit and the background catch-up, so bursts of writes are absorbed together.
    package static let backgroundDelay: Duration = .milliseconds(25)

    unowned let database: Database
    /// The manager's bookkeeping; the catch-up work itself runs in the database's write transactions.
    private struct State {
        var vectorStates: [Int64: VectorIndexState] = [:]  // index id → in-memory IVF
        var registry: [Int64: [IndexInfo]] = [:]  // collection id → indexes
        var upToDate: [Int64: UInt64] = [:]       // index id → database sequence it was current at
        var builtFromTable: Set<Int64> = []       // value indexes past their first build (IndexManager+Build)
        var loaded = false
        var generation = 0
        var backgroundStarted = false
        var backgroundEnabled = true
        var backgroundScheduled = false
    }
    private let state = Mutex(State())

    /// Changes whenever an index is created or dropped: cached query plans compare it.
    public var generation: Int { state.withLock { $0.generation } }

    /// Whether commits trigger a background catch-up (on by default). Turning it off leaves indexes to catch up
    /// when queried — benchmarks use that to time a catch-up.
    public var isBackgroundEnabled: Bool {
        get { state.withLock { $0.backgroundEnabled } }
        set { state.withLock { $0.backgroundEnabled = newValue } }
    }
    private static let logger = Logger(label: "settee.indexes")

    /// The manager of `database` (one per open database), created on first use.
    public static func shared(for database: Database) throws -> IndexManager {
        let manager = database.extensionObject("settee.index-manager") { IndexManager(database: database) }
        try manager.loadIfNeeded()
        return manager
    }

    /// The in-memory state of a vector index (created empty, loaded on first use).
    func vectorState(_ info: IndexInfo) -> VectorIndexState {
        state.withLock { state in
            if let existing = state.vectorStates[info.id] { return existing }
            let created = VectorIndexState()
            state.vectorStates[info.id] = created
            return created
        }
    }

    private init(database: Database) {
        self.database = database
    }

    /// The `indexes` registry's schema, versioned in `meta` (``Migrator/init(metaKey:)``). Version 1 is the table as
    /// it stood before it was versioned (`IF NOT EXISTS`: databases made then have it already). A later change is a
    /// new version that only adds (see ``Migrator``).
    package static let registryMigrations: [(version: Int, migrate: @Sendable (Connection) throws -> Void)] = [
        (1, { db in
            try db.execute("""
                CREATE TABLE IF NOT EXISTS indexes(
                    id INTEGER PRIMARY KEY AUTOINCREMENT, collection INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
                    spec TEXT NOT NULL, table_name TEXT NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0,
                    state TEXT NOT NULL, UNIQUE(collection, name))
                """)
        }),
    ]
    package static let registryMetaKey = "schema indexes"

    private func loadIfNeeded() throws {
        if state.withLock({ $0.loaded }) { return }
        try database.write { db in try Migrator(metaKey: IndexManager.registryMetaKey, migrations: IndexManager.registryMigrations).migrate(inTransaction: db) }
        let rows = try database.read { db -> [(Int64, Int64, String, String, String)] in
            let stmt = try db.prepare("SELECT id, collection, name, spec, table_name FROM indexes ORDER BY id")
            defer { stmt.reset() }
            var out: [(Int64, Int64, String, String, String)] = []
            while try stmt.step() {
                out.append((stmt.int64(0), stmt.int64(1), stmt.string(2) ?? "", stmt.string(3) ?? "", stmt.string(4) ?? ""))
            }
            return out
        }
        let collections = try database.allCollections()
        var registry: [Int64: [IndexInfo]] = [:]
        for (id, cid, name, specText, table) in rows {
            guard let collection = collections.first(where: { $0.id == cid }) else { continue }
            let spec = try IndexSpec(json: try JSON.parse(specText))
            registry[cid, default: []].append(IndexInfo(
                id: id, name: name, collectionID: cid, collectionName: collection.fullName, spec: spec, table: table,
                sqliteIndexName: IndexInfo.sqliteIndexName(collection: collection.fullName, name: name)))
        }
        state.withLock { state in
            if !state.loaded {
                state.registry = registry
                state.loaded = true
            }
        }
        startBackground()
    }

    // MARK: Registry

    /// The indexes of `collection`, in creation order.
    public func indexes(of collection: Collection) -> [IndexInfo] {
        state.withLock { $0.registry[collection.id] ?? [] }
    }

    /// Creates (and builds) the index `name` on `collection`. Creating an index that exists with the same definition
    /// does nothing; with a different definition it is rebuilt.
    public func createIndex(_ name: String, spec: IndexSpec, on collection: Collection) throws {
        guard !name.isEmpty else { throw SetteeError(.badRequest, "An index name must not be empty") }
        if let existing = indexes(of: collection).first(where: { $0.name == name }) {
            if existing.spec == spec { return }
            try deleteIndex(name, on: collection)
        }
        let specText = spec.json.jsonString
        let fullName = collection.fullName
        let info = try database.write { db -> IndexInfo in
            try db.prepare("INSERT INTO indexes(collection, name, kind, spec, table_name, last_seq, state) VALUES (?, ?, ?, ?, '', 0, '\(IndexBuildState.building.rawValue)')")
                .run([.integer(collection.id), .text(name), .text(spec.kind.rawValue), .text(specText)])
            let id = db.lastInsertRowID
            let table = IndexInfo.tableName(id: id, kind: spec.kind)
            try db.prepare("UPDATE indexes SET table_name = ? WHERE id = ?").run([.text(table), .integer(id)])
            let info = IndexInfo(id: id, name: name, collectionID: collection.id, collectionName: fullName, spec: spec,
                                 table: table, sqliteIndexName: IndexInfo.sqliteIndexName(collection: fullName, name: name))
            switch spec.kind {
            case .value:
                let columns = spec.expressions.indices.map { "k\($0) BLOB" }.joined(separator: ", ")
                try db.execute("CREATE TABLE \(table)(doc INTEGER PRIMARY KEY, \(columns))")
            case .array:
                // An index of scalar elements also keeps each element's JSON (`v`), so UNNEST queries that read only
                // the element and META() are answered from the index alone.
                let columns = max(1, spec.expressions.count)
                let value = spec.expressions.isEmpty ? ", v TEXT" : ""
                try db.execute("CREATE TABLE \(table)(doc INTEGER NOT NULL, \((0..<columns).map { "k\($0) BLOB" }.joined(separator: ", "))\(value))")
            case .fullText:
                let columns = spec.expressions.indices.map { "c\($0)" }.joined(separator: ", ")
                try db.execute("CREATE VIRTUAL TABLE \(table) USING fts5(\(columns), tokenize = '\(info.tokenizer)')")
            case .vector:
                try IndexManager.createVectorTables(info, db: db)
            }
            return info
        }
        state.withLock { state in
            state.registry[collection.id, default: []].append(info)
            state.generation += 1
        }
        // Build now, so the index is usable when this returns (the SQLite index over the keys is created after
        // the bulk fill, which is several times faster than maintaining it row by row).
        try catchUp(info, collection: collection)
    }

    /// Drops the index `name` and its tables. Deleting an index that does not exist does nothing.
    public func deleteIndex(_ name: String, on collection: Collection) throws {
        guard let info = indexes(of: collection).first(where: { $0.name == name }) else { return }
        try database.write { db in
            try db.prepare("DELETE FROM indexes WHERE id = ?").run([.integer(info.id)])
            try db.execute("DROP TABLE IF EXISTS \(info.table)")
            try db.setMetaValue(IndexManager.buildMetaKey(info), nil)
            if info.spec.kind == .vector { try IndexManager.dropVectorTables(info, db: db) }
        }
        state.withLock { state in
            state.registry[collection.id]?.removeAll { $0.id == info.id }
            state.upToDate[info.id] = nil
            state.builtFromTable.remove(info.id)
            state.vectorStates[info.id] = nil
            state.generation += 1
        }
    }

    /// The last sequence `info` has absorbed, as stored in the registry.
    public func lastSequence(of info: IndexInfo) throws -> UInt64 {
        try database.read { db in
            let stmt = try db.prepare("SELECT last_seq FROM indexes WHERE id = ?")
            defer { stmt.reset() }
            stmt.bind(info.id, at: 1)
            return try stmt.step() ? UInt64(stmt.int64(0)) : 0
        }
    }

    /// The build state of `info`: `building` until its first catch-up finished, then `ready`.
    public func state(of info: IndexInfo) throws -> String {
        try database.read { db in
            let stmt = try db.prepare("SELECT state FROM indexes WHERE id = ?")
            defer { stmt.reset() }
            stmt.bind(info.id, at: 1)
            return try stmt.step() ? (stmt.string(0) ?? "") : ""
        }
    }

    // MARK: Catching up

    func isBuiltFromTable(_ info: IndexInfo) -> Bool { state.withLock { $0.builtFromTable.contains(info.id) } }
    func markBuiltFromTable(_ info: IndexInfo) { _ = state.withLock { $0.builtFromTable.insert(info.id) } }

    /// Brings every index of `collection` up to date with the change feed.
    public func catchUp(_ collection: Collection) throws {
        for info in indexes(of: collection) { try catchUp(info, collection: collection) }
    }

    /// Brings one index up to date: one transaction per ``batchSize`` changed documents.
    public func catchUp(_ info: IndexInfo, collection: Collection) throws {
        var tableRead = false
        while true {
            let target = database.lastSequence
            let (current, known) = state.withLock { state in
                (state.upToDate[info.id].map { $0 >= target } ?? false,
                 state.registry[info.collectionID]?.contains { $0.id == info.id } ?? false)
            }
            if current || !known { return }
            if !tableRead {
                // A value index that has absorbed nothing yet is first filled from the table (IndexManager+Build).
                try buildFromTable(info, collection: collection)
                tableRead = true
            }
            let done: Bool
            do {
                done = try database.write { db in
                    try self.catchUpBatch(info, collection: collection, db: db)
                }
            } catch {
                // A vector index's memory was changed inside the transaction that failed: reload it next time.
                if info.spec.kind == .vector { vectorState(info).lock.withLock { vectorState(info).ivf = nil } }
                throw error
            }
            if done {
                // Ids are never reused (AUTOINCREMENT), so a catch-up that raced with a delete cannot mark a newer
                // index of the same name as current.
                state.withLock { state in
                    if state.registry[info.collectionID]?.contains(where: { $0.id == info.id }) == true {
                        state.upToDate[info.id] = max(state.upToDate[info.id] ?? 0, target)
                    }
                }
                return
            }
        }
    }

    /// Brings every index of every collection up to date (the background task).
    public func catchUpAll() throws {
        let all = state.withLock { $0.registry }
        guard !all.isEmpty else { return }
        let collections = try database.allCollections()
        for (cid, infos) in all {
            guard let collection = collections.first(where: { $0.id == cid }) else { continue }
            for info in infos { try catchUp(info, collection: collection) }
        }
    }

    /// One batch inside a write transaction. Returns true when the index has absorbed every change.
    private func catchUpBatch(_ info: IndexInfo, collection: Collection, db: Connection) throws -> Bool {
        guard let row = try IndexManager.registryRow(info, db: db) else { return true }  // dropped meanwhile
        let (lastSeq, building) = (row.lastSeq, row.state == .building)

        // Purged documents leave no change row: drop entries whose document row is gone.
        let anyPurged = try ChangeFeed.anyPurged(collection, since: lastSeq, db: db)
        if anyPurged {
            // (A full-text table is keyed by the document's rowid; the others have a `doc` column.)
            let key = info.spec.kind == .fullText ? "rowid" : "doc"
            try db.execute("DELETE FROM \(info.table) WHERE \(key) NOT IN (\(DocumentTable.allRowIDs(collection)))")
        }
        if info.spec.kind == .vector {
            return try catchUpVectorBatch(info, collection: collection, db: db, lastSeq: lastSeq, building: building,
                                          purged: anyPurged)
        }

        let keyCount = info.spec.kind == .array ? max(1, info.spec.expressions.count) : info.spec.expressions.count
        let columns = (0..<keyCount).map { info.spec.kind == .fullText ? "c\($0)" : "k\($0)" }.joined(separator: ", ")
        let placeholders = Array(repeating: "?", count: keyCount).joined(separator: ", ")
        let remove: Statement
        let insert: Statement
        switch info.spec.kind {
        case .value:
            remove = try db.prepare("DELETE FROM \(info.table) WHERE doc = ?")
            insert = try db.prepare("INSERT OR REPLACE INTO \(info.table)(doc, \(columns)) VALUES (?, \(placeholders))")
        case .array:
            remove = try db.prepare("DELETE FROM \(info.table) WHERE doc = ?")
            insert = info.spec.expressions.isEmpty
                ? try db.prepare("INSERT INTO \(info.table)(doc, \(columns), v) VALUES (?, \(placeholders), ?)")
                : try db.prepare("INSERT INTO \(info.table)(doc, \(columns)) VALUES (?, \(placeholders))")
        case .fullText, .vector:
            remove = try db.prepare("DELETE FROM \(info.table) WHERE rowid = ?")
            insert = try db.prepare("INSERT INTO \(info.table)(rowid, \(columns)) VALUES (?, \(placeholders))")
        }
        var evaluator = Evaluator()
        evaluator.predictor = Database.prediction.predictor
        // The members the index reads: its expressions' (for an array index, the array's first level instead).
        let documentExpressions = info.spec.kind == .array
            ? [SQLExpression.property(source: nil, path: info.spec.arrayLevels.first ?? [])]
            : info.spec.expressions
        let wanted = PropertyUsage.topLevelKeys(of: documentExpressions + (info.spec.whereClause.map { [$0] } ?? []),
                                                source: "_", primary: "_", aliases: []).map(JSONMemberSelector.init)
        let progress = try ChangeFeed.read(collection, after: lastSeq, limit: IndexManager.batchSize, db: db) { change in
            let rowid = change.rowid
            // A value-index document that stays in the index is replaced in place (INSERT OR REPLACE on its rowid);
            // only one that leaves it needs a DELETE. Array and full-text entries are always replaced.
            func drop() throws {
                if building { return }
                remove.bind(rowid, at: 1)
                try remove.run()
            }
            if change.isDeleted || info.spec.kind != .value { try drop() }
            if change.isDeleted { return }
            let body: JSON
            do {
                body = try change.body(members: wanted)
            } catch {
                try drop()
                return  // an unreadable body is not indexed; it never stops indexing
            }
            let document = change.document(body: body)
            switch info.spec.kind {
            case .value:
                guard let keys = IndexManager.keys(for: info.spec, document: document, evaluator: evaluator) else {
                    try drop()
                    return
                }
                insert.bind(rowid, at: 1)
                for (i, key) in keys.enumerated() {
                    if let key { insert.bind(bytes: key, at: Int32(i + 2)) } else { insert.bindNull(at: Int32(i + 2)) }
                }
                try insert.run()
            case .array:
                for (keys, element) in IndexManager.arrayEntries(for: info.spec, document: document, evaluator: evaluator) {
                    insert.bind(rowid, at: 1)
                    for (i, key) in keys.enumerated() {
                        if let key { insert.bind(bytes: key, at: Int32(i + 2)) } else { insert.bindNull(at: Int32(i + 2)) }
                    }
                    if info.spec.expressions.isEmpty { insert.bind(text: element.serializedBytes, at: Int32(keys.count + 2)) }
                    try insert.run()
                }
            case .vector:
                return  // catchUpVectorBatch
            case .fullText:
                guard let texts = IndexManager.texts(for: info.spec, document: document, evaluator: evaluator) else { return }
                insert.bind(rowid, at: 1)
                for (i, text) in texts.enumerated() {
                    if let text { insert.bind(text, at: Int32(i + 2)) } else { insert.bindNull(at: Int32(i + 2)) }
                }
                try insert.run()
            }
        }
        let done = progress.isComplete
        if done && building {
            let quoted = "\"" + info.sqliteIndexName.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            let keyColumns = (0..<keyCount).map { "k\($0)" }.joined(separator: ", ")
            switch info.spec.kind {
            case .value:
                try db.execute("CREATE INDEX IF NOT EXISTS \(quoted) ON \(info.table)(\(keyColumns))")
            case .array:
                // An index of scalar elements carries each element's JSON too, so the covering UNNEST read
                // (keys → doc, element) never visits the table's rows: one b-tree probe per element, not two.
                let covering = info.spec.expressions.isEmpty ? ", v" : ""
                try db.execute("CREATE INDEX IF NOT EXISTS \(quoted) ON \(info.table)(\(keyColumns), doc\(covering))")
                try db.execute("CREATE INDEX IF NOT EXISTS \(info.table)_doc ON \(info.table)(doc)")
            case .fullText, .vector:
                break  // FTS5 keeps its own inverted index
            }
        }
        try IndexManager.recordProgress(info, progress, building: building, db: db)
        return done
    }

    /// The index's registry row as the current transaction sees it (nil: dropped).
    static func registryRow(_ info: IndexInfo, db: Connection) throws -> (lastSeq: Int64, state: IndexBuildState?)? {
        try db.withStatement("SELECT last_seq, state FROM indexes WHERE id = ?", [.integer(info.id)]) { row in
            try row.step() ? (row.int64(0), IndexBuildState(rawValue: row.string(1) ?? "")) : nil
        }
    }

    /// Moves an index's position in the feed to the end of the batch just absorbed; a building index is ready once
    /// a batch reached the end of the feed.
    static func recordProgress(_ info: IndexInfo, _ progress: ChangeFeed.Progress, building: Bool, db: Connection) throws {
        let state: IndexBuildState = progress.isComplete || !building ? .ready : .building
        try db.prepare("UPDATE indexes SET last_seq = ?, state = ? WHERE id = ?")
            .run([.integer(progress.lastSeq), .text(state.rawValue), .integer(info.id)])
    }

    /// The encoded keys of a document, or nil when it is not in the index (partial WHERE false, or every key MISSING).
    package static func keys(for spec: IndexSpec, document: SourceDocument, evaluator: Evaluator) -> [[UInt8]?]? {
        guard passes(spec, document, evaluator) else { return nil }
        return encodedKeys(spec.expressions, document, evaluator)
    }

    /// Whether a document satisfies the index's partial WHERE (true without one).
    private static func passes(_ spec: IndexSpec, _ document: SourceDocument, _ evaluator: Evaluator) -> Bool {
        guard let condition = spec.whereClause else { return true }
        return (try? evaluator.isTrue(condition, in: Row(primaryName: "_", primary: document))) == true
    }

    /// The encoded values of `expressions` on `document`; nil when every one is MISSING (no entry).
    private static func encodedKeys(_ expressions: [SQLExpression], _ document: SourceDocument,
                                    _ evaluator: Evaluator) -> [[UInt8]?]? {
        var keys: [[UInt8]?] = []
        keys.reserveCapacity(expressions.count)
        var any = false
        for e in expressions {
            // (Not `try? … ?? nil`: `nil` there would be JSON's nil literal, i.e. null, and MISSING would be indexed as null.)
            let value: JSON?
            do { value = try evaluator.evaluate(e, document: document) } catch { value = nil }
            let key = KeyEncoding.encode(value)
            if key != nil { any = true }
            keys.append(key)
        }
        return any ? keys : nil
    }

    /// The entries of a document in an array index with the element each came from.
    package static func arrayEntries(for spec: IndexSpec, document: SourceDocument,
                                    evaluator: Evaluator) -> [(keys: [[UInt8]?], element: JSON)] {
        guard passes(spec, document, evaluator) else { return [] }
        var elements: [JSON] = [document.body]
        for level in spec.arrayLevels {
            var next: [JSON] = []
            for e in elements {
                if case .array(let items)? = Evaluator.walk(e, level[...]) { next.append(contentsOf: items) }
            }
            elements = next
        }
        var out: [(keys: [[UInt8]?], element: JSON)] = []
        for element in elements {
            if spec.expressions.isEmpty {
                out.append(([KeyEncoding.encode(element)], element))
                continue
            }
            let elementDocument = SourceDocument(id: document.id, sequence: document.sequence, body: element)
            if let keys = encodedKeys(spec.expressions, elementDocument, evaluator) { out.append((keys, element)) }
        }
        return out
    }

    /// The texts of a document for a full-text index (non-strings are not indexed), or nil when it has none.
    package static func texts(for spec: IndexSpec, document: SourceDocument, evaluator: Evaluator) -> [String?]? {
        guard passes(spec, document, evaluator) else { return nil }
        var texts: [String?] = []
        var any = false
        for e in spec.expressions {
            let value: JSON?
            do { value = try evaluator.evaluate(e, document: document) } catch { value = nil }
            if case .string(let text)? = value { texts.append(text); any = true } else { texts.append(nil) }
        }
        return any ? texts : nil
    }

    // MARK: Background

    private func startBackground() {
        let started = state.withLock { state in
            defer { state.backgroundStarted = true }
            return state.backgroundStarted
        }
        if started { return }
        let commits = database.commits()
        let database = self.database
        database.background.run { [weak self, weak database] in
            for await _ in commits {
                guard let self, let database else { return }
                self.scheduleBackgroundCatchUp(database)
            }
        }
    }

    /// `database` is passed (and held weakly by the delayed work) so that a catch-up never outlives the database it
    /// reads: the manager itself only has an unowned reference. The catch-up is a task of the database's background
    /// work (``BackgroundTasks``), on the store's threads.
    private func scheduleBackgroundCatchUp(_ database: Database) {
        let schedule = state.withLock { state -> Bool in
            if state.backgroundScheduled || !state.backgroundEnabled || state.registry.values.allSatisfy(\.isEmpty) { return false }
            state.backgroundScheduled = true
            return true
        }
        guard schedule else { return }
        let started = database.background.runBlocking(after: IndexManager.backgroundDelay) { [weak self, weak database] in
            guard let self else { return }
            self.state.withLock { $0.backgroundScheduled = false }
            guard let database else { return }
            withExtendedLifetime(database) {
                do {
                    try self.catchUpAll()
                } catch let error as SetteeError where error.code == .closed {
                    // The database closed meanwhile: nothing to catch up.
                } catch {
                    // The next query catches up itself and reports the error; the log says why it is behind.
                    IndexManager.logger.warning("background index catch-up of \(database.name) failed: \(error)")
                }
            }
        }
        if !started { state.withLock { $0.backgroundScheduled = false } }
    }
}

/// Whether an index or view is still building from the change feed or caught up (its `state` column).
enum IndexBuildState: String, Sendable {
    /// The first catch-up is under way: queries wait for it (or read a partial index with `update=false`).
    case building
    /// Caught up once; later changes apply incrementally.
    case ready
}
