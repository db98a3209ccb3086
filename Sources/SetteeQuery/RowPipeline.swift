import SetteeCore
import SetteeIndex
import SetteeSQLPP
import SetteeStore

/// The operators each row read from the FROM source passes through, in the order SQL++ applies them: the JOINs
/// (a nested loop per join, left to right), then the UNNESTs (one row per array element), then the filter (the
/// WHERE conjuncts no index decided), which collects the rows that remain.
///
/// Every operator returns whether more rows are wanted: false once a streaming query (no ordering, grouping or
/// DISTINCT) has LIMIT + OFFSET rows, so the source stops reading.
struct RowPipeline {
    let query: CompiledQuery
    let evaluator: Evaluator
    let db: Connection
    /// How each JOIN reads its documents, in `query.joins`' order.
    let joins: [Executor.JoinStrategy]
    /// Each JOIN's candidate SQL (``Executor/JoinStrategy/sql(_:)``), made once rather than per row.
    private let joinSQL: [String]
    /// Collecting stops at this many rows (LIMIT + OFFSET of a streaming query), or never (nil).
    let stopAt: Int?
    /// The rows that passed every operator, in the order they came.
    private(set) var rows: [Row] = []
    /// A scanned join source's documents, read once for the whole query.
    private var scanned: [Int: [SourceDocument]] = [:]
    private var deadline = DeadlineCheck()

    init(query: CompiledQuery, evaluator: Evaluator, db: Connection, joins: [Executor.JoinStrategy], stopAt: Int?) {
        self.query = query
        self.evaluator = evaluator
        self.db = db
        self.joins = joins
        self.joinSQL = zip(joins, query.joins).map { strategy, join in strategy.sql(join) }
        self.stopAt = stopAt
    }

    /// A row from the FROM source: through the joins, the UNNESTs and the filter.
    mutating func push(_ row: consuming Row) throws -> Bool {
        try join(row, from: 0)
    }

    // MARK: Operators

    /// JOIN `joinIndex` and those after it: for each document of the joined source that meets the ON clause, the
    /// row extended with it; a LEFT OUTER JOIN with none extends the row with a missing document.
    mutating func join(_ row: consuming Row, from joinIndex: Int) throws -> Bool {
        if joinIndex == query.joins.count { return try unnest(row, from: 0) }
        let join = query.joins[joinIndex]
        var matched = false
        for candidate in try candidates(joinIndex, for: row) {
            try deadline.tick()
            var extended = copy row
            extended.others.append((join.source.name, candidate))
            if let on = join.clause.on, try !evaluator.isTrue(on, in: extended) { continue }
            matched = true
            if try !self.join(extended, from: joinIndex + 1) { return false }
        }
        if !matched && join.clause.kind == .leftOuter {
            var extended = copy row
            extended.others.append((join.source.name, nil))
            return try self.join(extended, from: joinIndex + 1)
        }
        return true
    }

    /// UNNEST `k` and those after it: one row per element of the array, the element bound to the alias (no row
    /// for a non-array or an empty one).
    mutating func unnest(_ row: consuming Row, from k: Int) throws -> Bool {
        if k == query.unnestCount { return try filter(row) }
        let clause = query.statement.unnests[k]
        guard case .array(let elements)? = try evaluator.evaluate(clause.expression, in: row), !elements.isEmpty else {
            return true
        }
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

    /// The filter: keeps `row` when every conjunct the access path didn't decide holds (`decided`: the index
    /// decided them all).
    mutating func filter(_ row: consuming Row, decided: Bool = false) throws -> Bool {
        if !decided { for term in query.otherTerms where try !evaluator.isTrue(term, in: row) { return true } }
        rows.append(row)
        if let stopAt, rows.count >= stopAt { return false }
        return true
    }

    // MARK: Join sources

    /// The joined source's documents that may match `row`, read as the join's strategy says.
    private mutating func candidates(_ joinIndex: Int, for row: Row) throws -> [SourceDocument] {
        let join = query.joins[joinIndex]
        let strategy = joins[joinIndex]
        let keys = query.bodyKeys[join.source.name] ?? nil
        switch strategy {
        case .idLookup(let e):
            guard case .string(let id)? = try evaluator.evaluate(e, in: row) else { return [] }
            return try fetch(joinSQL[joinIndex], bind: [.text(id)], keys: keys)
        case .indexLookup(_, let e):
            guard let key = KeyEncoding.encode(try evaluator.evaluate(e, in: row)) else { return [] }
            return try fetch(joinSQL[joinIndex], bind: [.blob(key)], keys: keys)
        case .scan:
            if let cached = scanned[joinIndex] { return cached }
            let all = try fetch(joinSQL[joinIndex], bind: [], keys: keys)
            scanned[joinIndex] = all
            return all
        }
    }

    private func fetch(_ sql: String, bind values: [SQLiteValue], keys: JSONMemberSelector?) throws -> [SourceDocument] {
        try db.withStatement(sql, values) { stmt in
            var out: [SourceDocument] = []
            while try stmt.step() {
                if let d = Executor.document(stmt, keys: keys, revision: query.readsRevision) { out.append(d) }
            }
            return out
        }
    }
}
