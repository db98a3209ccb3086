/// Why a vector-index operation failed.
///
/// Every throwing API in `SetteeVector` throws this type (typed throws), so callers can switch over it exhaustively.
package enum VectorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The index or quantizer configuration is not allowed; the string names the offending setting.
    case invalidConfiguration(String)
    /// A vector (or a buffer of vectors) whose length does not match the index's dimensions.
    case dimensionMismatch(expected: Int, got: Int)
    /// Training was given fewer vectors than it needs (at least one per centroid).
    case notEnoughTrainingData(needed: Int, got: Int)
    /// Persisted bytes (parameters, or a restored code) that are truncated, corrupt or of another version.
    case corruptParameters(String)

    /// A sentence a person can act on.
    public var description: String {
        switch self {
        case .invalidConfiguration(let reason):
            return "Invalid vector index configuration: \(reason)."
        case .dimensionMismatch(let expected, let got):
            return "Vector has \(got) dimensions but the index expects \(expected)."
        case .notEnoughTrainingData(let needed, let got):
            return "Vector index training needs at least \(needed) vectors but was given \(got)."
        case .corruptParameters(let reason):
            return "Vector index data is corrupt: \(reason)."
        }
    }
}
