import SetteeCore
import SetteeStore

/// The chunks of a view in memory: their start positions and running row counts, so `total_rows` and `offset` cost
/// a binary search and one count inside one chunk instead of a walk over the chunk table.
///
/// A directory belongs to one `chunk_version` of the view (bumped by every catch-up batch that changes chunks); a
/// query reads the version in its own read transaction and reloads the directory when it differs, so it never mixes
/// chunk counts from one snapshot with rows from another.
struct ChunkDirectory {
    let version: Int64
    /// Chunk starts in `(key, docid)` order.
    var starts: [([UInt8], String)] = []
    /// `before[i]`: rows in the chunks before chunk `i`; `before.last` is the total.
    var before: [Int] = [0]

    var total: Int { before.last ?? 0 }

    static func load(_ view: StoredView, version: Int64, db: Connection) throws -> ChunkDirectory {
        var directory = ChunkDirectory(version: version)
        let stmt = try db.prepare("SELECT skey, sdoc, count FROM \(view.chunks) ORDER BY skey, sdoc")
        defer { stmt.reset() }
        while try stmt.step() {
            directory.starts.append((stmt.blob(0) ?? [], stmt.string(1) ?? ""))
            directory.before.append(directory.total + stmt.int(2))
        }
        return directory
    }

    /// The number of rows that satisfy `inPrefix`, a predicate true for a prefix of the `(key, docid)` order (every
    /// row before the bound). `condition` is the same predicate in SQL over `key`, `docid`.
    func countPrefix(_ view: StoredView, db: Connection, inPrefix: ([UInt8], String) -> Bool,
                     condition: String, values: [SQLiteValue]) throws -> Int {
        // The last chunk whose start is in the prefix: chunks before it are wholly in, chunks after wholly out.
        var lo = 0, hi = starts.count - 1, j = -1
        while lo <= hi {
            let mid = (lo + hi) / 2
            if inPrefix(starts[mid].0, starts[mid].1) { j = mid; lo = mid + 1 } else { hi = mid - 1 }
        }
        if j < 0 { return 0 }
        var sql = "SELECT count(*) FROM \(view.table) WHERE (key, docid) >= (?, ?) AND \(condition)"
        var bindings: [SQLiteValue] = [.blob(starts[j].0), .text(starts[j].1)] + values
        if j + 1 < starts.count {
            sql += " AND (key, docid) < (?, ?)"
            bindings += [.blob(starts[j + 1].0), .text(starts[j + 1].1)]
        }
        let stmt = try db.prepare(sql)
        defer { stmt.reset() }
        stmt.bind(bindings)
        return before[j] + (try stmt.step() ? stmt.int(0) : 0)
    }
}

extension ViewRange.Bound {
    /// Rows strictly before this bound taken as a lower bound (what `offset` counts): the predicate and its SQL.
    func beforeLower() -> (([UInt8], String) -> Bool, String, [SQLiteValue]) {
        let bound = self
        let predicate: ([UInt8], String) -> Bool = { key, doc in
            let c = ViewRange.compare(key, doc, bound)
            return c < 0 || (c == 0 && !bound.inclusive)
        }
        let op = inclusive ? "<" : "<="
        if let id = docID { return (predicate, "(key, docid) \(op) (?, ?)", [.blob(key), .text(id)]) }
        return (predicate, "key \(op) ?", [.blob(key)])
    }

    /// Rows up to this bound taken as an upper bound (in the range or before it).
    func throughUpper() -> (([UInt8], String) -> Bool, String, [SQLiteValue]) {
        let bound = self
        let predicate: ([UInt8], String) -> Bool = { key, doc in
            let c = ViewRange.compare(key, doc, bound)
            return c < 0 || (c == 0 && bound.inclusive)
        }
        let op = inclusive ? "<=" : "<"
        if let id = docID { return (predicate, "(key, docid) \(op) (?, ?)", [.blob(key), .text(id)]) }
        return (predicate, "key \(op) ?", [.blob(key)])
    }
}
