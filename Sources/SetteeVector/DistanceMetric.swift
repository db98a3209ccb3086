/// How a vector index measures the distance between two vectors (Couchbase Lite's `DistanceMetric`).
///
/// Smaller is nearer for every metric, so `ORDER BY APPROX_VECTOR_DISTANCE(…)` is ascending.
public enum DistanceMetric: String, Sendable, Hashable, CaseIterable {
    /// Σ (aᵢ − bᵢ)², the default.
    case euclideanSquared
    /// √Σ (aᵢ − bᵢ)².
    case euclidean
    /// 1 − cosine similarity (0 for the same direction, 2 for opposite ones).
    case cosine
    /// The negated dot product, −Σ aᵢbᵢ.
    case dot

    /// The metric named by SQL++'s `APPROX_VECTOR_DISTANCE(…, metric)` or the JSON index form: `EUCLIDEAN_SQUARED`
    /// (`L2_SQUARED`), `EUCLIDEAN` (`L2`), `COSINE`, `DOT` — case-insensitive, also the Swift case names.
    public init?(name: String) {
        switch String(name.uppercased().map { $0 == "-" ? "_" : $0 }) {
        case "EUCLIDEAN_SQUARED", "EUCLIDEANSQUARED", "L2_SQUARED", "L2SQUARED": self = .euclideanSquared
        case "EUCLIDEAN", "L2": self = .euclidean
        case "COSINE": self = .cosine
        case "DOT": self = .dot
        default: return nil
        }
    }

    /// The SQL++ spelling (`EUCLIDEAN_SQUARED`, `EUCLIDEAN`, `COSINE`, `DOT`).
    public var sqlName: String {
        switch self {
        case .euclideanSquared: "EUCLIDEAN_SQUARED"
        case .euclidean: "EUCLIDEAN"
        case .cosine: "COSINE"
        case .dot: "DOT"
        }
    }
}
