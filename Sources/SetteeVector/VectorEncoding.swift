/// How an index stores each vector: raw floats, a scalar quantizer, or a product quantizer
/// (Couchbase Lite's `VectorEncoding`).
public enum VectorEncoding: Sendable, Hashable {
    /// Raw 32-bit floats, 4 bytes per dimension: exact distances, the most memory.
    case none
    /// A scalar quantizer with `bits` (4, 6 or 8) per dimension; see ``ScalarQuantizer``.
    case scalarQuantizer(bits: Int)
    /// A product quantizer: `subquantizers` subspaces (dividing the dimensions) of `2^bits` centroids each
    /// (`bits` in 4...12; Couchbase Lite's default is 8); see ``ProductQuantizer``.
    case productQuantizer(subquantizers: Int, bits: Int)

    /// The scalar-quantizer bit widths ``scalarQuantizer(bits:)`` accepts.
    public static let scalarQuantizerBits: Set<Int> = [4, 6, 8]
    /// The product-quantizer bit widths ``productQuantizer(subquantizers:bits:)`` accepts.
    public static let productQuantizerBits: ClosedRange<Int> = 4...12

    /// Checks this encoding against a vector length.
    ///
    /// Throws ``VectorError/invalidConfiguration(_:)`` when `dimensions < 1`, a scalar quantizer's bits are not
    /// 4, 6 or 8, or a product quantizer's bits are outside 4...12 or its subquantizer count does not divide
    /// `dimensions`.
    package func validate(dimensions: Int) throws(VectorError) {
        guard dimensions >= 1 else {
            throw .invalidConfiguration("dimensions must be at least 1, not \(dimensions)")
        }
        switch self {
        case .none:
            return
        case .scalarQuantizer(let bits):
            guard Self.scalarQuantizerBits.contains(bits) else {
                throw .invalidConfiguration("scalar quantizer bits must be 4, 6 or 8, not \(bits)")
            }
        case .productQuantizer(let subquantizers, let bits):
            guard Self.productQuantizerBits.contains(bits) else {
                throw .invalidConfiguration("product quantizer bits must be in 4...12, not \(bits)")
            }
            guard subquantizers >= 1, dimensions % subquantizers == 0 else {
                throw .invalidConfiguration(
                    "product quantizer subquantizers (\(subquantizers)) must divide the dimensions (\(dimensions))")
            }
        }
    }

    /// Bytes per stored vector under this encoding for `dimensions`-long vectors (assumes a valid configuration).
    public func codeSize(dimensions: Int) -> Int {
        switch self {
        case .none: return dimensions * 4
        case .scalarQuantizer(let bits): return (dimensions * bits + 7) / 8
        case .productQuantizer(let subquantizers, let bits): return (subquantizers * bits + 7) / 8
        }
    }
}
