/// How a vector index measures the distance between two vectors (Couchbase Lite's `DistanceMetric`).
///
/// Smaller is nearer for every metric, so `ORDER BY APPROX_VECTOR_DISTANCE(…)` is ascending.
public enum DistanceMetric: UInt32, Sendable, Hashable, CaseIterable {
    /// Σ (aᵢ − bᵢ)², the default.
    case euclideanSquared = 1
    /// 1 − cosine similarity (0 for the same direction, 2 for opposite ones).
    case cosine = 2
    /// √Σ (aᵢ − bᵢ)².
    case euclidean = 3
    /// The negated dot product, −Σ aᵢbᵢ.
    case dot = 4

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

    /// The Swift case name (`euclideanSquared`, …), as the JSON index form writes it.
    public var name: String {
        switch self {
        case .euclideanSquared: "euclideanSquared"
        case .euclidean: "euclidean"
        case .cosine: "cosine"
        case .dot: "dot"
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
