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
    var expirations: [String: Int64]?

    init(query: CompiledQuery, parameters: [String: JSON]) throws {
        self.query = query
        self.evaluator = Evaluator(parameters: parameters)
        self.evaluator.predictor = Database.prediction.predictor
        self.evaluator.stringCollator = QueryStringCollation.compare
        if query.readsExpiration, let primary = query.primary { expirations = try primary.collection.expirations() }
    }

    var database: Database { query.database }

    // MARK: Planning

    private func primaryPath() throws -> AccessPath? {
        var generation = PlanCache.Generation(indexes: query.indexes.generation, mango: 0)
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
        let indexes = query.indexes.indexes(of: primary.collection)
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
        let manager = query.indexes
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

    // MARK: Running

    func run() throws -> ResultSet {
        let path = try primaryPath()
        let strategies = try query.joins.map(joinStrategy)
        try catchUp(path, joins: strategies)

        let limit = try evaluateCount(query.statement.limit, "LIMIT")
        let offset = try evaluateCount(query.statement.offset, "OFFSET") ?? 0
        // Rows come out in their final order: reading stops once LIMIT + OFFSET of them passed.
        let streaming = !query.isAggregate && query.ordering.isEmpty && !query.statement.distinct
        let wanted = limit.map { $0 + offset }

        var rows: [Row] = []
        // Results built straight from a covering array index, when every column allows it.
        var direct: [QueryResult]?
        try database.read { db in
            var pipeline = RowPipeline(query: query, evaluator: evaluator, db: db, joins: strategies,
                                       stopAt: streaming ? wanted : nil)
            if let primary = query.primary, let path {
                if let (candidates, servedTerm, ranked) = try fullTextCandidates(path) ?? vectorSearchCandidates() {
                    try readRows(candidates, of: primary, servedTerm: servedTerm, upTo: ranked ? wanted : nil,
                                 into: &pipeline)
                } else if path.coveringUnnest, let alias = query.statement.unnests.first?.alias {
                    direct = try readCoveringArrayIndex(path, alias: alias, of: primary, db: db,
                                                        directLimit: streaming ? (limit, offset) : nil, into: &pipeline)
                } else {
                    try read(path, of: primary, db: db, into: &pipeline)
                }
            } else {
                // No FROM: one row with no documents.
                var row = Row(primaryName: "", primary: nil)
                row.group = nil
                if try query.primaryTerms.allSatisfy({ try evaluator.isTrue($0, in: row) }) { _ = try pipeline.filter(row) }
            }
            rows = pipeline.rows
        }
        if let direct { return ResultSet(columns: query.columns.map(\.name), rows: direct) }
        return ResultSet(columns: query.columns.map(\.name), rows: try finish(rows, limit: limit, offset: offset))
    }

    /// Brings the indexes this query reads up to date with the change feed first.
    private func catchUp(_ path: AccessPath?, joins strategies: [JoinStrategy]) throws {
        let manager = query.indexes
        if let path, let index = path.index, index.spec.kind != .vector, let primary = query.primary {
            try manager.catchUp(index, collection: primary.collection)
        }
        if let mango = path?.mango, let primary = query.primary { try mango.index.catchUp(in: primary.collection) }
        for (join, strategy) in zip(query.joins, strategies) {
            if case .indexLookup(let index, _) = strategy { try manager.catchUp(index, collection: join.source.collection) }
        }
    }

    /// Grouping, HAVING, ordering, DISTINCT, OFFSET/LIMIT and projection.
    private func finish(_ input: [Row], limit: Int?, offset: Int) throws -> [QueryResult] {
        let names = query.columns.map(\.name)
        if !query.isAggregate && query.ordering.isEmpty && !query.statement.distinct {
            // Rows are already in their final order: project only the ones kept.
            let kept = input.indices.dropFirst(offset).prefix(limit ?? Int.max)
            var out: [QueryResult] = []
            out.reserveCapacity(kept.count)
            // (By index: each row is borrowed from the array, not copied out of it.)
            for i in kept { out.append(QueryResult(keys: names, values: try project(input[i]), database: database)) }
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
            let sql = strategy.sql(join)
            lines.append("\(join.clause.kind.rawValue) \(join.source.name) (\(join.source.collection.fullName)): \(strategy.summary)")
            lines.append("  SQL: \(sql)")
            for detail in try plan(sql) { lines.append("  \(detail)") }
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
