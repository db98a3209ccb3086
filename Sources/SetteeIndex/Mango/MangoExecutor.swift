import Foundation
package import SetteeCore
package import SetteeStore

/// The answer to `POST /{db}/_find`, in CouchDB's shape.
package struct MangoResult: Sendable {
    public var docs: [JSON] = []
    /// Where the next page starts (`"nil"` when no row was read); nil only for a query no document can match,
    /// which CouchDB answers with `docs` alone.
    public var bookmark: String?
    public var executionStats: JSON?
    public var warnings: [String] = []

    /// `{"docs", "bookmark", "execution_stats", "warning"}`, in CouchDB's order.
    public var json: JSON {
        var out: JSONObject = ["docs": .array(docs)]
        if let bookmark { out["bookmark"] = .string(bookmark) }
        if let executionStats { out["execution_stats"] = executionStats }
        if !warnings.isEmpty { out["warning"] = .string(warnings.joined(separator: "\n")) }
        return .object(out)
    }
}

/// Runs Mango queries over a collection: plans with ``MangoPlan``, reads the chosen json index's view rows (or
/// `_all_docs`) in order with their documents, filters them with the whole selector, then skips, limits and
/// projects as CouchDB's `mango_cursor_view` does.
package enum MangoExecutor {
    /// Documents read from `_all_docs` per batch.
    static let allDocsBatch = 500
    /// CouchDB's `[mango] index_scan_warning_threshold`: documents examined per result above which it warns.
    static let scanWarningThreshold = 10

    /// Runs a `_find`.
    /// - Throws: ``MangoError`` (no usable index, a bad bookmark, …), store errors.
    public static func find(_ query: MangoQuery, in collection: Collection) throws -> MangoResult {
        let started = DispatchTime.now().uptimeNanoseconds
        try checkPartition(query, collection)
        let partitioned = collection.database.isPartitioned
        let plan = try MangoPlan(query: query, indexes: try MangoIndex.list(collection),
                                 databasePartitioned: partitioned, purpose: .find)
        // (A plan for `_find` always has an index: without one it throws.)
        guard let index = plan.index else { throw MangoPlan.noUsableIndex(query, databasePartitioned: partitioned) }
        if isEmpty(query) { return MangoResult() }
        var result = MangoResult()
        var stats = Stats()
        var skip = query.skip
        let resume: (key: JSON, id: String)? = try query.bookmark.map(decodeBookmark)
        /// The last row read that matched: its key (JSON text) and id.
        var last: (key: [UInt8], id: String)?
        let covering = isCovering(query, index)
        let manager = try ViewManager.shared(for: collection.database)
        try manager.withCollator { collator in
        /// One row: match, skip, keep. Returns false when the page is full.
        let projection = try query.fields.map(MangoSelector.fieldPath)
        func consider(key: [UInt8], id: String, document: () throws -> JSON) throws -> Bool {
            stats.keys += 1
            let doc = try document()
            if !covering { if query.r > 1 { stats.quorumDocs += 1 } else { stats.docs += 1 } }
            // The page is full: this row was read ahead and is not part of it (CouchDB's statistics count it too).
            if result.docs.count >= query.limit { return false }
            // (A design document read from `_all_docs` counts as examined, and never matches.)
            guard doc != .null, query.documentFilter?(id) ?? true,
                  query.selector.matches(doc, strings: collator.compareStrings) else { return true }
            last = (key, id)
            if skip > 0 { skip -= 1; return true }
            var output = doc
            if !query.conflicts, case .object(var o) = doc, o["_conflicts"] != nil {
                o["_conflicts"] = nil  // (read for the selector; returned only with `conflicts: true`)
                output = .object(o)
            }
            result.docs.append(project(output, projection))
            return true
        }
        if query.limit > 0 {
            switch index.kind {
            case .json: try scanView(index, query, collection, manager: manager, collator: collator, after: resume,
                                     covering: covering, consider)
            case .special: try scanAllDocs(query, collection, after: resume, consider)
            }
        }
        }
        result.bookmark = try last.map { encodeBookmark((try JSON.parse($0.key), $0.id)) } ?? query.bookmark ?? "nil"
        result.warnings = plan.warnings
        let examined = stats.docs + stats.quorumDocs
        let ratio = result.docs.isEmpty ? examined : examined / result.docs.count
        if ratio > scanWarningThreshold {
            result.warnings.append("The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.")
        }
        if query.executionStats {
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000_000
            result.executionStats = [
                "total_keys_examined": .int(Int64(stats.keys)), "total_docs_examined": .int(Int64(stats.docs)),
                "total_quorum_docs_examined": .int(Int64(stats.quorumDocs)),
                "results_returned": .int(Int64(result.docs.count)), "execution_time_ms": .double(max(elapsed, 0.001)),
            ]
        }
        return result
    }

    struct Stats {
        var keys = 0, docs = 0, quorumDocs = 0
    }

    /// A partition query needs a partitioned database.
    static func checkPartition(_ query: MangoQuery, _ collection: Collection) throws {
        if query.partition != nil && !collection.database.isPartitioned {
            throw MangoError.badRequest("query_parse_error", "`partition` parameter is not supported on this db")
        }
    }

    /// No document can match: a contradictory range, or a selector that is exactly `{"$or": []}` / `{"$and": []}`
    /// (which CouchDB answers with no documents).
    static func isEmpty(_ query: MangoQuery) -> Bool {
        if case .object(let o) = query.selectorJSON, o.count == 1, o[0].key == "$or" || o[0].key == "$and",
           case .array(let items) = o[0].value, items.isEmpty { return true }
        return query.selector.indexableFields.contains { query.selector.isEmptyRange($0) }
    }

    /// A json index covers a query when its columns (and `_id`) hold every field the query reads and returns.
    static func isCovering(_ query: MangoQuery, _ index: MangoIndex) -> Bool {
        guard index.kind == .json, !query.fields.isEmpty, query.r == 1, !query.conflicts else { return false }
        let available = Set(index.paths + [["_id"]])
        let fields = (try? query.fields.map(MangoSelector.fieldPath)) ?? []
        return fields.allSatisfy(available.contains) && query.selector.fields.allSatisfy(available.contains)
    }

    // MARK: Ranges

    /// The json index's key range for the query: the lows of its leading columns the selector bounds, up to the
    /// highs (then anything), as CouchDB's `mango_idx_view:start_key/end_key`. Values are JSON for `_explain`;
    /// `nil` in `end` is CouchDB's `<MAX>`.
    static func keyRange(_ index: MangoIndex, _ selector: MangoSelector) -> (start: [JSON], end: [JSON?]) {
        let indexable = selector.indexableFields
        let prefix = index.paths.prefix { indexable.contains($0) }
        var start: [JSON] = []
        for path in prefix {
            guard let low = selector.range(of: path)?.lower else { break }
            start.append(low.value)
        }
        var end: [JSON?] = []
        for path in prefix {
            guard let high = selector.range(of: path)?.upper else { break }
            end.append(high.value)
        }
        end.append(nil)
        return (start, end)
    }

    static func scanView(_ index: MangoIndex, _ query: MangoQuery, _ collection: Collection, manager: ViewManager,
                         collator: ViewCollator, after bookmark: (key: JSON, id: String)?, covering: Bool,
                         _ consider: ([UInt8], String, () throws -> JSON) throws -> Bool) throws {
        guard let (_, stored, definition) = try index.preparedView(in: collection) else { return }
        if query.update && !query.stale { try manager.update(stored, definition: definition, collection: collection) }
        let (start, end) = keyRange(index, query.selector)
        let paths = index.paths
        let members = members(query)
        let wantsConflicts = wantsConflicts(query)
        do {
            let prefix = query.partition.map { ViewManager.partitionPrefix($0, collator) } ?? []
            var lower = prefix + [ViewCollator.array]
            for value in start { collator.append(value, to: &lower) }
            var upper = prefix + [ViewCollator.array]
            for value in end {
                guard let value else { upper.append(0xFF); break }
                collator.append(value, to: &upper)
            }
            var range = ViewRange(lower: ViewRange.Bound(key: lower, docID: nil, inclusive: true),
                                  upper: ViewRange.Bound(key: upper, docID: nil, inclusive: true))
            if let bookmark {
                let key = prefix + collator.encode(bookmark.key)
                let after = ViewRange.Bound(key: key, docID: bookmark.id, inclusive: false)
                if query.descending { range.upper = after } else { range.lower = after }
            }
            try manager.scan(stored, collection: collection, range: range, descending: query.descending) { row in
                try consider(row.keyBytes, row.documentID) {
                    if covering {
                        var doc: JSON = ["_id": .string(row.documentID)]
                        if case .array(let values) = try JSON.parse(row.keyBytes) {
                            for (path, value) in zip(paths, values) { set(value, at: path[...], in: &doc) }
                        }
                        return doc
                    }
                    var doc = try document(id: row.documentID, rev: row.revision, body: row.body, members: members)
                    if wantsConflicts, let bytes = row.conflictedTree, let tree = try? RevTree(encoded: bytes) {
                        doc = withConflicts(doc, tree)
                    }
                    return doc
                }
            }
        }
    }

    static func scanAllDocs(_ query: MangoQuery, _ collection: Collection, after bookmark: (key: JSON, id: String)?,
                            _ consider: ([UInt8], String, () throws -> JSON) throws -> Bool) throws {
        // The `_id` range the selector gives (string bounds only: every id is a string), inside the partition.
        var low: String?, high: String?
        if let range = query.selector.range(of: ["_id"]) {
            if case .string(let s)? = range.lower?.value { low = s }
            if case .string(let s)? = range.upper?.value { high = s }
        }
        if let p = query.partition {
            low = max(low ?? "", p + ":")
            high = min(high ?? p + ";", p + ";")
        }
        let members = members(query)
        let wantsConflicts = wantsConflicts(query)
        var options = Collection.AllDocsOptions()
        options.includeDocs = true
        options.countsRows = false
        options.descending = query.descending
        options.startKey = query.descending ? high : low
        options.endKey = query.descending ? low : high
        options.limit = allDocsBatch
        var resume = bookmark?.id
        while true {
            if let resume {
                options.startKey = resume
                options.skip = 1
            }
            let rows = try collection.allDocs(options).rows
            for row in rows {
                if let p = query.partition, !row.id.hasPrefix(p + ":") { continue }
                let more = try consider(JSON.string(row.id).serializedBytes, row.id) {
                    let doc = try document(id: row.id, rev: row.rev.description, body: row.body ?? [], members: members)
                    guard wantsConflicts, doc != .null, let record = try collection.record(id: row.id, withTree: true),
                          record.conflicted, let tree = record.tree else { return doc }
                    return withConflicts(doc, tree)
                }
                if !more { return }
            }
            guard rows.count == allDocsBatch, let last = rows.last else { return }
            resume = last.id
        }
    }

    /// Whether documents are read with their `_conflicts`: asked for, or named by the selector.
    static func wantsConflicts(_ query: MangoQuery) -> Bool {
        query.conflicts || query.selector.fields.contains { $0.first == "_conflicts" }
    }

    /// The document with its live losing leaves as `_conflicts`, as CouchDB opens it with `conflicts`.
    static func withConflicts(_ doc: JSON, _ tree: RevTree) -> JSON {
        guard case .object(var o) = doc else { return doc }
        let losers = tree.conflicts
        if !losers.isEmpty { o["_conflicts"] = .array(losers.map { .string($0.description) }) }
        return .object(o)
    }

    /// The members a query reads from documents when it returns only `fields` (theirs and the selector's, by
    /// top-level name); nil: whole documents.
    static func members(_ query: MangoQuery) -> JSONMemberSelector? {
        guard !query.fields.isEmpty else { return nil }
        var names: Set<String> = []
        for field in query.fields { if let first = (try? MangoSelector.fieldPath(field))?.first { names.insert(first) } }
        for path in query.selector.fields { if let first = path.first { names.insert(first) } }
        return JSONMemberSelector(names.subtracting(["_id", "_rev"]))
    }

    /// `{"_id", "_rev", …body}` for matching and output. Design documents never match the special index's
    /// selector (CouchDB skips them after reading), so they are given as an empty object.
    static func document(id: String, rev: String, body: [UInt8], members: JSONMemberSelector?) throws -> JSON {
        if id.hasPrefix("_design/") { return .null }
        var out: JSONObject = ["_id": .string(id), "_rev": .string(rev)]
        let parsed = try members.map { m in try body.withUnsafeBytes { try m.parseStored($0) } } ?? JSON.parse(body)
        if case .object(let fields) = parsed {
            for (k, v) in fields where k != "_id" && k != "_rev" { out[k] = v }
        }
        return .object(out)
    }

    // MARK: Fields and bookmarks

    /// The document with only `fields` (dotted paths nest), as CouchDB's `mango_fields:extract/2`.
    static func project(_ doc: JSON, _ fields: [MangoSelector.FieldPath]) -> JSON {
        if fields.isEmpty { return doc }
        var out: JSON = .object([:])
        for path in fields {
            guard let value = MangoSelector.value(at: path, in: doc) else { continue }
            set(value, at: path[...], in: &out)
        }
        return out
    }

    static func set(_ value: JSON, at path: ArraySlice<String>, in target: inout JSON) {
        guard let first = path.first else { target = value; return }
        var object = target.objectValue ?? [:]
        var child = object[first] ?? .object([:])
        if path.count > 1, child.objectValue == nil { child = .object([:]) }
        set(value, at: path.dropFirst(), in: &child)
        object[first] = child
        target = .object(object)
    }

    /// A bookmark: the last row's key and document id, as URL-safe base64 of JSON.
    static func encodeBookmark(_ position: (key: JSON, id: String)) -> String {
        let bytes = JSON.array([position.key, .string(position.id)]).serializedBytes
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func decodeBookmark(_ text: String) throws -> (key: JSON, id: String) {
        func invalid() -> MangoError {
            MangoError.badRequest("invalid_bookmark", "Invalid bookmark value: \(JSON.string(text).jsonString)")
        }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), case .array(let parts)? = try? JSON.parse(Array(data)),
              parts.count == 2, case .string(let id) = parts[1] else { throw invalid() }
        return (parts[0], id)
    }
}
