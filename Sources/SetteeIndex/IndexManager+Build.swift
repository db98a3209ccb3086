import SetteeCore
import SetteeSQLPP
import SetteeStore

/// A value index's first build, from the document table rather than the change feed.
///
/// A new index would otherwise read every document through the feed: in sequence order, each row found through
/// the sequence index. Its first build instead reads the table front to back (rowid order: sequential pages), a
/// chunk of ``buildChunk`` rows per write transaction, then creates the SQLite index over the keys and marks the
/// index ready at the sequence the build started from. The feed takes over from there: whatever changed while
/// the build ran (each change has a later sequence) is applied as any later change is, removals included.
///
/// The build's place — the sequence it started from and the last row read — is kept in the `meta` table with
/// each chunk, in the chunk's transaction, so catch-ups on other threads continue it a chunk at a time and an
/// interrupted build resumes where it stopped. Rows read before a document changed carry its old keys until the
/// feed replaces them; rows it reads after a document changed carry the new ones, and the feed's replay of that
/// change (INSERT OR REPLACE on the document) is harmless.
extension IndexManager {
    /// Rows per transaction of a first build: big enough that the commits cost nothing, small enough that writers
    /// are not held off long.
    static let buildChunk = 20_000

    /// The `meta` key holding a build's place: "started-from-sequence last-rowid-read last-rowid-to-read".
    static func buildMetaKey(_ info: IndexInfo) -> String { "index-build \(info.id)" }

    /// Builds `info` from the table if it is a value index that has absorbed nothing yet; returns once the
    /// build is done (or was not this kind of build), leaving any later changes to the feed.
    func buildFromTable(_ info: IndexInfo, collection: Collection) throws {
        guard info.spec.kind == .value, !isBuiltFromTable(info) else { return }
        while try database.write({ db in try self.buildChunk(info, collection: collection, db: db) }) {}
        // Built (by this call or another), or fed from the change feed already: nothing more to check next time.
        markBuiltFromTable(info)
    }

    /// One chunk inside a write transaction; true when another chunk follows.
    private func buildChunk(_ info: IndexInfo, collection: Collection, db: Connection) throws -> Bool {
        guard let row = try IndexManager.registryRow(info, db: db), row.state == .building, row.lastSeq == 0 else { return false }  // built, dropped or fed
        let key = IndexManager.buildMetaKey(info)
        let place = try db.metaValue(key)?.split(separator: " ").compactMap { Int64($0) }
        let (startedAt, after, through): (Int64, Int64, Int64)
        if let place, place.count == 3 {
            (startedAt, after, through) = (place[0], place[1], place[2])
        } else {
            // The rows there when the build starts: rows added later have later sequences, which the feed brings
            // in after the build (so a build under a steady stream of inserts still ends).
            let last = try ChangeFeed.lastSequenceAndRow(collection, db: db)
            (startedAt, after, through) = (last.seq, 0, last.rowid)
        }

        let keyCount = info.spec.expressions.count
        let columns = (0..<keyCount).map { "k\($0)" }.joined(separator: ", ")
        let placeholders = Array(repeating: "?", count: keyCount).joined(separator: ", ")
        let insert = try db.prepare("INSERT OR REPLACE INTO \(info.table)(doc, \(columns)) VALUES (?, \(placeholders))")
        let wanted = PropertyUsage.topLevelKeys(of: info.spec.expressions + (info.spec.whereClause.map { [$0] } ?? []),
                                                source: "_", primary: "_", aliases: []).map(JSONMemberSelector.init)
        let paths = IndexManager.plainPaths(info.spec)
        var evaluator = Evaluator()
        evaluator.predictor = Database.prediction.predictor
        let read = try ChangeFeed.readTable(collection, afterRowid: after, through: through, limit: IndexManager.buildChunk,
                                            db: db) { change in
            guard let body = try? change.body(members: wanted) else { return }  // an unreadable body is not indexed
            let keys: [[UInt8]?]?
            if let paths {
                keys = IndexManager.keys(at: paths, in: body)
            } else {
                keys = IndexManager.keys(for: info.spec, document: change.document(body: body), evaluator: evaluator)
            }
            guard let keys else { return }
            insert.bind(change.rowid, at: 1)
            for (i, key) in keys.enumerated() {
                if let key { insert.bind(bytes: key, at: Int32(i + 2)) } else { insert.bindNull(at: Int32(i + 2)) }
            }
            try insert.run()
        }
        if let read, read.count == IndexManager.buildChunk {
            try db.setMetaValue(key, "\(startedAt) \(read.lastRowid) \(through)")
            return true
        }
        // The whole table is in: the SQLite index over the keys (one sort, much faster than keeping it row by
        // row), and the feed takes over after the sequence the build started from.
        let quoted = "\"" + info.sqliteIndexName.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        try db.execute("CREATE INDEX IF NOT EXISTS \(quoted) ON \(info.table)(\((0..<keyCount).map { "k\($0)" }.joined(separator: ", ")))")
        try db.setMetaValue(key, nil)
        try IndexManager.recordProgress(info, ChangeFeed.Progress(count: 0, lastSeq: startedAt, isComplete: true),
                                        building: true, db: db)
        return false
    }

    /// The key paths of an index whose keys are plain document properties (`city`, `address.zip`) and that has no
    /// partial WHERE: its keys are read straight from the body, without the evaluator. Nil for any other index.
    static func plainPaths(_ spec: IndexSpec) -> [[PathComponent]]? {
        guard spec.whereClause == nil, !spec.expressions.isEmpty else { return nil }
        var paths: [[PathComponent]] = []
        for e in spec.expressions {
            // (A first step named like the index's source, `_`, names the document itself to the evaluator.)
            guard case .property(source: nil, let path) = e, case .key(let first)? = path.first, first != "_",
                  path.allSatisfy({ if case .key = $0 { true } else { false } }) else { return nil }
            paths.append(path)
        }
        return paths
    }

    /// The encoded keys at `paths` of a body; nil when every one is MISSING (no entry), as ``keys(for:document:evaluator:)``.
    static func keys(at paths: [[PathComponent]], in body: JSON) -> [[UInt8]?]? {
        var keys: [[UInt8]?] = []
        keys.reserveCapacity(paths.count)
        var any = false
        for path in paths {
            let key = KeyEncoding.encode(Evaluator.walk(body, path[...]))
            if key != nil { any = true }
            keys.append(key)
        }
        return any ? keys : nil
    }
}
