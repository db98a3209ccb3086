import SetteeCore
import SetteeIndex
import SetteeSQLPP
import SetteeStore
import SetteeVector

/// How a query uses `APPROX_VECTOR_DISTANCE`, decided at compile time.
///
/// - A **vector search** (no WHERE, or a WHERE of distance conditions only) needs a LIMIT: the IVF index returns the
///   `LIMIT + OFFSET` nearest documents over `nprobes` lists, and those are the only candidates.
/// - A **hybrid search** (other WHERE conditions, MATCH included) reads the documents the WHERE keeps through the usual
///   access path and takes each one's distance from the index's stored code, so its top-k is exact among them.
/// Either way a document the index holds no vector for is not a result.
struct VectorPlan {
    /// Every APPROX_VECTOR_DISTANCE call (arguments), each with the vector index serving it.
    let calls: [(args: [SQLExpression], index: IndexInfo)]
    /// The call whose nearest documents are the candidates of a vector search: the first ORDER BY item's, else the first.
    let driver: [SQLExpression]
    let hybrid: Bool
    /// The query orders by the driver's distance ascending first (so reading can stop at LIMIT).
    let orderedByDriver: Bool

    var driverIndex: IndexInfo { calls.first { $0.args == driver }!.index }

    /// Checks the seed's rules and resolves each call's index. Errors name the rule that was broken.
    static func make(statement: SelectStatement, primary: BoundSource?, aliases: Set<String>, indexes: IndexManager) throws -> VectorPlan? {
        var everything: [SQLExpression] = statement.whereClause.map { [$0] } ?? []
        everything += statement.orderBy.map(\.expression)
        everything += statement.results.compactMap { if case .expression(let e) = $0.kind { return e }; return nil }
        let calls = VectorSearch.calls(in: everything)
        guard !calls.isEmpty else {
            for e in statement.groupBy + (statement.having.map { [$0] } ?? []) + statement.joins.compactMap(\.on) where VectorSearch.uses(e) {
                throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE is only allowed in SELECT, WHERE and ORDER BY")
            }
            return nil
        }
        guard let primary else { throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE needs a FROM clause") }
        if VectorSearch.isUnderOr(statement.whereClause) {
            throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE cannot be used inside OR: combine it with the other WHERE conditions by AND")
        }
        for e in statement.groupBy + (statement.having.map { [$0] } ?? []) + statement.joins.compactMap(\.on) where VectorSearch.uses(e) {
            throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE is only allowed in SELECT, WHERE and ORDER BY")
        }
        let available = indexes.indexes(of: primary.collection)
        var resolved: [(args: [SQLExpression], index: IndexInfo)] = []
        for args in calls {
            resolved.append((args, try index(for: args, primary: primary, aliases: aliases, indexes: available)))
        }
        let terms = Planner.conjuncts(statement.whereClause)
        let hybrid = terms.contains { !VectorSearch.uses($0) }
        if !hybrid && statement.limit == nil {
            throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE needs a LIMIT unless the WHERE clause filters the documents (hybrid search): add LIMIT k to get the k nearest")
        }
        var driver = calls[0]
        var ordered = false
        if let first = statement.orderBy.first, case .function(VectorSearch.functionName, let args, _) = first.expression {
            driver = args
            ordered = !first.descending
        }
        return VectorPlan(calls: resolved, driver: driver, hybrid: hybrid, orderedByDriver: ordered)
    }

    /// The vector index of the FROM collection whose expression is the call's first argument, after checking the
    /// metric, nprobes and accurate arguments.
    static func index(for args: [SQLExpression], primary: BoundSource, aliases: Set<String>,
                      indexes: [IndexInfo]) throws -> IndexInfo {
        let expression = Planner.relative(args[0], to: primary.name, primary: primary.name, aliases: aliases) ?? args[0]
        let candidates = indexes.filter { $0.spec.kind == .vector && $0.spec.expressions.first == expression }
        guard !candidates.isEmpty else {
            throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE(\(args[0]), …): \(primary.collection.fullName) has no vector index on the expression \(expression) (the expression must be the index's exactly)")
        }
        var metric: DistanceMetric?
        if args.count > 2 {
            switch args[2] {
            case .literal(.null): break
            case .literal(.string(let name)):
                guard let m = DistanceMetric(name: name) else {
                    throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE: unknown metric '\(name)' (use EUCLIDEAN_SQUARED, L2_SQUARED, EUCLIDEAN, L2, COSINE or DOT)")
                }
                metric = m
            default:
                throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE: the metric must be a string literal, got \(args[2])")
            }
        }
        if args.count > 3 {
            switch args[3] {
            case .literal(.null), .parameter: break
            case .literal(let v) where (v.intValue ?? 0) > 0 && v.doubleValue == v.intValue.map(Double.init): break
            default:
                throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE: nprobes must be a positive integer, got \(args[3])")
            }
        }
        if args.count > 4 {
            switch args[4] {
            case .literal(.bool(false)), .literal(.null): break
            case .literal(.bool(true)):
                throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE: accurate = true is not supported (only the encoded vectors in the index are used for distances)")
            default:
                throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE: accurate must be false, got \(args[4])")
            }
        }
        guard let metric else { return candidates[0] }
        guard let index = candidates.first(where: { $0.spec.vector?.metric == metric }) else {
            let actual = candidates.compactMap { $0.spec.vector?.metric.sqlName }.joined(separator: ", ")
            throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE: the metric \(metric.sqlName) does not match the metric of the vector index \(candidates[0].name) (\(actual))")
        }
        return index
    }
}

/// A query-time handle on one call: the index, the query vector and the probes.
struct VectorCall: Sendable {
    let index: IndexInfo
    let target: [Float]
    let nprobes: Int
}

extension Executor {
    /// Resolves each APPROX_VECTOR_DISTANCE call (index caught up, target vector checked), runs the driving call's
    /// nearest-neighbour search for a non-hybrid query, and gives the evaluator the distances.
    mutating func prepareVectorSearch() throws {
        guard let plan = query.vectorPlan, let primary = query.primary else { return }
        let manager = query.indexes
        let current = manager.indexes(of: primary.collection)
        var calls: [[SQLExpression]: VectorCall] = [:]
        let origin = Row(primaryName: "", primary: nil)
        for (args, compiled) in plan.calls {
            // The index the query was compiled with, or (if it was dropped and re-created since) the one serving the
            // call now.
            let index = try current.first(where: { $0.id == compiled.id })
                ?? VectorPlan.index(for: args, primary: primary, aliases: query.aliases, indexes: current)
            guard let options = index.spec.vector else {
                throw SetteeError(.internalError, "APPROX_VECTOR_DISTANCE: \(index.name) is not a vector index")
            }
            let value = try evaluator.evaluate(args[1], in: origin)
            guard let target = VectorSearch.floats(value) else {
                throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE: the target vector must be an array of numbers, got \(value.map { $0.typeName } ?? "MISSING")")
            }
            guard target.count == options.dimensions else {
                throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE: the target vector has \(target.count) dimensions, the vector index \(index.name) has \(options.dimensions)")
            }
            var nprobes = options.effectiveProbes
            if args.count > 3, let v = try evaluator.evaluate(args[3], in: origin), !v.isNull {
                guard let n = v.intValue, n > 0, v.doubleValue == Double(n) else {
                    throw SetteeError(.queryParseError, "APPROX_VECTOR_DISTANCE: nprobes must be a positive integer, got \(v)")
                }
                nprobes = Int(clamping: n)
            }
            try manager.catchUp(index, collection: primary.collection)
            calls[args] = VectorCall(index: index, target: target, nprobes: nprobes)
        }
        var nearest: [Int64: Double] = [:]
        if !plan.hybrid, let driver = calls[plan.driver] {
            let k = (try evaluateCount(query.statement.limit, "LIMIT") ?? 0) + (try evaluateCount(query.statement.offset, "OFFSET") ?? 0)
            let matches = k == 0 ? [] : try manager.withVectorIndex(driver.index) { ivf in
                try driver.target.withUnsafeBufferPointer { q throws(VectorError) in
                    try ivf.search(q, k: k, nprobes: driver.nprobes)
                }
            }
            vectorCandidates = matches.map(\.id)
            for m in matches { nearest[m.id] = Double(m.distance) }
        }
        let driverArgs = plan.driver
        let precomputed = nearest
        let frozen = calls
        evaluator.vectorDistance = { args, rowid in
            if args == driverArgs, let d = precomputed[rowid] { return d }
            guard let call = frozen[args] else { return nil }
            let distance = try manager.withVectorIndex(call.index) { ivf in
                try call.target.withUnsafeBufferPointer { q throws(VectorError) in try ivf.distance(q, to: rowid) }
            }
            return distance.map(Double.init)
        }
    }
}
