@testable import SetteeVector

/// Seeded synthetic data and brute-force references shared by the vector tests.
enum TestData {
    /// `count × dimensions` uniform floats in [-1, 1).
    static func uniform(count: Int, dimensions: Int, seed: UInt64) -> [Float] {
        var rng = SplitMix64(seed: seed)
        return (0..<count * dimensions).map { _ in Float(rng.nextUnit() * 2 - 1) }
    }

    /// An approximately normal float (Irwin–Hall: the sum of 12 uniforms, centred).
    static func normal(_ rng: inout SplitMix64) -> Float {
        var sum = 0.0
        for _ in 0..<12 { sum += rng.nextUnit() }
        return Float(sum - 6)
    }

    /// Points drawn around `clusters` random centres (coordinates in [-10, 10)), `spread` the per-dimension
    /// standard deviation. Returns the points (row-major) and each point's cluster.
    static func clustered(count: Int, dimensions: Int, clusters: Int, spread: Float,
                          seed: UInt64) -> (points: [Float], labels: [Int], centres: [Float]) {
        var rng = SplitMix64(seed: seed)
        let centres = (0..<clusters * dimensions).map { _ in Float(rng.nextUnit() * 20 - 10) }
        var points = [Float](repeating: 0, count: count * dimensions)
        var labels = [Int](repeating: 0, count: count)
        for i in 0..<count {
            let c = rng.nextIndex(below: clusters)
            labels[i] = c
            for t in 0..<dimensions { points[i * dimensions + t] = centres[c * dimensions + t] + spread * normal(&rng) }
        }
        return (points, labels, centres)
    }

    /// Row `i` of a row-major matrix.
    static func row(_ data: [Float], _ i: Int, _ dimensions: Int) -> [Float] {
        Array(data[i * dimensions..<(i + 1) * dimensions])
    }

    /// The exact `k` nearest rows of `data` to `query` under `metric` (ascending, ties by index), computed as
    /// ``VectorDistance/distance(_:_:_:)`` defines each metric.
    static func bruteForce(_ data: [Float], dimensions d: Int, query: [Float], k: Int, metric: DistanceMetric,
                           allowed: ((Int64) -> Bool)? = nil) -> [VectorMatch] {
        var all: [VectorMatch] = []
        data.withUnsafeBufferPointer { db in
            query.withUnsafeBufferPointer { qb in
                let q = qb.baseAddress!
                let queryNorm = VectorDistance.squaredNorm(q, count: d).squareRoot()
                for i in 0..<data.count / d where allowed?(Int64(i)) ?? true {
                    let x = db.baseAddress! + i * d
                    let distance: Float
                    switch metric {
                    case .euclideanSquared: distance = VectorDistance.euclideanSquared(q, x, count: d)
                    case .euclidean: distance = VectorDistance.euclideanSquared(q, x, count: d).squareRoot()
                    case .dot: distance = -VectorDistance.dot(q, x, count: d)
                    case .cosine:
                        let norm = VectorDistance.squaredNorm(x, count: d).squareRoot()
                        distance = queryNorm == 0 || norm == 0 ? 1
                            : min(max(1 - VectorDistance.dot(q, x, count: d) / (queryNorm * norm), 0), 2)
                    }
                    all.append(VectorMatch(id: Int64(i), distance: distance))
                }
            }
        }
        all.sort(by: VectorMatch.ranksBefore)
        return Array(all.prefix(k))
    }

    /// The exact top-`k` ids of every query row, for recall.
    static func groundTruth(_ data: [Float], queries: [Float], dimensions d: Int, k: Int,
                            metric: DistanceMetric) -> [Set<Int64>] {
        (0..<queries.count / d).map {
            Set(bruteForce(data, dimensions: d, query: row(queries, $0, d), k: k, metric: metric).map(\.id))
        }
    }

    /// Mean recall@k of `index` against brute force over `queries` query rows (`truth` precomputed, or computed).
    static func recall(_ index: IVFIndex, data: [Float], queries: [Float], k: Int, nprobes: Int,
                       truth: [Set<Int64>]? = nil) throws -> Double {
        let d = index.dimensions, count = queries.count / d
        let truth = truth ?? groundTruth(data, queries: queries, dimensions: d, k: k, metric: index.metric)
        var hits = 0
        for q in 0..<count {
            let query = row(queries, q, d)
            let truth = truth[q]
            let found = try query.withUnsafeBufferPointer { try index.search($0, k: k, nprobes: nprobes) }
            hits += found.filter { truth.contains($0.id) }.count
        }
        return Double(hits) / Double(count * k)
    }

    /// A trained index over `data` with every row added under its row number.
    static func trainedIndex(_ data: [Float], dimensions: Int, centroids: Int, metric: DistanceMetric,
                             encoding: VectorEncoding, seed: UInt64 = 7) throws -> IVFIndex {
        let index = try IVFIndex(dimensions: dimensions, centroids: centroids, metric: metric, encoding: encoding)
        try data.withUnsafeBufferPointer { try index.train($0, iterations: 5, seed: seed) }
        try data.withUnsafeBufferPointer {
            try index.add(ids: (0..<Int64(data.count / dimensions)).map { $0 }, vectors: $0)
        }
        return index
    }
}
