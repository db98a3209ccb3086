import SetteeCore

/// The output of a predictive model in a query (Couchbase Lite's `PredictionFunction`): the whole output object,
/// or one of its members with ``property(_:)``.
///
/// ```swift
/// let input = Expression.dictionary(["photo": Expression.property("photo")])
/// let prediction = Function.prediction(model: "ImageClassifier", input: input)
/// QueryBuilder.select(SelectResult.all()).from(DataSource.collection(collection))
///     .where(prediction.property("label").equalTo(Expression.string("car")))
/// ```
public struct PredictionExpression: ExpressionProtocol, SQLTreeExpression {
    package let tree: SQLExpression

    /// The member at `path` (`"label"`, `"scores.car"`) of the model's output.
    public func property(_ path: String) -> any ExpressionProtocol {
        BuiltExpression(.path(sqlExpression, PathParser.components(path)))
    }
}

extension Function {
    /// `PREDICTION(model, input)`: runs the model registered under `model` (``Database/prediction``) on `input`, an
    /// object expression. A model that returns nil makes the value MISSING.
    public static func prediction(model: String, input: any ExpressionProtocol) -> PredictionExpression {
        PredictionExpression(tree: .function(
            PredictionFunction.functionName, [.property(source: nil, path: [.key(model)]), input.sqlExpression],
            distinct: false))
    }
}

extension Function {
    /// `EUCLIDEAN_DISTANCE(a, b)`: the distance between two vectors (arrays of numbers of one length).
    public static func euclideanDistance(between a: any ExpressionProtocol, and b: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.function("EUCLIDEAN_DISTANCE", [a.sqlExpression, b.sqlExpression], distinct: false))
    }

    /// `SQUARED_EUCLIDEAN_DISTANCE(a, b)`: the squared distance between two vectors.
    public static func squaredEuclideanDistance(between a: any ExpressionProtocol,
                                                and b: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.function("SQUARED_EUCLIDEAN_DISTANCE", [a.sqlExpression, b.sqlExpression], distinct: false))
    }

    /// `COSINE_DISTANCE(a, b)`: 1 − the cosine similarity of two vectors.
    public static func cosineDistance(between a: any ExpressionProtocol, and b: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.function("COSINE_DISTANCE", [a.sqlExpression, b.sqlExpression], distinct: false))
    }
}

/// Vector-search functions (Couchbase Lite's `VectorFunction`).
///
/// ```swift
/// QueryBuilder.select(SelectResult.expression(Meta.id))
///     .from(DataSource.collection(colors))
///     .orderBy(Ordering.expression(VectorFunction.approxVectorDistance(
///         Expression.property("vector"), Expression.parameter("vector"))))
///     .limit(Expression.int(8))
/// ```
public enum VectorFunction {
    /// `APPROX_VECTOR_DISTANCE(vector, target[, metric][, nprobes])`: the distance from the document's indexed vector
    /// to `target`, from the vector index whose expression is `vector`. `metric` (`"EUCLIDEAN_SQUARED"`, `"L2"`,
    /// `"COSINE"`, `"DOT"`, …) must be the index's; `numProbes` overrides the index's number of probes.
    public static func approxVectorDistance(_ vector: any ExpressionProtocol, _ target: any ExpressionProtocol,
                                            metric: String? = nil, numProbes: Int? = nil) -> any ExpressionProtocol {
        var args = [vector.sqlExpression, target.sqlExpression]
        if metric != nil || numProbes != nil { args.append(metric.map { .literal(.string($0)) } ?? .literal(.null)) }
        if let numProbes { args.append(.literal(.int(Int64(numProbes)))) }
        return BuiltExpression(.function(VectorSearch.functionName, args, distinct: false))
    }
}
