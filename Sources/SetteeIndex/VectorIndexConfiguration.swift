public import SetteeCore
import SetteeSQLPP
public import SetteeVector

/// The settings of a vector index beyond its expression (see ``VectorIndexConfiguration``).
public struct VectorIndexOptions: Sendable, Hashable {
    /// Length of every indexed vector: 2…4096.
    public var dimensions: Int
    /// Number of IVF lists (k-means centroids): 1…64000; about √(number of documents) is the usual choice.
    public var centroids: Int
    /// The distance metric (default squared Euclidean).
    public var metric: DistanceMetric = .euclideanSquared
    /// How vectors are stored: none, SQ4/SQ6/SQ8 (default SQ8) or PQ.
    public var encoding: VectorEncoding = .scalarQuantizer(bits: 8)
    /// Lists searched per query; 0 derives it from the centroids (at least 8, or 0.5 % of them).
    public var numProbes = 0
    /// Vectors needed before training; 0 means 25 × centroids (25 × 2^bits when PQ's codebooks are larger).
    public var minTrainingSize = 0
    /// Largest training sample; 0 means 256 × centroids (256 × 2^bits when PQ's codebooks are larger).
    public var maxTrainingSize = 0
    /// A lazy index is filled by the app through ``QueryIndex/beginUpdate(limit:)``, not from the documents.
    public var isLazy = false

    public init(dimensions: Int, centroids: Int) {
        self.dimensions = dimensions
        self.centroids = centroids
    }

    /// The number of probes a search uses when the query does not say.
    public var effectiveProbes: Int {
        numProbes > 0 ? numProbes : max(8, (centroids + 199) / 200)
    }

    private var trainingUnit: Int {
        if case .productQuantizer(_, let bits) = encoding { return max(centroids, 1 << bits) }
        return centroids
    }
    /// Vectors needed before the index trains (searches before that are exact).
    public var effectiveMinTrainingSize: Int { minTrainingSize > 0 ? minTrainingSize : 25 * trainingUnit }
    /// The largest number of vectors k-means trains on.
    public var effectiveMaxTrainingSize: Int {
        maxTrainingSize > 0 ? maxTrainingSize : max(256 * trainingUnit, effectiveMinTrainingSize)
    }

    /// Rejects out-of-range settings with the reason.
    public func validate() throws(SetteeError) {
        guard (2...4096).contains(dimensions) else {
            throw SetteeError(.badRequest, "Invalid vector index dimensions \(dimensions): must be 2 to 4096")
        }
        guard (1...64000).contains(centroids) else {
            throw SetteeError(.badRequest, "Invalid vector index centroids \(centroids): must be 1 to 64000")
        }
        guard numProbes >= 0 else { throw SetteeError(.badRequest, "Invalid numProbes \(numProbes): must be 0 (default) or more") }
        guard minTrainingSize >= 0, maxTrainingSize >= 0 else {
            throw SetteeError(.badRequest, "Training sizes must be 0 (default) or positive")
        }
        if minTrainingSize > 0, maxTrainingSize > 0, minTrainingSize > maxTrainingSize {
            throw SetteeError(.badRequest, "minTrainingSize \(minTrainingSize) is larger than maxTrainingSize \(maxTrainingSize)")
        }
        if minTrainingSize > 0, minTrainingSize < centroids {
            throw SetteeError(.badRequest, "minTrainingSize \(minTrainingSize) is smaller than the number of centroids \(centroids)")
        }
        do {
            try encoding.validate(dimensions: dimensions)
        } catch {
            throw SetteeError(.badRequest, "Invalid vector encoding: \(error)")
        }
    }

    /// The encoding's JSON name: `none`, `SQ4`, `SQ6`, `SQ8` or `PQ`.
    static func encodingName(_ e: VectorEncoding) -> String {
        switch e {
        case .none: "none"
        case .scalarQuantizer(let bits): "SQ\(bits)"
        case .productQuantizer: "PQ"
        }
    }

    var jsonPairs: [(String, JSON)] {
        var pairs: [(String, JSON)] = [
            ("dimensions", .int(Int64(dimensions))), ("centroids", .int(Int64(centroids))),
            ("metric", .string(metric.name)), ("encoding", .string(Self.encodingName(encoding))),
        ]
        if case .productQuantizer(let m, let bits) = encoding {
            pairs += [("subquantizers", .int(Int64(m))), ("bits", .int(Int64(bits)))]
        }
        pairs += [("numProbes", .int(Int64(numProbes))), ("minTrainingSize", .int(Int64(minTrainingSize))),
                  ("maxTrainingSize", .int(Int64(maxTrainingSize))), ("lazy", .bool(isLazy))]
        return pairs
    }

    /// Reads the vector members of an index definition's JSON form.
    init(json o: JSONObject) throws(SetteeError) {
        func integer(_ key: String, required: Bool = false) throws(SetteeError) -> Int? {
            guard let v = o[key], !v.isNull else {
                if required { throw SetteeError(.badRequest, "A vector index needs \"\(key)\"") }
                return nil
            }
            guard let i = v.intValue else { throw SetteeError(.badRequest, "\"\(key)\" must be an integer") }
            return Int(clamping: i)
        }
        self.init(dimensions: try integer("dimensions", required: true)!, centroids: try integer("centroids", required: true)!)
        if let v = o["metric"], !v.isNull {
            guard let name = v.stringValue, let metric = DistanceMetric(name: name) else {
                throw SetteeError(.badRequest, "Unknown distance metric \(v) (supported: euclideanSquared, euclidean, cosine, dot)")
            }
            self.metric = metric
        }
        if let v = o["encoding"], !v.isNull {
            guard let name = v.stringValue else { throw SetteeError(.badRequest, "\"encoding\" must be a string") }
            switch name.uppercased() {
            case "NONE": encoding = .none
            case "SQ4": encoding = .scalarQuantizer(bits: 4)
            case "SQ6": encoding = .scalarQuantizer(bits: 6)
            case "SQ8", "SQ": encoding = .scalarQuantizer(bits: 8)
            case "PQ":
                guard let m = try integer("subquantizers") else {
                    throw SetteeError(.badRequest, "A PQ encoding needs \"subquantizers\" (and optionally \"bits\", default 8)")
                }
                encoding = .productQuantizer(subquantizers: m, bits: try integer("bits") ?? 8)
            default:
                throw SetteeError(.badRequest, "Unknown vector encoding '\(name)' (supported: none, SQ4, SQ6, SQ8, PQ)")
            }
        }
        numProbes = try integer("numProbes") ?? 0
        minTrainingSize = try integer("minTrainingSize") ?? 0
        maxTrainingSize = try integer("maxTrainingSize") ?? 0
        if let v = o["lazy"] ?? o["isLazy"], !v.isNull {
            guard let b = v.boolValue else { throw SetteeError(.badRequest, "\"lazy\" must be a boolean") }
            isLazy = b
        }
    }
}

/// Scalar-quantizer widths (Couchbase Lite's `ScalarQuantizerType`).
public enum ScalarQuantizerType: UInt32, Sendable {
    case SQ4 = 4, SQ6 = 6, SQ8 = 8
}

extension VectorEncoding {
    /// A scalar quantizer of the given width (Couchbase Lite's `VectorEncoding.scalarQuantizer(type:)`).
    public static func scalarQuantizer(type: ScalarQuantizerType) -> VectorEncoding {
        .scalarQuantizer(bits: Int(type.rawValue))
    }
}

/// A vector index (Couchbase Lite's `VectorIndexConfiguration`): an IVF index over the vectors `expression` gives
/// each document, searched with `APPROX_VECTOR_DISTANCE(expression, $vector)`.
///
/// ```swift
/// var config = VectorIndexConfiguration(expression: "vector", dimensions: 3, centroids: 100)
/// config.metric = .cosine
/// config.encoding = .none
/// config.numProbes = 8
/// try collection.createIndex(withName: "colors_index", config: config)
/// ```
/// `expression` can call a registered model (`prediction(ColorModel, {"colorInput": color}).vector`), computing the
/// vectors at indexing time. Documents whose expression is not an array of `dimensions` numbers are not indexed.
/// Until `minTrainingSize` vectors exist, searches are exact; then the index trains k-means centroids (and the
/// quantizer) on up to `maxTrainingSize` of them and assigns every vector to its list.
public struct VectorIndexConfiguration: IndexConfiguration, IndexSpecifying {
    /// The SQL++ expression giving each document's vector (or, for a lazy index, the value the app embeds).
    public let expression: String
    public let dimensions: UInt32
    public let centroids: UInt32
    public var metric = VectorIndexConfiguration.defaultDistanceMetric
    public var encoding = VectorEncoding.scalarQuantizer(type: VectorIndexConfiguration.defaultEncoding)
    /// 0 derives it from the centroids.
    public var numProbes = VectorIndexConfiguration.defaultNumProbes
    /// 0 means 25 × centroids.
    public var minTrainingSize = VectorIndexConfiguration.defaultMinTrainingSize
    /// 0 means 256 × centroids.
    public var maxTrainingSize = VectorIndexConfiguration.defaultMaxTrainingSize
    /// The app computes the vectors through ``QueryIndex/beginUpdate(limit:)``.
    public var isLazy = VectorIndexConfiguration.defaultIsLazy

    public init(expression: String, dimensions: UInt32, centroids: UInt32) {
        self.expression = expression
        self.dimensions = dimensions
        self.centroids = centroids
    }

    /// Couchbase Lite's defaults (a training size or probe count of 0 is derived from the centroids).
    public static let defaultIsLazy = false
    public static let defaultEncoding = ScalarQuantizerType.SQ8
    public static let defaultDistanceMetric = DistanceMetric.euclideanSquared
    public static let defaultMinTrainingSize: UInt32 = 0
    public static let defaultMaxTrainingSize: UInt32 = 0
    public static let defaultNumProbes: UInt32 = 0

    package func makeIndexSpec() throws(SetteeError) -> IndexSpec {
        var options = VectorIndexOptions(dimensions: Int(dimensions), centroids: Int(centroids))
        options.metric = metric
        options.encoding = encoding
        options.numProbes = Int(numProbes)
        options.minTrainingSize = Int(minTrainingSize)
        options.maxTrainingSize = Int(maxTrainingSize)
        options.isLazy = isLazy
        return try IndexSpec(kind: .vector, expressions: [try SQLPPParser.parseExpression(expression)], vector: options)
    }
}

/// Couchbase Lite's extension loader (`Extension.enableVectorSearch()`). Settee's vector search is built in, so
/// there is nothing to load: the call succeeds, and code written for Couchbase Lite runs unchanged.
public enum Extension {
    /// Vector search is always available in Settee; this never throws.
    public static func enableVectorSearch() throws {}
}
