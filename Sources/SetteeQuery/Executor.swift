import SetteeCore
import SetteeIndex
import SetteeSQLPP
import SetteeStore

/// Runs a compiled query: SQLite reads the candidate documents through the chosen access path (a value index, the
/// id column, or a scan), and the SQL++ evaluator decides every predicate, join, group, ordering and projection
/// exactly — the index only narrows which documents are read.
struct Executor {
    let query: CompiledQuery
    var evaluator: Evaluator
    /// A vector search's candidates, nearest first (set by `prepareVectorSearch`).
    var vectorCandidates: [Int64]?

    /// The FROM collection's expiration times by document id, when the query reads `META().expiration`.
    private var expirations: [String: Int64]?

    init(query: CompiledQuery, parameters: [String: JSON]) throws {
        self.query = query
        self.evaluator = Evaluator(parameters: parameters)
        self.evaluator.predictor = Database.prediction.predictor
        self.evaluator.stringCollator = QueryStringCollation.compare
        if query.readsExpiration, let primary = query.primary { expirations = try primary.collection.expirations() }
    }

    private var database: Database { query.database }

    // MARK: Planning

    private func indexManager() throws -> IndexManager { query.indexes }

    private func primaryPath() throws -> AccessPath? {
        var generation = PlanCache.Generation(indexes: try indexManager().generation, mango: 0)
        var mango: [MangoIndex] = []
        if let primary = query.primary {
            (mango, generation.mango) = try MangoIndex.listWithGeneration(primary.collection)
        }
        if let cached = query.planCache.get(generation) { return cached }
        let path = try planPrimaryPath(mango: mango)
        query.planCache.set(generation, path)
        return path
    }

    private func planPrimaryPath(mango: [MangoIndex]) throws -> AccessPath? {
        guard let primary = query.primary else { return nil }
        let relativeTerms = query.primaryTerms.compactMap {
            Planner.relative($0, to: primary.name, primary: primary.name, aliases: query.aliases)
        }
        let constraints = Planner.constraints(query.primaryTerms, source: primary.name, primary: primary.name,
                                              aliases: query.aliases)
        let indexes = try indexManager().indexes(of: primary.collection)
        if let plan = query.vectorPlan, !plan.hybrid {
            let index = plan.driverIndex
            let options = index.spec.vector
            return AccessPath(sql: "SELECT doc FROM \(index.table)", bindings: [], bindingKinds: [], index: index,
                              kind: .vectorIndex, summary: "vector index \(index.name): the LIMIT nearest by IVF (\(options?.effectiveProbes ?? 0) of \(options?.centroids ?? 0) lists; exact before training), then each document by rowid")
        }
        if let fullText = try Planner.fullTextAccessPath(for: primary, terms: query.primaryTerms, indexes: indexes,
                                                         includeDeleted: query.includeDeleted) {
            return fullText
        }
        var path = Planner.accessPath(for: primary, constraints: constraints, queryTerms: relativeTerms,
                                      indexes: indexes, includeDeleted: query.includeDeleted)
        // A Mango json index, when it narrows by more than any value index (on a tie the value index wins: it
        // decides its terms exactly).
        if let viaMango = try Planner.mangoAccessPath(for: primary, constraints: constraints, indexes: mango,
                                                      includeDeleted: query.includeDeleted),
           viaMango.score > path.score {
            path = viaMango
        }
        if path.kind == .scan, !query.statement.unnests.isEmpty, !query.includeDeleted,
           let array = Planner.arrayAccessPath(for: primary, unnests: query.statement.unnests, terms: query.otherTerms,
                                               aliases: query.aliases, indexes: indexes,
                                               coverable: query.joins.isEmpty && query.primaryTerms.isEmpty
                                                   && !query.readsPrimaryBodyBesidesUnnest) {
            return array
        }
        return path
    }

    /// Runs every `MATCH(index, query)` of the WHERE clause against its full-text index (caught up first) and gives
    /// the evaluator the matched documents with their rank (`-bm25`: higher is more relevant).
    mutating func prepareFullText() throws {
        guard query.usesFullText else { return }
        let calls = FullTextSearch.matchCalls(in: query.statement.whereClause)
        guard !calls.isEmpty else { return }
        guard let primary = query.primary else { throw SetteeError(.queryParseError, "MATCH needs a FROM clause") }
        let manager = try indexManager()
        let indexes = manager.indexes(of: primary.collection)
        for args in calls {
            let key = try FullTextSearch.key(args, evaluator: evaluator, in: Row(primaryName: "", primary: nil))
            guard let index = indexes.first(where: { $0.name == key.index }) else {
                throw SetteeError(.queryParseError, "MATCH(\(key.index), …): \(primary.collection.fullName) has no index named \(key.index)")
            }
            guard index.spec.kind == .fullText else {
                throw SetteeError(.queryParseError, "MATCH(\(key.index), …): \(key.index) is a \(index.spec.kind.rawValue) index, not a full-text index")
            }
            if evaluator.fullTextMatches[key] != nil { continue }
            try manager.catchUp(index, collection: primary.collection)
            let matches = try database.read { db -> [Int64: Double] in
                let stmt: Statement
                do {
                    stmt = try db.prepare("SELECT rowid, bm25(\(index.table)) FROM \(index.table) WHERE \(index.table) MATCH ?")
                } catch {
                    throw SetteeError(.queryParseError, "MATCH(\(key.index), …): \(error)")
                }
                defer { stmt.reset() }
                stmt.bind(try FullTextQuery.translate(key.query), at: 1)
                var out: [Int64: Double] = [:]
                do {
                    while try stmt.step() { out[stmt.int64(0)] = -stmt.double(1) }
                } catch {
                    throw SetteeError(.queryParseError, "Invalid full-text query \"\(key.query)\" in MATCH(\(key.index), …): \(error)")
                }
                return out
            }
            evaluator.fullTextMatches[key] = matches
        }
        let database = self.database
        let tables = Dictionary(calls.compactMap { args -> (String, (String, Int))? in
            guard let name = try? FullTextSearch.indexName(args[0]),
                  let index = indexes.first(where: { $0.name == name }) else { return nil }
            return (name, (index.table, index.spec.expressions.count))
        }, uniquingKeysWith: { a, _ in a })
        evaluator.fullTextDetails = { key, rowid, detail in
            guard let (table, columns) = tables[key.index] else { return nil }
            return try database.read { db in
                try Executor.fullTextDetail(db, table: table, columns: columns, key: key, rowid: rowid, detail: detail)
            }
        }
    }

    /// A matched row's snippet (FTS5's `snippet()`), or its match ranges: for each term of the query on its own,
    /// FTS5's `highlight()` with private markers, whose positions give the UTF-8 offsets in the original text.
    static func fullTextDetail(_ db: Connection, table: String, columns: Int, key: FullTextSearch.Key, rowid: Int64,
                               detail: FullTextSearch.Detail) throws -> JSON? {
        switch detail {
        case .snippet(let start, let end, let tokens):
            return try FullTextDetails.snippet(db, table: table, query: key.query, rowid: rowid, start: start, end: end,
                                               tokens: tokens).map(JSON.string)
        case .matches:
            return .array(try FullTextDetails.matches(db, table: table, columns: columns, query: key.query, rowid: rowid).map { m in
                ["term": .int(Int64(m.term)), "column": .int(Int64(m.column)), "offset": .int(Int64(m.offset)),
                 "length": .int(Int64(m.length))]
            })
        }
    }

    /// How a joined source is read for each left row.
    enum JoinStrategy {
        case idLookup(SQLExpression)
        case indexLookup(IndexInfo, SQLExpression)
        case scan
    }

    private func joinStrategy(_ join: CompiledQuery.Join) throws -> JoinStrategy {
        guard let primary = query.primary, let on = join.clause.on, join.clause.kind != .cross else { return .scan }
        let name = join.source.name
        let indexes = try indexManager().indexes(of: join.source.collection)
        for term in Planner.conjuncts(on) {
            guard case .binary(.equal, let a, let b) = term else { continue }
            for (mine, other) in [(a, b), (b, a)] {
                guard let rel = Planner.relative(mine, to: name, primary: primary.name, aliases: query.aliases),
                      !Planner.sources(of: other, primary: primary.name, aliases: query.aliases).contains(name)
                else { continue }
                if rel == .meta(source: nil, field: .id) { return .idLookup(other) }
                if let index = indexes.first(where: { $0.spec.whereClause == nil && $0.spec.expressions.first == rel }) {
                    return .indexLookup(index, other)
                }
            }
        }
        return .scan
    }

    // MARK: Running

    func run() throws -> ResultSet {
        let manager = try indexManager()
        let path = try primaryPath()
        var strategies: [JoinStrategy] = []
        for join in query.joins { strategies.append(try joinStrategy(join)) }
        // Bring the indexes this query reads up to date with the change feed first.
        if let path, let index = path.index, index.spec.kind != .vector, let primary = query.primary {
            try manager.catchUp(index, collection: primary.collection)
        }
        if let mango = path?.mango, let primary = query.primary { try mango.index.catchUp(in: primary.collection) }
        for (join, strategy) in zip(query.joins, strategies) {
            if case .indexLookup(let index, _) = strategy { try manager.catchUp(index, collection: join.source.collection) }
        }

        let limit = try evaluateCount(query.statement.limit, "LIMIT")
        let offset = try evaluateCount(query.statement.offset, "OFFSET") ?? 0
        let streaming = !query.isAggregate && query.ordering.isEmpty && !query.statement.distinct
        let wanted = limit.map { $0 + offset }

        var rows: [Row] = []
        // Results built straight from a covering array index (see below), when every column allows it.
        var direct: [QueryResult]?
        try database.read { db in
            var scanCache: [Int: [SourceDocument]] = [:]
            func accept(_ row: Row, decided: Bool = false) throws -> Bool {
                if !decided { for term in query.otherTerms where try !evaluator.isTrue(term, in: row) { return true } }
                rows.append(row)
                if streaming, let wanted, rows.count >= wanted { return false }
                return true
            }
            /// UNNEST: one row per element of the array, the element bound to the alias (no row for a non-array).
            func unnest(_ row: Row, from k: Int) throws -> Bool {
                if k == query.unnestCount { return try accept(row) }
                let clause = query.statement.unnests[k]
                guard case .array(let elements)? = try evaluator.evaluate(clause.expression, in: row) else { return true }
                guard !elements.isEmpty else { return true }
                let owner = row.primary
                // One row value whose last source is rebound to each element in turn (a stored row keeps its copy).
                var extended = row
                extended.others.append((clause.alias, nil))
                let slot = extended.others.count - 1
                for element in elements {
                    extended.others[slot].document = SourceDocument(id: owner?.id ?? "", sequence: owner?.sequence ?? 0,
                                                                    revisionID: owner?.revisionID ?? "", body: element,
                                                                    rowid: owner?.rowid ?? 0)
                    if try !unnest(extended, from: k + 1) { return false }
                }
                return true
            }
            var deadline = DeadlineCheck()
            func expand(_ row: Row, from joinIndex: Int) throws -> Bool {
                if joinIndex == query.joins.count { return try unnest(row, from: 0) }
                let join = query.joins[joinIndex]
                let candidates: [SourceDocument]
                switch strategies[joinIndex] {
                case .idLookup(let e):
                    if case .string(let id)? = try evaluator.evaluate(e, in: row) {
                        candidates = try fetch(db, sql: "SELECT \(Planner.documentColumns) FROM \(join.source.collection.docsTable) AS d WHERE d.id = ? AND \(DocumentTable.live("d"))",
                                               bind: [.text(id)], keys: query.bodyKeys[join.source.name] ?? nil)
                    } else {
                        candidates = []
                    }
                case .indexLookup(let index, let e):
                    if let key = KeyEncoding.encode(try evaluator.evaluate(e, in: row)) {
                        candidates = try fetch(db, sql: "SELECT \(Planner.documentColumns) FROM \(index.table) AS i CROSS JOIN \(join.source.collection.docsTable) AS d ON d.rowid = i.doc WHERE i.k0 = ? AND \(DocumentTable.live("d"))",
                                               bind: [.blob(key)], keys: query.bodyKeys[join.source.name] ?? nil)
                    } else {
                        candidates = []
                    }
                case .scan:
                    if let cached = scanCache[joinIndex] {
                        candidates = cached
                    } else {
                        let all = try fetch(db, sql: "SELECT \(Planner.documentColumns) FROM \(join.source.collection.docsTable) AS d WHERE \(DocumentTable.live("d"))", bind: [],
                                            keys: query.bodyKeys[join.source.name] ?? nil)
                        scanCache[joinIndex] = all
                        candidates = all
                    }
                }
                var matched = false
                for candidate in candidates {
                    try deadline.tick()
                    var extended = row
                    extended.others.append((join.source.name, candidate))
                    if let on = join.clause.on, try !evaluator.isTrue(on, in: extended) { continue }
                    matched = true
                    if try !expand(extended, from: joinIndex + 1) { return false }
                }
                if !matched && join.clause.kind == .leftOuter {
                    var extended = row
                    extended.others.append((join.source.name, nil))
                    return try expand(extended, from: joinIndex + 1)
                }
                return true
            }

            guard let primary = query.primary, let path else {
                // No FROM: one row with no documents.
                var row = Row(primaryName: "", primary: nil)
                row.group = nil
                if try query.primaryTerms.allSatisfy({ try evaluator.isTrue($0, in: row) }) { _ = try accept(row) }
                return
            }
            // A MATCH conjunct: the full-text index already answered it (prepareFullText); read the matched documents
            // by row — in rank order when the query orders by RANK, stopping once LIMIT is reached.
            if let (candidates, servedTerm, ranked) = try fullTextCandidates(path) ?? vectorSearchCandidates() {
                let live = query.includeDeleted ? "" : " AND \(DocumentTable.live("d"))"
                let fetch = try db.prepare("SELECT \(Planner.documentColumns) FROM \(primary.collection.docsTable) AS d WHERE d.rowid = ?\(live)")
                let remaining = query.primaryTerms.enumerated().filter { $0.offset != servedTerm }.map(\.element)
                let keys = query.bodyKeys[primary.name] ?? nil
                for rowid in candidates {
                    if ranked, let wanted, rows.count >= wanted { break }
                    fetch.bind(rowid, at: 1)
                    defer { fetch.reset() }
                    guard try fetch.step(), let document = Executor.document(fetch, keys: keys, revision: query.readsRevision,
                                                                             expirations: expirations) else { continue }
                    let row = Row(primaryName: primary.name, primary: document)
                    var keep = true
                    for term in remaining where try !evaluator.isTrue(term, in: row) { keep = false; break }
                    if keep, try !expand(row, from: 0) { break }
                }
                return
            }
            let stmt = try db.prepare(path.sql)
            defer { stmt.reset() }
            let exact = try bind(path, to: stmt)
            // Conjuncts the index decided exactly are not evaluated again. (An array index serves conjuncts on the
            // UNNEST alias: its served positions are in `otherTerms`, and every primary conjunct is still evaluated.)
            let servesPrimaryTerms = path.index?.spec.kind != .array
            let remaining = exact && servesPrimaryTerms && !path.servedTerms.isEmpty
                ? query.primaryTerms.enumerated().filter { !path.servedTerms.contains($0.offset) }.map(\.element)
                : query.primaryTerms
            if path.coveringUnnest, let alias = query.statement.unnests.first?.alias {
                // Rows straight from the array index: the element is column 5; the index decided the WHERE exactly
                // when every bound value was present (else the terms are evaluated as usual).
                let decided = exact && path.servedTerms.count == query.otherTerms.count
                if decided, streaming, let columns = coveringColumns(alias: alias, primary: primary.name) {
                    // Every column is META().id or the element: no rows, no evaluator — each index row is a result.
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
                    direct = out
                    return
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
                    if try !accept(row, decided: decided) { break }
                }
                return
            }
            // Members only the conjuncts the index decided would read are not extracted from each body.
            let keys = remaining.count < query.primaryTerms.count ? query.primaryBodyKeys(evaluating: remaining)
                : query.bodyKeys[primary.name] ?? nil
            var seen = Set<Int64>()
            while try stmt.step() {
                if path.distinctDocuments && !seen.insert(stmt.int64(0)).inserted { continue }
                guard let document = Executor.document(stmt, keys: keys, revision: query.readsRevision,
                                                       expirations: expirations) else { continue }
                let row = Row(primaryName: primary.name, primary: document)
                var keep = true
                for term in remaining where try !evaluator.isTrue(term, in: row) { keep = false; break }
                if !keep { continue }
                if try !expand(row, from: 0) { break }
            }
        }
        if let direct { return ResultSet(columns: query.columns.map(\.name), rows: direct) }
        return ResultSet(columns: query.columns.map(\.name), rows: try finish(rows, limit: limit, offset: offset))
    }

    /// The documents a full-text access path's MATCH conjunct matched (from the MATCH already run), with that
    /// conjunct's position and whether they are in the query's final order: by rank for `ORDER BY RANK(i) [DESC]`
    /// without joins, UNNEST, grouping or DISTINCT (then reading can stop at LIMIT), else by row.
    private func fullTextCandidates(_ path: AccessPath) throws -> ([Int64], Int, Bool)? {
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
    private func vectorSearchCandidates() -> ([Int64], Int, Bool)? {
        guard let candidates = vectorCandidates, let plan = query.vectorPlan else { return nil }
        let ranked = plan.orderedByDriver && query.ordering.count == 1 && !query.isAggregate && !query.statement.distinct
            && query.joins.isEmpty && query.unnestCount == 0
        return (candidates, -1, ranked)
    }

    /// Grouping, HAVING, ordering, DISTINCT, OFFSET/LIMIT and projection.
    private func finish(_ input: [Row], limit: Int?, offset: Int) throws -> [QueryResult] {
        let names = query.columns.map(\.name)
        if !query.isAggregate && query.ordering.isEmpty && !query.statement.distinct {
            // Rows are already in their final order: project only the ones kept.
            let kept = input.dropFirst(offset).prefix(limit ?? Int.max)
            var out: [QueryResult] = []
            out.reserveCapacity(kept.count)
            for row in kept { out.append(QueryResult(keys: names, values: try project(row), database: database)) }
            return out
        }
        var rows = input
        if query.isAggregate {
            rows = try group(rows)
            if let having = query.statement.having {
                rows = try rows.filter { try evaluator.isTrue(having, in: $0) }
            }
        }
        var projected: [(values: [JSON?], keys: [JSON?])] = []
        projected.reserveCapacity(rows.count)
        for row in rows {
            let values = try project(row)
            var keys: [JSON?] = []
            for order in query.ordering {
                if let column = order.column { keys.append(values[column]) }
                else if let e = order.expression { keys.append(try evaluator.evaluate(e, in: row)) }
            }
            projected.append((values, keys))
        }
        if !query.ordering.isEmpty {
            let descending = query.ordering.map(\.descending)
            // `ORDER BY e COLLATE …` orders strings by that collation.
            let collations = query.ordering.map { order -> StringCollation? in
                guard case .collate(_, let collation)? = order.expression else { return nil }
                return collation
            }
            projected = projected.enumerated().sorted { a, b in
                for (i, desc) in descending.enumerated() {
                    let c = evaluator.compareKeys(a.element.keys[i], b.element.keys[i], collation: collations[i])
                    if c != 0 { return desc ? c > 0 : c < 0 }
                }
                return a.offset < b.offset
            }.map(\.element)
        }
        var results = projected.map(\.values)
        if query.statement.distinct {
            var seen = Set<[UInt8]>()
            results = results.filter { values in
                var key: [UInt8] = []
                for v in values { key.append(contentsOf: KeyEncoding.encode(v) ?? [0]); key.append(0xFE) }
                return seen.insert(key).inserted
            }
        }
        if offset > 0 { results = Array(results.dropFirst(offset)) }
        if let limit, results.count > limit { results = Array(results.prefix(limit)) }
        let database = self.database
        return results.map { QueryResult(keys: names, values: $0, database: database) }
    }

    private func group(_ rows: [Row]) throws -> [Row] {
        let groupBy = query.statement.groupBy
        if groupBy.isEmpty {
            // An aggregate over every row: exactly one result row, even for no input.
            var row = rows.first ?? Row(primaryName: query.primary?.name ?? "", primary: nil)
            row.group = rows
            return [row]
        }
        var order: [[UInt8]] = []
        var groups: [[UInt8]: (keys: [JSON?], rows: [Row])] = [:]
        for row in rows {
            var keys: [JSON?] = []
            var encoded: [UInt8] = []
            for e in groupBy {
                let v = try evaluator.evaluate(e, in: row)
                keys.append(v)
                encoded.append(contentsOf: KeyEncoding.encode(v) ?? [0])
                encoded.append(0xFE)
            }
            if groups[encoded] == nil {
                order.append(encoded)
                groups[encoded] = (keys, [row])
            } else {
                groups[encoded]!.rows.append(row)
            }
        }
        // Groups come out in group-key order, as SQLite's GROUP BY does.
        let sorted = order.sorted { a, b in
            let ka = groups[a]!.keys, kb = groups[b]!.keys
            for (x, y) in zip(ka, kb) {
                let c = ValueCollation.compare(x, y)
                if c != 0 { return c < 0 }
            }
            return false
        }
        return sorted.map { key in
            let g = groups[key]!
            var row = g.rows[0]
            row.group = g.rows
            return row
        }
    }

    /// What a covering array-index read can produce without a row: `META().id` of the FROM source, or the UNNEST
    /// element itself (`alias`). Nil when any column needs more.
    private enum CoveringColumn { case id, element }

    private func coveringColumns(alias: String, primary: String) -> [CoveringColumn]? {
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

    private func project(_ row: Row) throws -> [JSON?] {
        var out: [JSON?] = []
        out.reserveCapacity(query.columns.count)
        for column in query.columns {
            switch column.kind {
            case .all(let source):
                out.append(row.source(named: source).document?.body)
            case .expression(let e):
                out.append(try evaluator.evaluate(e, in: row))
            }
        }
        return out
    }

    func evaluateCount(_ e: SQLExpression?, _ clause: String) throws -> Int? {
        guard let e else { return nil }
        guard let v = try evaluator.evaluate(e, in: Row(primaryName: "", primary: nil)) else { return nil }
        guard let n = v.doubleValue, n >= 0, n.rounded() == n else {
            throw SetteeError(.queryParseError, "\(clause) must be a non-negative integer, got \(v)")
        }
        return Int(min(n, Double(Int.max / 2)))
    }

    // MARK: SQLite

    /// Binds the access path's values; returns whether every one was present and not null (which makes the
    /// path's served terms exact).
    @discardableResult
    private func bind(_ path: AccessPath, to stmt: Statement) throws -> Bool {
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

    private func fetch(_ db: Connection, sql: String, bind values: [SQLiteValue], keys: JSONMemberSelector?) throws -> [SourceDocument] {
        let stmt = try db.prepare(sql)
        defer { stmt.reset() }
        stmt.bind(values)
        var out: [SourceDocument] = []
        while try stmt.step() {
            if let d = Executor.document(stmt, keys: keys, revision: query.readsRevision) { out.append(d) }
        }
        return out
    }

    /// A document from a `rowid, id, seq, rev, flags, body` row, reading only `keys` of the body (nil: all of it).
    static func document(_ stmt: Statement, keys: JSONMemberSelector?, revision: Bool = true,
                         expirations: [String: Int64]? = nil) -> SourceDocument? {
        let body: JSON
        do {
            body = try stmt.withTextBytes(DocumentRowColumn.body) { bytes in
                if bytes.isEmpty { return JSON.object(JSONObject()) }
                if let keys { return try keys.parse(bytes) }
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

    // MARK: Explain

    func explain() throws -> String {
        var lines: [String] = ["Query: \(query.statement)"]
        func plan(_ sql: String) throws -> [String] {
            try database.read { db in
                let stmt = try db.prepareUncached("EXPLAIN QUERY PLAN " + sql)
                defer { stmt.reset() }
                var out: [String] = []
                while try stmt.step() { out.append(stmt.string(3) ?? "") }
                return out
            }
        }
        if let primary = query.primary, let path = try primaryPath() {
            lines.append("From \(primary.name) (\(primary.collection.fullName)): \(path.summary)")
            lines.append("  SQL: \(path.sql)")
            for detail in try plan(path.sql) { lines.append("  \(detail)") }
        }
        for join in query.joins {
            let strategy = try joinStrategy(join)
            let table = join.source.collection.docsTable
            switch strategy {
            case .idLookup(let e):
                let sql = "SELECT \(Planner.documentColumns) FROM \(table) AS d WHERE d.id = ? AND \(DocumentTable.live("d"))"
                lines.append("\(join.clause.kind.rawValue) \(join.source.name) (\(join.source.collection.fullName)): document id lookup by \(e)")
                lines.append("  SQL: \(sql)")
                for detail in try plan(sql) { lines.append("  \(detail)") }
            case .indexLookup(let index, let e):
                let sql = "SELECT \(Planner.documentColumns) FROM \(index.table) AS i CROSS JOIN \(table) AS d ON d.rowid = i.doc WHERE i.k0 = ? AND \(DocumentTable.live("d"))"
                lines.append("\(join.clause.kind.rawValue) \(join.source.name) (\(join.source.collection.fullName)): value index \(index.name) by \(e)")
                lines.append("  SQL: \(sql)")
                for detail in try plan(sql) { lines.append("  \(detail)") }
            case .scan:
                let sql = "SELECT \(Planner.documentColumns) FROM \(table) AS d WHERE \(DocumentTable.live("d"))"
                lines.append("\(join.clause.kind.rawValue) \(join.source.name) (\(join.source.collection.fullName)): scan (read once)")
                lines.append("  SQL: \(sql)")
                for detail in try plan(sql) { lines.append("  \(detail)") }
            }
        }
        if query.isAggregate { lines.append("Group: \(query.statement.groupBy.isEmpty ? "all rows" : query.statement.groupBy.map(\.description).joined(separator: ", "))") }
        if let plan = query.vectorPlan, plan.hybrid {
            for (_, index) in plan.calls {
                lines.append("Vector: distances from vector index \(index.name) for the documents the WHERE keeps (exact over their stored codes)")
            }
        }
        if !query.ordering.isEmpty { lines.append("Order: \(query.statement.orderBy.map { $0.expression.description + ($0.descending ? " DESC" : "") }.joined(separator: ", "))") }
        return lines.joined(separator: "\n")
    }
}

/// The query timeout (``Database/withTimeout(_:_:)``) for work done in Swift between SQLite reads, such as a
/// nested-loop join over cached rows: checked every 4,096 steps.
struct DeadlineCheck {
    private var steps = 0

    mutating func tick() throws {
        steps &+= 1
        if steps & 4095 == 0, ReadDeadline.hasPassed { throw ReadDeadline.timeoutError() }
    }
}
