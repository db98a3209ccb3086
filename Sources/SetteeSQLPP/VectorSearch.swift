package import SetteeCore

/// `APPROX_VECTOR_DISTANCE(vector-expr, target[, metric][, nprobes][, accurate])`: the vector-search function.
///
/// Like MATCH, the evaluator stays pure: the executor resolves each call to the vector index whose expression is
/// `vector-expr`, searches it (or scores the rows a hybrid query's WHERE kept) and hands the evaluator a
/// ``DistanceProvider``. A row whose document the index does not hold has no distance (MISSING).
package enum VectorSearch {
    /// The function's upper-case name.
    package static let functionName = "APPROX_VECTOR_DISTANCE"

    static let arity: [String: ClosedRange<Int>] = [functionName: 2...5]

    /// Gives the distance of a row's document for one APPROX_VECTOR_DISTANCE call (its argument list), or nil
    /// (MISSING) when the vector index holds no vector for it.
    package typealias DistanceProvider = @Sendable (_ call: [SQLExpression], _ rowid: Int64) throws -> Double?

    /// Every APPROX_VECTOR_DISTANCE call (its arguments) in the expressions, each once, in order of appearance.
    package static func calls(in expressions: [SQLExpression]) -> [[SQLExpression]] {
        var out: [[SQLExpression]] = []
        for e in expressions {
            e.visit { node in
                if case .function(functionName, let args, _) = node, !out.contains(args) { out.append(args) }
            }
        }
        return out
    }

    /// Whether `e` uses APPROX_VECTOR_DISTANCE anywhere.
    package static func uses(_ e: SQLExpression) -> Bool {
        var found = false
        e.visit { node in if case .function(functionName, _, _) = node { found = true } }
        return found
    }

    /// Whether an APPROX_VECTOR_DISTANCE call sits under an OR (which vector search, like Couchbase Lite, rejects).
    package static func isUnderOr(_ e: SQLExpression?) -> Bool {
        guard let e else { return false }
        var found = false
        e.visit { node in
            if case .binary(.or, let a, let b) = node, uses(a) || uses(b) { found = true }
        }
        return found
    }

    /// A JSON array of numbers as floats (the vector a document or a parameter holds), or nil when it is not one.
    package static func floats(_ value: JSON?) -> [Float]? {
        guard case .array(let items)? = value, !items.isEmpty else { return nil }
        var out: [Float] = []
        out.reserveCapacity(items.count)
        for item in items {
            switch item {
            case .int(let i): out.append(Float(i))
            case .double(let d) where Float(d).isFinite: out.append(Float(d))  // beyond Float's range: not a vector
            default: return nil
            }
        }
        return out
    }
}

/// `PREDICTION(model, input[, property])`: calls a registered predictive model.
///
/// The registry of models lives above the pure layer (`Database.prediction`); the evaluator calls the
/// ``Predictor`` the executor or the index manager gives it. A model that returns nothing makes the call MISSING.
package enum PredictionFunction {
    /// The function's upper-case name.
    package static let functionName = "PREDICTION"

    static let arity: [String: ClosedRange<Int>] = [functionName: 2...3]

    /// Runs the model named `model` on `input` (an object); nil is MISSING.
    package typealias Predictor = @Sendable (_ model: String, _ input: JSON) throws(SetteeError) -> JSON?

    /// The model a PREDICTION call names: an identifier (`PREDICTION(ColorModel, …)`) or a string.
    package static func modelName(_ e: SQLExpression) throws(SetteeError) -> String {
        guard let name = e.nameArgument else {
            throw SetteeError(.queryParseError, "The first argument of PREDICTION must name a model, got \(e)")
        }
        return name
    }
}

extension SQLExpression {
    /// The name an argument gives when it names something (an index, a model): a bare identifier
    /// (`MATCH(descIndex, …)`, `PREDICTION(ColorModel, …)`) or a string; nil for anything else.
    package var nameArgument: String? {
        switch self {
        case .property(_, let path) where path.count == 1:
            if case .key(let name) = path[0] { return name }
            return nil
        case .property(let source?, let path) where path.isEmpty:
            return source
        case .literal(.string(let name)):
            return name
        default:
            return nil
        }
    }
}
