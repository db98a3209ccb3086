/// An inverted-file (IVF) vector index: coarse centroids partition the vectors into lists, each list holding its
/// vectors' ids and codes; a search scans only the `nprobes` lists whose centroids are nearest the query.
///
/// Lifecycle: an untrained index keeps raw vectors in one flat list and searches exactly (brute force).
/// ``train(_:iterations:seed:parallel:)`` learns the centroids (and the quantizer) from a sample and then empties the
/// index; the caller re-adds every vector. ``parameters()`` / ``init(parameters:)`` persist what training learned;
/// the lists are the caller's to persist, entry by entry, as ``encode(_:)`` produces them and
/// ``add(id:list:code:)`` restores them.
///
/// Metrics: vectors are normalized internally under `cosine` (at train, add and search) and compared by squared L2,
/// cosine distance being half of it; under `dot` lists are assigned and probed by maximum inner product.
///
/// Quantized codes: the scalar quantizer encodes the (normalized) vectors themselves; the product quantizer encodes
/// each vector's residual from its list's centroid, which makes its error much smaller than the data's spread.
///
/// Thread safety: not thread-safe for mutation — the caller serializes `train`, `add` and `remove`; any number of
/// concurrent `search` / `distance` calls with no mutation in flight are safe.
// @unchecked: mutation is serialized by the owner (the index manager's VectorIndexState lock) and searches only read;
// the lists are plain arrays so that search stays lock-free.
package final class IVFIndex: @unchecked Sendable {
    /// The vector length.
    package let dimensions: Int
    /// How many lists (coarse centroids) training creates.
    package let centroidCount: Int
    /// How distances are measured and reported.
    package let metric: DistanceMetric
    /// How trained lists store vectors (untrained lists always hold raw floats).
    package let encoding: VectorEncoding
    /// True once ``train(_:iterations:seed:parallel:)`` ran (or the index was restored from parameters).
    package internal(set) var isTrained = false

    /// `centroidCount × dimensions` coarse centroids once trained.
    var centroids: [Float] = []
    /// Per centroid: ‖c‖² under the L2-type metrics, 0 under `dot` (so scores rank by inner product).
    var centroidNorms: [Float] = []
    var scalarQuantizer: ScalarQuantizer?
    var productQuantizer: ProductQuantizer?
    var lists: [InvertedList] = [InvertedList()]
    var locations: [Int64: Location] = [:]

    /// Where an id's entry lives.
    struct Location: Hashable {
        var list: Int32
        var slot: Int32
    }

    /// How many vectors the index holds.
    package var count: Int { locations.count }

    /// Bytes per stored entry: the raw floats when untrained or unquantized, else the quantizer's code size.
    package var codeSize: Int { isTrained ? encoding.codeSize(dimensions: dimensions) : dimensions * 4 }

    /// An empty, untrained index.
    ///
    /// Throws ``VectorError/invalidConfiguration(_:)`` when `dimensions < 1`, `centroids < 1`, or `encoding` is not
    /// valid for `dimensions` (see ``VectorEncoding/validate(dimensions:)``).
    package init(dimensions: Int, centroids: Int, metric: DistanceMetric, encoding: VectorEncoding) throws(VectorError) {
        try encoding.validate(dimensions: dimensions)
        guard centroids >= 1 else { throw .invalidConfiguration("centroids must be at least 1, not \(centroids)") }
        self.dimensions = dimensions
        self.centroidCount = centroids
        self.metric = metric
        self.encoding = encoding
    }

    /// Squared-L2 comparison (euclidean, squared euclidean, cosine) rather than inner product (dot).
    var usesL2: Bool { metric != .dot }

    // MARK: - Training

    /// Learns the coarse centroids (k-means, at most `iterations` Lloyd iterations) and the quantizer from `sample`
    /// (row-major, `count × dimensions`), then EMPTIES the index: the caller re-adds every vector.
    ///
    /// Throws ``VectorError/dimensionMismatch(expected:got:)`` when `sample.count` is not a multiple of
    /// `dimensions` (got: the remainder), ``VectorError/notEnoughTrainingData(needed:got:)`` with fewer vectors
    /// than centroids. Deterministic for `seed`; `parallel` spreads the work (see ``ParallelFor``). The product
    /// quantizer trains on the residuals of the first `64 × 2^bits` (at most) sample vectors, with the same
    /// iteration cap per codebook.
    package func train(_ sample: UnsafeBufferPointer<Float>, iterations: Int = 10, seed: UInt64 = 0x5E77EE,
                      parallel: ParallelFor = ParallelLoop.serial) throws(VectorError) {
        let d = dimensions
        guard sample.count % d == 0 else { throw .dimensionMismatch(expected: d, got: sample.count % d) }
        let n = sample.count / d
        guard n >= centroidCount else { throw .notEnoughTrainingData(needed: centroidCount, got: n) }
        if metric == .cosine {
            var normalized = Array(sample)
            normalized.withUnsafeMutableBufferPointer { buffer in
                for row in 0..<n { VectorDistance.normalize(buffer.baseAddress! + row * d, count: d) }
            }
            normalized.withUnsafeBufferPointer {
                learn(from: $0, n: n, iterations: iterations, seed: seed, parallel: parallel)
            }
        } else {
            learn(from: sample, n: n, iterations: iterations, seed: seed, parallel: parallel)
        }
        lists = [InvertedList](repeating: InvertedList(), count: centroidCount)
        locations = [:]
        isTrained = true
    }

    /// The training steps after validation, on (normalized) data.
    private func learn(from data: UnsafeBufferPointer<Float>, n: Int, iterations: Int, seed: UInt64,
                       parallel: ParallelFor) {
        let d = dimensions
        centroids = KMeans.train(data, dimensions: d, k: centroidCount, iterations: iterations, seed: seed,
                                 parallel: parallel)
        centroidNorms = usesL2 ? centroids.withUnsafeBufferPointer {
            KMeans.squaredNorms($0.baseAddress!, count: centroidCount, d: d)
        } : [Float](repeating: 0, count: centroidCount)
        scalarQuantizer = nil
        productQuantizer = nil
        switch encoding {
        case .none:
            break
        case .scalarQuantizer(let bits):
            scalarQuantizer = ScalarQuantizer(dimensions: d, bits: bits, training: data)
        case .productQuantizer(let subquantizers, let bits):
            // Residuals of the first (at most 64 per codebook centroid) sample vectors from their list centroids.
            let rows = min(n, 64 << bits)
            let lists = assignLists(data.baseAddress!, count: rows, parallel: parallel)
            var residuals = [Float](repeating: 0, count: rows * d)
            centroids.withUnsafeBufferPointer { cb in
                for row in 0..<rows {
                    let list = Int(lists[row])
                    for t in 0..<d { residuals[row * d + t] = data[row * d + t] - cb[list * d + t] }
                }
            }
            productQuantizer = residuals.withUnsafeBufferPointer {
                ProductQuantizer(dimensions: d, subquantizers: subquantizers, bits: bits, training: $0,
                                 iterations: iterations, seed: seed &+ 0x9E37_79B9_7F4A_7C15, parallel: parallel)
            }
        }
    }

    /// The list of each of `count` (prepared) vectors at `data`, by the blocked kernel, in parallel chunks.
    func assignLists(_ data: UnsafePointer<Float>, count: Int, parallel: ParallelFor) -> [Int32] {
        var out = [Int32](repeating: 0, count: count)
        let chunk = 256, d = dimensions, k = centroidCount
        centroids.withUnsafeBufferPointer { cb in
            centroidNorms.withUnsafeBufferPointer { nb in
                out.withUnsafeMutableBufferPointer { ob in
                    let shared = Unchecked((x: data, c: cb.baseAddress!, norms: nb.baseAddress!, out: ob.baseAddress!))
                    parallel(ParallelLoop.chunkCount(count, size: chunk)) { index in
                        let v = shared.value
                        let start = index * chunk, rows = min(count, start + chunk) - start
                        withUnsafeTemporaryAllocation(of: Int32.self, capacity: rows) { rowBuffer in
                            withUnsafeTemporaryAllocation(of: Float.self, capacity: 2 * rows) { scores in
                                for p in 0..<rows { rowBuffer[p] = Int32(start + p) }
                                CentroidScan.nearestTwo(data: v.x, rows: rowBuffer.baseAddress!, count: rows, d: d,
                                                        centroids: v.c, norms: v.norms, k: k, best: v.out + start,
                                                        bestScore: scores.baseAddress!,
                                                        secondScore: scores.baseAddress! + rows)
                                for p in 0..<rows where v.out[start + p] < 0 { v.out[start + p] = 0 }
                            }
                        }
                    }
                }
            }
        }
        return out
    }
}

/// One inverted list: ids, their codes back to back (`codeSize` bytes each) and, for scalar-quantized L2-type
/// indexes, each code's Σ (step·level)² per 32-dimension stage (``CodeScan/stageCount(_:)`` floats per entry).
struct InvertedList: Sendable {
    var ids: [Int64] = []
    var codes: [UInt8] = []
    var terms: [Float] = []
}
