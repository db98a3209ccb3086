import Foundation
import SetteeCore
import SetteeSQLPP
import SetteeStore

/// How reduced rows are grouped.
enum ViewGrouping: Equatable {
    case none
    case exact
    case level(Int)
}

extension ViewManager {
    func query(_ q: ViewQuery) throws -> ViewQueryResult {
        try withCollator { collator in try query(q, collator: collator) }
    }

    /// The view's registry row as a query reads it, in its read transaction.
    struct Snapshot {
        let lastSequence: UInt64
        let chunkVersion: Int64
        let fullText: Bool
    }

    static func snapshot(_ view: StoredView, db: Connection) throws -> Snapshot {
        let stmt = try db.prepare("SELECT last_seq, chunk_version, full_text FROM views WHERE id = ?")
        defer { stmt.reset() }
        stmt.bind(view.id, at: 1)
        guard try stmt.step() else { throw SetteeError(.notFound, "View '\(view.name)' was deleted") }
        return Snapshot(lastSequence: UInt64(stmt.int64(0)), chunkVersion: stmt.int64(1), fullText: stmt.int64(2) != 0)
    }

    private func query(_ q: ViewQuery, collator: ViewCollator) throws -> ViewQueryResult {
        let collection = q.view.collection
        let (view, definition) = try prepare(view: q.view.name, collection: collection)
        collator.raw = definition.rawCollation
        if q.indexUpdateMode == .before { try update(view, definition: definition, collection: collection) }
        defer {
            if q.indexUpdateMode == .after {
                let name = q.view.name
                // A task of the database's background work, on its threads (the update waits for its map pieces
                // on BackgroundWork's); cancelled if the database closes first.
                collection.database.background.runBlocking { [weak self] in
                    guard let manager = self else { return }
                    do {
                        _ = try manager.update(view: name, collection: collection)
                    } catch let error as SetteeError where error.code == .closed {
                        return  // the database closed meanwhile: the next open catches up
                    } catch {
                        ViewManager.logger.warning("view \(name): update after the query failed: \(error)")
                    }
                }
            }
        }
        guard q.skip >= 0 else { throw SetteeError(.queryParseError, "skip must be a non-negative integer") }
        if let limit = q.limit, limit < 0 { throw SetteeError(.queryParseError, "limit must be a non-negative integer") }
        let reduce = q.mapOnly ? nil : definition.reduce
        if q.documentFilter != nil && (reduce != nil || q.fullTextQuery != nil) {
            throw SetteeError(.forbidden, "Reduced and full-text view queries are open only to database admins on a database with a sync function: query with reduce=false.")
        }
        let grouping: ViewGrouping = q.group ? .exact : (q.groupLevel > 0 ? .level(q.groupLevel) : .none)
        if q.groupLevel < 0 { throw SetteeError(.queryParseError, "group_level must be a non-negative integer") }

        // A partitioned view's rows are keyed by partition first: every range is inside the partition's.
        if definition.partitioned && q.partition == nil {
            throw SetteeError(.queryParseError, "`partition` parameter is mandatory for queries to this view.")
        }
        if !definition.partitioned && q.partition != nil {
            throw SetteeError(.queryParseError, "`partition` parameter is not supported in this design doc")
        }
        let partitionKey: [UInt8]? = definition.partitioned ? q.partition.map { ViewManager.partitionPrefix($0, collator) } : nil
        let prefix = partitionKey ?? []
        let partitionRange = partitionKey.map {
            ViewRange(lower: ViewRange.Bound(key: $0, docID: nil, inclusive: true),
                      upper: ViewRange.Bound(key: $0 + [0xFF], docID: nil, inclusive: false))
        }
        func encode(_ key: JSON) -> [UInt8] { prefix + collator.encode(key) }

        if let text = q.fullTextQuery {
            if partitionKey != nil { throw SetteeError(.queryParseError, "Full-text queries don't apply to partitioned views") }
            if q.key != nil || q.keys != nil || q.startKey != nil || q.endKey != nil || q.startKeyDocID != nil || q.endKeyDocID != nil {
                throw SetteeError(.queryParseError, "Key ranges and keys don't apply to a full-text query: use the full-text query alone")
            }
            if q.group || q.groupLevel > 0 || (definition.reduce != nil && !q.mapOnly) {
                throw SetteeError(.queryParseError, "Full-text queries don't reduce: query a full-text view with reduce=false (mapOnly) and no grouping")
            }
            return try fullTextQuery(q, text: text, view: view)
        }
        if reduce == nil && grouping != .none {
            throw SetteeError(.queryParseError, "Invalid use of grouping on a map view (it has no reduce function, or reduce is off)")
        }
        if reduce != nil, q.includeDocs {
            throw SetteeError(.queryParseError, "include_docs is invalid for reduce queries (set reduce=false / mapOnly)")
        }
        if reduce != nil, try isFullText(view) {
            throw SetteeError(.queryParseError, "A full-text view can't be reduced: query it with reduce=false (mapOnly)")
        }

        // The ranges, in key order. A key (or each of `keys`) with startkey_docid/endkey_docid is the rows of that
        // key between those document ids, as CouchDB applies them.
        func exactly(_ key: [UInt8]) -> ViewRange {
            let first = q.descending ? q.endKeyDocID : q.startKeyDocID
            let last = q.descending ? q.startKeyDocID : q.endKeyDocID
            return ViewRange(lower: ViewRange.Bound(key: key, docID: first, inclusive: true),
                             upper: ViewRange.Bound(key: key, docID: last, inclusive: q.inclusiveEnd || last == nil))
        }
        var ranges: [ViewRange] = []
        if let keys = q.keys {
            if reduce != nil && grouping == .none {
                throw SetteeError(.queryParseError, "Multi-key fetches for reduce views must use group=true")
            }
            ranges = keys.map { exactly(encode($0)) }
        } else if let key = q.key {
            ranges = [exactly(encode(key))]
        } else {
            let start = q.startKey.map { ViewRange.Bound(key: encode($0), docID: q.startKeyDocID, inclusive: true) }
            let end = q.endKey.map { ViewRange.Bound(key: encode($0), docID: q.endKeyDocID, inclusive: q.inclusiveEnd) }
            var range = q.descending ? ViewRange(lower: end, upper: start) : ViewRange(lower: start, upper: end)
            if let partitionRange {
                range.lower = range.lower ?? partitionRange.lower
                range.upper = range.upper ?? partitionRange.upper
            }
            if let s = q.startKey, let e = q.endKey {
                let c = collator.compare(s, e)
                if (!q.descending && c > 0) || (q.descending && c < 0) {
                    throw SetteeError(.queryParseError, "No rows can match your key range, reverse your start_key and end_key or set descending=\(q.descending ? "false" : "true")")
                }
            }
            ranges = [range]
        }

        return try database.read { db -> ViewQueryResult in
            let snapshot = try ViewManager.snapshot(view, db: db)
            let directory = try self.directory(view, version: snapshot.chunkVersion, db: db)
            // (A partition query's `total_rows` and `offset` are the whole view's, as CouchDB's are its shard's.)
            let total = directory.total
            let seq = snapshot.lastSequence
            if let reduce {
                var rows: [ViewQueryRow] = []
                for range in ranges {
                    let groups = try self.reduce(view, range: range, grouping: grouping, reduce: reduce,
                                                 keyPrefixLength: prefix.count, db: db)
                    rows += (q.descending && q.keys == nil ? groups.reversed() : groups).map {
                        ViewQueryRow(key: $0.key, value: $0.value, sourceDocumentID: nil, documentID: nil, document: nil,
                                     fullText: nil, matches: [], rank: nil, markedSnippet: nil)
                    }
                }
                let page = rows.dropFirst(q.skip).prefix(q.limit ?? Int.max)
                return ViewQueryResult(rows: Array(page), totalRows: total, offset: 0, sequenceNumber: seq)
            }
            var rows: [ViewQueryRow] = []
            rows.reserveCapacity(min(q.limit ?? 64, 1024))
            var toSkip = q.skip
            var remaining = q.limit ?? Int.max
            let filter = q.documentFilter
            for range in ranges where remaining > 0 {
                let order = q.descending ? "DESC" : "ASC"
                var values: [SQLiteValue] = []
                let condition = range.sql(&values)
                let stmt = try db.prepare("SELECT docid, k, v FROM \(view.table) WHERE \(condition) ORDER BY key \(order), docid \(order), id \(order) LIMIT ? OFFSET ?")
                defer { stmt.reset() }
                // With a document filter the rows are counted (skip, limit) as it accepts them.
                values.append(.integer(filter == nil ? Int64(min(remaining, Int(Int64.max / 2))) : -1))
                values.append(.integer(filter == nil ? Int64(toSkip) : 0))
                stmt.bind(values)
                var seen = 0
                while try stmt.step() {
                    if let filter {
                        guard remaining - seen > 0 else { break }
                        guard filter(stmt.string(0) ?? "") else { continue }
                        if toSkip > 0 {
                            toSkip -= 1
                            continue
                        }
                    }
                    seen += 1
                    let key = try stmt.withTextBytes(1) { try JSON.parse($0) }
                    let value: JSON? = stmt.isNull(2) ? nil : try stmt.withTextBytes(2) { try JSON.parse($0) }
                    let source = stmt.string(0) ?? ""
                    var target = source
                    if case .object(let o)? = value, case .string(let id)? = o["_id"] { target = id }
                    rows.append(ViewQueryRow(key: key, value: value, sourceDocumentID: source, documentID: target,
                                             document: nil, fullText: nil, matches: [], rank: nil, markedSnippet: nil))
                }
                remaining -= seen
                if toSkip > 0 && filter == nil {
                    // Rows of this range that were skipped count against the skip of the next range.
                    let count = try self.countRows(view, range: range, db: db)
                    toSkip = max(0, toSkip - count)
                }
            }
            // offset: the rows before the first one in the query's direction (CouchDB counts skipped rows too).
            var offset = q.skip
            if q.keys == nil, q.key == nil, let range = ranges.first {
                if !q.descending, let lower = range.lower {
                    let (inPrefix, condition, values) = lower.beforeLower()
                    offset += try directory.countPrefix(view, db: db, inPrefix: inPrefix, condition: condition, values: values)
                } else if q.descending, let upper = range.upper {
                    let (inPrefix, condition, values) = upper.throughUpper()
                    offset += total - (try directory.countPrefix(view, db: db, inPrefix: inPrefix, condition: condition, values: values))
                }
                offset = min(offset, total)
            }
            if q.includeDocs {
                rows = try rows.map { row in
                    ViewQueryRow(key: row.key, value: row.value, sourceDocumentID: row.sourceDocumentID,
                                 documentID: row.documentID,
                                 document: filter.map { accepts in row.documentID.map(accepts) ?? false } == false
                                     ? .null : try ViewManager.includedDocument(row, collection, conflicts: q.conflicts),
                                 fullText: nil, matches: [], rank: nil, markedSnippet: nil)
                }
            }
            return ViewQueryResult(rows: rows, totalRows: total, offset: offset, sequenceNumber: seq)
        }
    }

    func isFullText(_ view: StoredView) throws -> Bool {
        try database.read { db in
            let stmt = try db.prepare("SELECT full_text FROM views WHERE id = ?")
            defer { stmt.reset() }
            stmt.bind(view.id, at: 1)
            return try stmt.step() && stmt.int64(0) != 0
        }
    }

    /// The document `include_docs` shows for a row: the row's document, or the one its value names with `_id` —
    /// at the revision the value names with `_rev`, when it does (an older revision while compaction hasn't dropped
    /// it; null when the document doesn't have it), as CouchDB's views load it.
    static func includedDocument(_ row: ViewQueryRow, _ collection: Collection, conflicts: Bool) throws -> JSON {
        if case .object(let value)? = row.value, case .string(let text)? = value["_rev"] {
            guard let rev = RevID(text), let record = try collection.record(id: row.documentID ?? "", archived: .revisions([rev])),
                  let found = record.revision(rev) else { return .null }
            return try documentJSON(id: record.id, rev: rev, deleted: found.deleted, body: found.body)
        }
        return try document(row.documentID ?? "", collection, conflicts: conflicts)
    }

    /// A document as include_docs shows it: its body with `_id` and `_rev`, or null when missing or deleted.
    static func document(_ id: String, _ collection: Collection, conflicts: Bool = false) throws -> JSON {
        guard let record = try collection.record(id: id, withTree: conflicts), !record.deleted else { return .null }
        // `conflicts=true` with `include_docs`: the live losing leaves, as CouchDB adds them.
        let losers = conflicts && record.conflicted ? record.tree?.conflicts ?? [] : []
        return try documentJSON(id: record.id, rev: record.revID, deleted: false, body: record.body, conflicts: losers)
    }

    /// `{"_id", "_rev"[, "_deleted"][, "_conflicts"], …body}`.
    private static func documentJSON(id: String, rev: RevID, deleted: Bool, body: [UInt8],
                                     conflicts: [RevID] = []) throws -> JSON {
        var out: JSONObject = ["_id": .string(id), "_rev": .string(rev.description)]
        if deleted { out["_deleted"] = true }
        if !conflicts.isEmpty { out["_conflicts"] = .array(conflicts.map { .string($0.description) }) }
        if case .object(let fields) = try JSON.parse(body) {
            for (k, v) in fields where k != "_id" && k != "_rev" { out[k] = v }
        }
        return .object(out)
    }

    // MARK: Chunks

    struct Chunk {
        let count: Int
        let reduction: String?
        let start: ([UInt8], String)
        let first: ([UInt8], String, String)?  // key, doc, key JSON
        let last: ([UInt8], String, String)?
    }

    /// The chunks that may hold rows of `range`, in order.
    private func chunks(_ view: StoredView, from range: ViewRange, db: Connection, _ body: (Chunk) throws -> Bool) throws {
        var startKey: [UInt8] = []
        var startDoc = ""
        if let lower = range.lower {
            try db.withStatement("SELECT skey, sdoc FROM \(view.chunks) WHERE (skey, sdoc) <= (?, ?) ORDER BY skey DESC, sdoc DESC LIMIT 1",
                                 [.blob(lower.key), .text(lower.docID ?? "")]) { find in
                if try find.step() {
                    startKey = find.blob(0) ?? []
                    startDoc = find.string(1) ?? ""
                }
            }
        }
        let stmt = try db.prepare("SELECT count, reduction, skey, sdoc, fkey, fdoc, fk, lkey, ldoc, lk FROM \(view.chunks) WHERE (skey, sdoc) >= (?, ?) ORDER BY skey, sdoc")
        defer { stmt.reset() }
        stmt.bind(bytes: startKey, at: 1)
        stmt.bind(startDoc, at: 2)
        while try stmt.step() {
            let count = stmt.int(0)
            let chunk = Chunk(
                count: count, reduction: stmt.string(1), start: (stmt.blob(2) ?? [], stmt.string(3) ?? ""),
                first: count == 0 ? nil : (stmt.blob(4) ?? [], stmt.string(5) ?? "", stmt.string(6) ?? "null"),
                last: count == 0 ? nil : (stmt.blob(7) ?? [], stmt.string(8) ?? "", stmt.string(9) ?? "null"))
            if let upper = range.upper, let first = chunk.first {
                let c = ViewRange.compare(first.0, first.1, upper)
                if c > 0 || (c == 0 && !upper.inclusive) { return }
            }
            if try !body(chunk) { return }
        }
    }

    /// The number of rows in `range`: whole chunks by their stored counts, the edge chunks by counting rows.
    func countRows(_ view: StoredView, range: ViewRange, db: Connection) throws -> Int {
        if range.lower == nil && range.upper == nil { return try ViewManager.totalRows(view, db: db) }
        var total = 0
        try chunks(view, from: range, db: db) { chunk in
            guard let first = chunk.first, let last = chunk.last else { return true }
            if range.contains(first.0, first.1) && range.contains(last.0, last.1) {
                total += chunk.count
            } else {
                total += try countRowsInChunk(view, chunk: chunk, range: range, db: db)
            }
            return true
        }
        return total
    }

    private func countRowsInChunk(_ view: StoredView, chunk: Chunk, range: ViewRange, db: Connection) throws -> Int {
        guard let first = chunk.first, let last = chunk.last else { return 0 }
        var values: [SQLiteValue] = []
        let condition = range.sql(&values)
        let stmt = try db.prepare("SELECT count(*) FROM \(view.table) WHERE (key, docid) >= (?, ?) AND (key, docid) <= (?, ?) AND \(condition)")
        defer { stmt.reset() }
        stmt.bind([.blob(first.0), .text(first.1), .blob(last.0), .text(last.1)] + values)
        return try stmt.step() ? stmt.int(0) : 0
    }

    // MARK: Reduce

    /// Reduces the rows of `range`, grouped: stored chunk reductions for chunks wholly inside the range (and inside
    /// one group), the rows themselves at the edges, partial results combined with `rereduce`.
    func reduce(_ view: StoredView, range: ViewRange, grouping: ViewGrouping, reduce: Reducer,
                keyPrefixLength: Int = 0, db: Connection) throws -> [(key: JSON, value: JSON)] {
        var out: [(key: JSON, value: JSON)] = []
        var currentGroup: [UInt8]?
        var currentKey: JSON = .null
        var partials: [JSON] = []
        var rawKeys: [JSON] = []
        var rawValues: [JSON] = []
        let isCount: Bool = { if case .builtIn(.count) = reduce { return true }; return false }()
        let withIDs = reduce.usesDocumentIDs

        func flushRaw() throws {
            guard !rawKeys.isEmpty else { return }
            partials.append(isCount ? .int(Int64(rawKeys.count)) : try reduce.reduce(keys: rawKeys, values: rawValues, rereduce: false))
            rawKeys.removeAll(keepingCapacity: true)
            rawValues.removeAll(keepingCapacity: true)
        }
        func finishGroup() throws {
            try flushRaw()
            guard !partials.isEmpty else { return }
            let value = partials.count == 1 ? partials[0] : try reduce.reduce(keys: [], values: partials, rereduce: true)
            out.append((grouping == .none ? .null : currentKey, reduce.finalize(value)))
            partials.removeAll(keepingCapacity: true)
        }
        func enter(_ group: [UInt8], _ keyJSON: String) throws {
            if currentGroup == group { return }
            if currentGroup != nil { try finishGroup() }
            currentGroup = group
            currentKey = grouping == .none ? .null : groupKey(try JSON.parse(Array(keyJSON.utf8)))
        }
        func groupKey(_ key: JSON) -> JSON {
            switch grouping {
            case .none: return .null
            case .exact: return key
            case .level(let n):
                if case .array(let items) = key { return .array(Array(items.prefix(n))) }
                return key
            }
        }
        /// The encoded group of an encoded key, without decoding it: the first `n` elements of an array key.
        func groupBytes(_ encodedKey: [UInt8]) -> [UInt8] {
            switch grouping {
            case .none: return []
            case .exact: return encodedKey
            case .level(let n):
                // (A partitioned view's keys start with the partition: group the key after it.)
                if keyPrefixLength > 0 {
                    return ViewCollator.prefix(of: Array(encodedKey[min(keyPrefixLength, encodedKey.count)...]), elements: n)
                }
                return ViewCollator.prefix(of: encodedKey, elements: n)
            }
        }

        try chunks(view, from: range, db: db) { chunk in
            guard let first = chunk.first, let last = chunk.last else { return true }
            if let lower = range.lower {
                let c = ViewRange.compare(last.0, last.1, lower)
                if c < 0 || (c == 0 && !lower.inclusive) { return true }
            }
            if let stored = chunk.reduction, range.contains(first.0, first.1), range.contains(last.0, last.1) {
                let g1 = groupBytes(first.0)
                if g1 == groupBytes(last.0) {
                    try enter(g1, first.2)
                    try flushRaw()
                    partials.append(try JSON.parse(Array(stored.utf8)))
                    return true
                }
            }
            // Rows of this chunk in the range.
            var values: [SQLiteValue] = []
            let condition = range.sql(&values)
            let stmt = try db.prepare("SELECT key, k, v, docid FROM \(view.table) WHERE (key, docid) >= (?, ?) AND (key, docid) <= (?, ?) AND \(condition) ORDER BY key, docid")
            defer { stmt.reset() }
            stmt.bind([.blob(first.0), .text(first.1), .blob(last.0), .text(last.1)] + values)
            while try stmt.step() {
                let g = groupBytes(stmt.blob(0) ?? [])
                if g != currentGroup { try enter(g, stmt.string(1) ?? "null") }
                if isCount {
                    rawKeys.append(.null)
                } else {
                    let key = try stmt.withTextBytes(1) { try JSON.parse($0) }
                    rawKeys.append(withIDs ? .array([key, .string(stmt.string(3) ?? "")]) : key)
                    rawValues.append(stmt.isNull(2) ? .null : try stmt.withTextBytes(2) { try JSON.parse($0) })
                }
                if rawKeys.count >= 2 * ViewManager.chunkSize { try flushRaw() }
            }
            return true
        }
        try finishGroup()
        return out
    }

    // MARK: Full text

    private func fullTextQuery(_ q: ViewQuery, text: String, view: StoredView) throws -> ViewQueryResult {
        let fts5 = try FullTextQuery.translate(text)
        let collection = q.view.collection
        let (isFullText, hasRows) = try database.read { db in
            let snapshot = try ViewManager.snapshot(view, db: db)
            return (snapshot.fullText, try self.directory(view, version: snapshot.chunkVersion, db: db).total > 0)
        }
        if !isFullText && hasRows {
            throw SetteeError(.queryParseError, "View '\(view.name)' is not a full-text view (its map function emits no TextKey)")
        }
        // (A view with no full-text rows yet has no full-text table: nothing matches.)
        var rows = !isFullText ? [] : try database.read { db -> [ViewQueryRow] in
            let order = q.fullTextRanking ? "ORDER BY rank" : ""
            let stmt = try db.prepare("SELECT rowid, bm25(\(view.fts)) AS rank, docid, k, v FROM \(view.fts) WHERE \(view.fts) MATCH ? \(order) LIMIT ? OFFSET ?")
            defer { stmt.reset() }
            stmt.bind([.text(fts5), .integer(Int64(min(q.limit ?? Int(Int32.max), Int(Int32.max)))), .integer(Int64(q.skip))])
            var found: [(Int64, Double, String, JSON, JSON?)] = []
            do {
                while try stmt.step() {
                    let key = try stmt.withTextBytes(3) { try JSON.parse($0) }
                    let value: JSON? = stmt.isNull(4) ? nil : try stmt.withTextBytes(4) { try JSON.parse($0) }
                    found.append((stmt.int64(0), stmt.double(1), stmt.string(2) ?? "", key, value))
                }
            } catch let error as SetteeError where error.code == .storage {
                throw SetteeError(.queryParseError, "Invalid full-text query \"\(text)\": \(error.reason)")
            }
            var rows: [ViewQueryRow] = []
            for (rowid, rank, source, key, value) in found {
                let matches = try FullTextDetails.matches(db, table: view.fts, columns: 1, query: text, rowid: rowid)
                let snippet = q.fullTextSnippets
                    ? try FullTextDetails.snippet(db, table: view.fts, query: text, rowid: rowid, start: "\u{1}", end: "\u{2}", tokens: 16)
                    : nil
                var target = source
                if case .object(let o)? = value, case .string(let id)? = o["_id"] { target = id }
                rows.append(ViewQueryRow(key: key, value: value, sourceDocumentID: source, documentID: target, document: nil,
                                         fullText: key.stringValue, matches: matches, rank: q.fullTextRanking ? rank : nil,
                                         markedSnippet: snippet))
            }
            return rows
        }
        if q.includeDocs {
            rows = try rows.map { row in
                ViewQueryRow(key: row.key, value: row.value, sourceDocumentID: row.sourceDocumentID, documentID: row.documentID,
                             document: try ViewManager.includedDocument(row, collection, conflicts: q.conflicts), fullText: row.fullText,
                             matches: row.matches, rank: row.rank, markedSnippet: row.markedSnippet)
            }
        }
        let (total, seq) = try database.read { db in
            let snapshot = try ViewManager.snapshot(view, db: db)
            return (try self.directory(view, version: snapshot.chunkVersion, db: db).total, snapshot.lastSequence)
        }
        return ViewQueryResult(rows: rows, totalRows: total, offset: q.skip, sequenceNumber: seq)
    }
}
