package import SetteeCore
package import SetteeStore

extension MangoExecutor {
    /// `POST /{db}/_explain`: the index a `_find` would use, the range it would read and why the other indexes
    /// were not chosen, in CouchDB 3.5's shape. For a query no index can serve (which `_find` refuses with
    /// `no_usable_index`) it answers as CouchDB does: `"index": null`, no `mrargs` or `covering`, and each
    /// candidate with the reason it can't be used.
    public static func explain(_ query: MangoQuery, in collection: Collection) throws -> JSON {
        try checkPartition(query, collection)
        let plan = try MangoPlan(query: query, indexes: try MangoIndex.list(collection),
                                 databasePartitioned: collection.database.isPartitioned, purpose: .explain)
        let sort = JSON.object(JSONObject(query.sort.map { ($0.name, .string($0.descending ? "desc" : "asc")) }))
        let opts: JSON = .object(JSONObject([
            ("use_index", .array(query.useIndex.map(JSON.string))), ("bookmark", .string(query.bookmark ?? "nil")),
            ("limit", .int(Int64(query.limit))), ("skip", .int(Int64(query.skip))), ("sort", sort),
            ("fields", .array(query.fields.map(JSON.string))), ("partition", .string(query.partition ?? "")),
            ("r", .int(Int64(query.r))), ("conflicts", .bool(query.conflicts)),
            ("stale", query.stale ? "ok" : false), ("update", .bool(query.update)), ("stable", .bool(query.stable)),
            ("execution_stats", .bool(query.executionStats)), ("allow_fallback", .bool(query.allowFallback)),
        ]))
        func name(_ path: MangoSelector.FieldPath) -> String {
            path.map { $0.replacingOccurrences(of: ".", with: "\\.") }.joined(separator: ".")
        }
        let indexable = query.selector.indexableFields.map(name).sorted()
        let unindexable = query.selector.fields.map(name).filter { !indexable.contains($0) }.sorted()
        let candidates: [JSON] = plan.candidates.map { c in
            ["index": c.index.json,
             "analysis": ["usable": .bool(c.usable), "reasons": [["name": .string(c.reason.rawValue)]],
                          "ranking": .int(Int64(c.ranking)),
                          "covering": c.index.kind == .json ? .bool(isCovering(query, c.index)) : .null]]
        }
        var explained = JSONObject([
            ("dbname", .string(collection.database.name)), ("index", plan.index?.json ?? .null),
            ("partitioned", .bool(collection.database.isPartitioned)), ("selector", query.selector.normalizedJSON),
            ("opts", opts), ("limit", .int(Int64(query.limit))), ("skip", .int(Int64(query.skip))),
            ("fields", .array(query.fields.map(JSON.string))), ("index_candidates", .array(candidates)),
            ("selector_hints", [["type": "json", "indexable_fields": .array(indexable.map(JSON.string)),
                                 "unindexable_fields": .array(unindexable.map(JSON.string))]]),
        ])
        // The chosen index's own part (CouchDB's `mango_cursor_view:explain/1`); none without an index.
        guard let index = plan.index else { return .object(explained) }
        let covering = isCovering(query, index)
        let startKey: JSON, endKey: JSON
        switch index.kind {
        case .json:
            let (start, end) = keyRange(index, query.selector)
            let low: JSON = .array(start), high: JSON = .array(end.map { $0 ?? "<MAX>" })
            (startKey, endKey) = query.descending ? (high, low) : (low, high)
        case .special:
            let range = query.selector.range(of: ["_id"])
            var low: JSON = range?.lower?.value ?? .null
            var high: JSON = range?.upper?.value ?? "<MAX>"
            if let p = query.partition { (low, high) = (.string(p + ":"), .string(p + ";")) }
            (startKey, endKey) = query.descending ? (high, low) : (low, high)
        }
        let mrargs: JSON = .object(JSONObject([
            ("include_docs", .bool(!covering && query.r == 1)), ("view_type", "map"), ("reduce", false),
            ("partition", query.partition.map(JSON.string) ?? .null), ("start_key", startKey), ("end_key", endKey),
            ("direction", query.descending ? "rev" : "fwd"), ("stable", .bool(query.stable || query.stale)),
            ("update", .bool(query.update && !query.stale)), ("conflicts", query.conflicts ? true : "undefined"),
        ]))
        explained["mrargs"] = mrargs
        explained["covering"] = .bool(covering)
        return .object(explained)
    }
}
