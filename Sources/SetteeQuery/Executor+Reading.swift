import SetteeCore
import SetteeIndex
import SetteeSQLPP
import SetteeStore

/// The FROM source's readers: each reads the candidate documents its access path names and pushes them through
/// the row pipeline (joins, UNNESTs, filter).
extension Executor {
    /// Documents by rowid (what a MATCH or a vector search found), in the given order; the conjunct at
    /// `servedTerm` is already decided. `upTo`: stop once the pipeline holds that many rows (the order is final).
    func readRows(_ rowids: [Int64], of primary: BoundSource, servedTerm: Int, upTo stop: Int?,
                  into pipeline: inout RowPipeline) throws {
        let live = query.includeDeleted ? "" : " AND \(DocumentTable.live("d"))"
        let fetch = try pipeline.db.prepare("SELECT \(Planner.documentColumns) FROM \(DocumentTable.table(primary.collection, as: "d"))"
                                            + " WHERE \(DocumentTable.column(.rowid, "d")) = ?\(live)")
        let remaining = query.primaryTerms.enumerated().filter { $0.offset != servedTerm }.map(\.element)
        let keys = query.bodyKeys[primary.name] ?? nil
        for rowid in rowids {
            if let stop, pipeline.rows.count >= stop { break }
            fetch.bind(rowid, at: 1)
            defer { fetch.reset() }
            guard try fetch.step(), let document = Executor.document(fetch, keys: keys, revision: query.readsRevision,
                                                                     expirations: expirations) else { continue }
            let row = Row(primaryName: primary.name, primary: document)
            guard try remaining.allSatisfy({ try evaluator.isTrue($0, in: row) }) else { continue }
            if try !pipeline.push(row) { break }
        }
    }

    /// The rows of an array index that covers the UNNEST: the element is column 5. The index decided the WHERE
    /// exactly when every bound value was present (else the terms are evaluated as usual). With `directLimit`
    /// (a streaming query) and columns that are only `META().id` or the element, each index row is a result:
    /// no rows, no evaluator, and the results are returned.
    func readCoveringArrayIndex(_ path: AccessPath, alias: String, of primary: BoundSource, db: Connection,
                                directLimit: (limit: Int?, offset: Int)?,
                                into pipeline: inout RowPipeline) throws -> [QueryResult]? {
        let stmt = try db.prepare(path.sql)
        defer { stmt.reset() }
        let exact = try bind(path, to: stmt)
        let decided = exact && path.servedTerms.count == query.otherTerms.count
        if decided, let (limit, offset) = directLimit, let columns = coveringColumns(alias: alias, primary: primary.name) {
            let names = query.columns.map(\.name)
            var out: [QueryResult] = []
            var skip = offset
            while limit.map({ out.count < $0 }) ?? true, try stmt.step() {
                guard let element = try? stmt.withTextBytes(5, { bytes in try JSON.parse(bytes) }) else { continue }
                if skip > 0 { skip -= 1; continue }
                var values: [JSON?] = []
                values.reserveCapacity(columns.count)
                for column in columns {
                    switch column {
                    case .id: values.append(.string(stmt.string(1) ?? ""))
                    case .element: values.append(element)
                    }
                }
                out.append(QueryResult(keys: names, values: values, database: database))
            }
            return out
        }
        while try stmt.step() {
            guard let element = try? stmt.withTextBytes(5, { bytes in try JSON.parse(bytes) }) else { continue }
            var owner = SourceDocument(id: stmt.string(1) ?? "", sequence: UInt64(stmt.int64(2)),
                                       revisionID: query.readsRevision ? (stmt.string(3) ?? "") : "",
                                       body: .object(JSONObject()), rowid: stmt.int64(0))
            owner.expiration = expirations?[owner.id]
            var row = Row(primaryName: primary.name, primary: owner)
            row.others.append((alias, SourceDocument(id: owner.id, sequence: owner.sequence, body: element,
                                                     rowid: owner.rowid)))
            if try !pipeline.filter(row, decided: decided) { break }
        }
        return nil
    }

    /// The documents a value, Mango or full-text index or a scan reads. Conjuncts the index decided exactly are
    /// not evaluated again, and members only they would read are not extracted from each body. (An array index
    /// serves conjuncts on the UNNEST alias: its served positions are in `otherTerms`, and every primary conjunct
    /// is still evaluated.)
    func read(_ path: AccessPath, of primary: BoundSource, db: Connection,
              into pipeline: inout RowPipeline) throws {
        let stmt = try db.prepare(path.sql)
        defer { stmt.reset() }
        let exact = try bind(path, to: stmt)
        let servesPrimaryTerms = path.index?.spec.kind != .array
        let remaining = exact && servesPrimaryTerms && !path.servedTerms.isEmpty
            ? query.primaryTerms.enumerated().filter { !path.servedTerms.contains($0.offset) }.map(\.element)
            : query.primaryTerms
        let keys = remaining.count < query.primaryTerms.count ? query.primaryBodyKeys(evaluating: remaining)
            : query.bodyKeys[primary.name] ?? nil
        var seen = Set<Int64>()
        while try stmt.step() {
            if path.distinctDocuments && !seen.insert(stmt.int64(0)).inserted { continue }
            guard let document = Executor.document(stmt, keys: keys, revision: query.readsRevision,
                                                   expirations: expirations) else { continue }
            let row = Row(primaryName: primary.name, primary: document)
            guard try remaining.allSatisfy({ try evaluator.isTrue($0, in: row) }) else { continue }
            if try !pipeline.push(row) { break }
        }
    }

    /// The documents a full-text access path's MATCH conjunct matched (from the MATCH already run), with that
    /// conjunct's position and whether they are in the query's final order: by rank for `ORDER BY RANK(i) [DESC]`
    /// without joins, UNNEST, grouping or DISTINCT (then reading can stop at LIMIT), else by row.
    func fullTextCandidates(_ path: AccessPath) throws -> ([Int64], Int, Bool)? {
        guard let index = path.index, index.spec.kind == .fullText, let served = path.servedTerms.first,
              case .function("MATCH", let args, _) = query.primaryTerms[served] else { return nil }
        let key = try FullTextSearch.key(args, evaluator: evaluator, in: Row(primaryName: "", primary: nil))
        guard let matches = evaluator.fullTextMatches[key] else {
            throw SetteeError(.internalError, "MATCH(\(key.index), …) was not run before reading its documents")
        }
        if query.ordering.count == 1, let order = query.ordering.first, let e = order.expression,
           case .function("RANK", let rankArgs, _) = e, (try? FullTextSearch.indexName(rankArgs[0])) == index.name,
           !query.isAggregate, !query.statement.distinct, query.joins.isEmpty, query.unnestCount == 0 {
            let sorted = matches.sorted { a, b in
                if a.value != b.value { return order.descending ? a.value > b.value : a.value < b.value }
                return a.key < b.key
            }
            return (sorted.map(\.key), served, true)
        }
        return (matches.keys.sorted(), served, false)
    }

    /// A vector search's nearest documents, in distance order when the query orders by that distance (then reading
    /// stops at LIMIT). No WHERE conjunct is decided by the search itself.
    func vectorSearchCandidates() -> ([Int64], Int, Bool)? {
        guard let candidates = vectorCandidates, let plan = query.vectorPlan else { return nil }
        let ranked = plan.orderedByDriver && query.ordering.count == 1 && !query.isAggregate && !query.statement.distinct
            && query.joins.isEmpty && query.unnestCount == 0
        return (candidates, -1, ranked)
    }

    /// What a covering array-index read can produce without a row: `META().id` of the FROM source, or the UNNEST
    /// element itself (`alias`). Nil when any column needs more.
    enum CoveringColumn { case id, element }

    func coveringColumns(alias: String, primary: String) -> [CoveringColumn]? {
        var out: [CoveringColumn] = []
        for column in query.columns {
            guard case .expression(let e) = column.kind else { return nil }
            switch e {
            case .meta(let source, .id) where source == nil || source == primary:
                out.append(.id)
            case .property(nil, let path) where path.count == 1 && path.first == .key(alias) && alias != primary:
                out.append(.element)
            case .property(let source?, let path) where source == alias && path.isEmpty:
                out.append(.element)
            default:
                return nil
            }
        }
        return out.isEmpty ? nil : out
    }

    /// Binds the access path's values; returns whether every one was present and not null (which makes the
    /// path's served terms exact).
    @discardableResult
    func bind(_ path: AccessPath, to stmt: Statement) throws -> Bool {
        let none = Row(primaryName: "", primary: nil)
        if let mango = path.mango {
            // (A missing value is null here: the index then reads rows keyed null, which the WHERE rejects.)
            let bounds = try MangoIndex.keyBounds(
                equal: try mango.equal.map { try evaluator.evaluate($0, in: none) ?? .null },
                lower: try mango.lower.flatMap { try evaluator.evaluate($0, in: none) },
                upper: try mango.upper.flatMap { try evaluator.evaluate($0, in: none) })
            stmt.bind(bytes: bounds.lower, at: 1)
            stmt.bind(bytes: bounds.upper, at: 2)
            return false
        }
        var allPresent = true
        for (i, (e, kind)) in zip(path.bindings, path.bindingKinds).enumerated() {
            let value = try evaluator.evaluate(e, in: Row(primaryName: "", primary: nil))
            if value == nil || value == .null { allPresent = false }
            let index = Int32(i + 1)
            switch kind {
            case .key:
                if let key = KeyEncoding.encode(value) { stmt.bind(bytes: key, at: index) } else { stmt.bindNull(at: index) }
            case .keyPrefixLower, .keyPrefixUpper:
                if case .string(let prefix)? = value {
                    let range = KeyEncoding.prefixRange(prefix)
                    stmt.bind(bytes: kind == .keyPrefixLower ? range.lower : range.upper, at: index)
                } else {
                    stmt.bindNull(at: index)
                }
            case .documentID:
                if case .string(let id)? = value { stmt.bind(id, at: index) } else { stmt.bindNull(at: index) }
            case .text:
                if case .string(let text)? = value { stmt.bind(try FullTextQuery.translate(text), at: index) } else { stmt.bindNull(at: index) }
            }
        }
        return allPresent
    }

    /// A document from a `rowid, id, seq, rev, flags, body` row, reading only `keys` of the body (nil: all of it).
    static func document(_ stmt: Statement, keys: JSONMemberSelector?, revision: Bool = true,
                         expirations: [String: Int64]? = nil) -> SourceDocument? {
        let body: JSON
        do {
            body = try stmt.withTextBytes(DocumentRowColumn.body) { bytes in
                if bytes.isEmpty { return JSON.object(JSONObject()) }
                if let keys { return try keys.parseStored(bytes) }
                return try JSON.parse(bytes)
            }
        } catch {
            return nil
        }
        var document = SourceDocument(id: stmt.string(DocumentRowColumn.id) ?? "",
                                      sequence: UInt64(stmt.int64(DocumentRowColumn.seq)),
                                      revisionID: revision ? (stmt.string(DocumentRowColumn.rev) ?? "") : "",
                                      deleted: DocFlags(rawValue: stmt.int64(DocumentRowColumn.flags)).contains(.deleted),
                                      body: body, rowid: stmt.int64(DocumentRowColumn.rowid))
        if let expirations { document.expiration = expirations[document.id] }
        return document
    }
}
