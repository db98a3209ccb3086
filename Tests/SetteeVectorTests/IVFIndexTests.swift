import Testing
@testable import SetteeVector

@Suite struct IVFIndexTests {
    /// 20 dimensions: one whole 16-float block plus a tail, so every kernel's tail path runs too.
    static let d = 20
    /// 1,500 clustered vectors and 40 queries from the same distribution (small: debug builds are slow).
    static let data = TestData.clustered(count: 1500, dimensions: d, clusters: 20, spread: 2.5, seed: 1).points
    static let queries = TestData.clustered(count: 40, dimensions: d, clusters: 20, spread: 2.5, seed: 99).points
    /// The exact top 10 (squared L2) of every query.
    static let truth = TestData.groundTruth(data, queries: queries, dimensions: d, k: 10, metric: .euclideanSquared)
    /// The first 750 vectors and their exact top 10.
    static let smallData = Array(data[0..<750 * d])
    static let smallTruth = TestData.groundTruth(smallData, queries: queries, dimensions: d, k: 10,
                                                 metric: .euclideanSquared)

    @Test(arguments: DistanceMetric.allCases)
    func untrainedSearchIsExactBruteForce(metric: DistanceMetric) throws {
        let d = 8
        let data = TestData.uniform(count: 300, dimensions: d, seed: 2)
        let index = try IVFIndex(dimensions: d, centroids: 4, metric: metric, encoding: .scalarQuantizer(bits: 8))
        for i in 0..<300 {
            try TestData.row(data, i, d).withUnsafeBufferPointer { try index.add(id: Int64(i), vector: $0) }
        }
        #expect(!index.isTrained && index.count == 300)
        for q in 0..<5 {
            let query = TestData.uniform(count: 1, dimensions: d, seed: 100 + UInt64(q))
            let found = try query.withUnsafeBufferPointer { try index.search($0, k: 7, nprobes: 1) }
            let expected = TestData.bruteForce(data, dimensions: d, query: query, k: 7, metric: metric)
            #expect(found.map(\.id) == expected.map(\.id), "\(metric)")
            for (f, e) in zip(found, expected) {
                #expect(abs(f.distance - e.distance) <= 1e-4 * max(1, abs(e.distance)))
            }
        }
    }

    @Test(arguments: [VectorEncoding.none, .scalarQuantizer(bits: 8)])
    func trainedRecallAtTenIsHigh(encoding: VectorEncoding) throws {
        let index = try TestData.trainedIndex(Self.data, dimensions: Self.d, centroids: 30, metric: .euclideanSquared,
                                              encoding: encoding)
        #expect(index.isTrained && index.count == 1500)
        let recall = try TestData.recall(index, data: Self.data, queries: Self.queries, k: 10, nprobes: 6,
                                         truth: Self.truth)
        #expect(recall >= 0.9, "\(encoding): recall \(recall)")
    }

    @Test(arguments: [(VectorEncoding.scalarQuantizer(bits: 4), 0.65), (.scalarQuantizer(bits: 6), 0.85),
                      (.productQuantizer(subquantizers: 5, bits: 5), 0.45)])
    func compactEncodingsKeepSensibleRecall(encoding: VectorEncoding, minimum: Double) throws {
        let index = try TestData.trainedIndex(Self.smallData, dimensions: Self.d, centroids: 12,
                                              metric: .euclideanSquared, encoding: encoding)
        let recall = try TestData.recall(index, data: Self.smallData, queries: Self.queries, k: 10, nprobes: 4,
                                         truth: Self.smallTruth)
        #expect(recall >= minimum, "\(encoding): recall \(recall)")
    }

    @Test(arguments: [DistanceMetric.euclidean, .cosine, .dot])
    func otherMetricsReportTheirOwnDistances(metric: DistanceMetric) throws {
        let data = Self.smallData
        let index = try TestData.trainedIndex(data, dimensions: Self.d, centroids: 12, metric: metric, encoding: .none)
        let recall = try TestData.recall(index, data: data, queries: Self.queries, k: 10, nprobes: 4)
        #expect(recall >= 0.9, "\(metric): recall \(recall)")
        let query = TestData.row(Self.queries, 0, Self.d)
        for match in try query.withUnsafeBufferPointer({ try index.search($0, k: 5, nprobes: 12) }) {
            let exact = VectorDistance.distance(metric, query, TestData.row(data, Int(match.id), Self.d))
            #expect(abs(match.distance - exact) <= 1e-3 * max(1, abs(exact)), "\(metric)")
        }
    }

    @Test(arguments: [VectorEncoding.none, .scalarQuantizer(bits: 8), .scalarQuantizer(bits: 6)])
    func searchEqualsScoringEveryEntry(encoding: VectorEncoding) throws {
        // Scans abandon entries part-way once they cannot make the top k; that must never change the result.
        // 72 dimensions: two whole 32-dimension stages and a short one.
        let d = 72
        let (data, _, _) = TestData.clustered(count: 500, dimensions: d, clusters: 8, spread: 3, seed: 31)
        let queries = TestData.uniform(count: 8, dimensions: d, seed: 32).map { $0 * 10 }
        for metric in [DistanceMetric.euclideanSquared, .cosine] {
            let index = try TestData.trainedIndex(data, dimensions: d, centroids: 6, metric: metric, encoding: encoding)
            let ids = (0..<Int64(500)).map { $0 }
            for q in 0..<8 {
                let query = TestData.row(queries, q, d)
                let found = try query.withUnsafeBufferPointer { try index.search($0, k: 10, nprobes: 6) }
                let all = try query.withUnsafeBufferPointer { try index.distances($0, to: ids) }
                let expected = zip(ids, all).map { VectorMatch(id: $0, distance: $1!) }
                    .sorted(by: VectorMatch.ranksBefore).prefix(10)
                #expect(found == Array(expected), "\(encoding) \(metric) query \(q)")
            }
        }
    }

    @Test func filterDecidesWhichIdsMayBeReturned() throws {
        let index = try TestData.trainedIndex(Self.smallData, dimensions: Self.d, centroids: 12,
                                              metric: .euclideanSquared, encoding: .none)
        let query = TestData.row(Self.queries, 3, Self.d)
        var asked = 0
        let even = try query.withUnsafeBufferPointer {
            try index.search($0, k: 10, nprobes: 12) { id in
                asked += 1
                return id % 2 == 0
            }
        }
        #expect(even.count == 10 && even.allSatisfy { $0.id % 2 == 0 })
        #expect(even.map(\.id) == TestData.bruteForce(Self.smallData, dimensions: Self.d, query: query, k: 10,
                                                       metric: .euclideanSquared, allowed: { $0 % 2 == 0 }).map(\.id))
        #expect(asked < 750)  // only candidates that could make the result are offered to the filter
        let none = try query.withUnsafeBufferPointer { try index.search($0, k: 10, nprobes: 12) { _ in false } }
        #expect(none.isEmpty)
    }

    @Test func removeAndReplaceUpdateTheResults() throws {
        let index = try TestData.trainedIndex(Self.smallData, dimensions: Self.d, centroids: 12,
                                              metric: .euclideanSquared, encoding: .scalarQuantizer(bits: 8))
        let query = TestData.row(Self.data, 123, Self.d)
        let before = try query.withUnsafeBufferPointer { try index.search($0, k: 3, nprobes: 5) }
        #expect(before.first?.id == 123)
        #expect(index.remove(id: 123))
        #expect(!index.remove(id: 123) && !index.contains(id: 123) && index.count == 749)
        let after = try query.withUnsafeBufferPointer { try index.search($0, k: 3, nprobes: 5) }
        #expect(!after.contains { $0.id == 123 })
        // Replacing id 7's vector with 123's moves id 7 to the top.
        try query.withUnsafeBufferPointer { try index.add(id: 7, vector: $0) }
        #expect(index.count == 749)
        let replaced = try query.withUnsafeBufferPointer { try index.search($0, k: 3, nprobes: 5) }
        #expect(replaced.first?.id == 7)
        #expect(try query.withUnsafeBufferPointer { try index.distance($0, to: 7) } == replaced.first?.distance)
        #expect(try query.withUnsafeBufferPointer { try index.distance($0, to: 123) } == nil)
        // Every remaining id is still found where the swap-remove left it.
        for id in [Int64(0), 748, 749, 400] {
            let v = TestData.row(Self.data, Int(id), Self.d)
            #expect(try v.withUnsafeBufferPointer { try index.search($0, k: 1, nprobes: 3) }.first?.id == id)
        }
    }

    @Test(arguments: [VectorEncoding.none, .scalarQuantizer(bits: 8), .scalarQuantizer(bits: 6),
                      .productQuantizer(subquantizers: 4, bits: 5)])
    func parametersRoundTripGivesIdenticalResults(encoding: VectorEncoding) throws {
        let data = Self.smallData
        let index = try TestData.trainedIndex(data, dimensions: Self.d, centroids: 12, metric: .cosine,
                                              encoding: encoding)
        let restored = try IVFIndex(parameters: index.parameters())
        #expect(restored.isTrained && restored.count == 0)
        #expect(restored.dimensions == Self.d && restored.centroidCount == 12)
        #expect(restored.metric == .cosine && restored.encoding == encoding)
        #expect(restored.parameters() == index.parameters())
        for i in 0..<750 {
            let (list, code) = try TestData.row(data, i, Self.d).withUnsafeBufferPointer { try index.encode($0) }
            try restored.add(id: Int64(i), list: list, code: code)
        }
        for q in 0..<10 {
            let query = TestData.row(Self.queries, q, Self.d)
            let a = try query.withUnsafeBufferPointer { try index.search($0, k: 10, nprobes: 4) }
            let b = try query.withUnsafeBufferPointer { try restored.search($0, k: 10, nprobes: 4) }
            #expect(a == b)
        }
    }

    @Test func corruptParametersAreRejected() throws {
        let index = try TestData.trainedIndex(Array(Self.data[0..<500 * Self.d]), dimensions: Self.d, centroids: 8,
                                              metric: .euclideanSquared, encoding: .scalarQuantizer(bits: 8))
        var bytes = index.parameters()
        #expect(throws: VectorError.self) { try IVFIndex(parameters: Array(bytes.dropLast())) }
        bytes[40] ^= 1
        #expect(throws: VectorError.self) { try IVFIndex(parameters: bytes) }
        #expect(throws: VectorError.self) { try IVFIndex(parameters: [1, 2, 3]) }
        let untrained = try IVFIndex(dimensions: 4, centroids: 2, metric: .dot, encoding: .none)
        let restored = try IVFIndex(parameters: untrained.parameters())
        #expect(!restored.isTrained && restored.metric == .dot)
    }

    @Test func mismatchedInputsThrow() throws {
        let index = try IVFIndex(dimensions: 4, centroids: 3, metric: .euclidean, encoding: .none)
        let short: [Float] = [1, 2, 3]
        #expect(throws: VectorError.dimensionMismatch(expected: 4, got: 3)) {
            try short.withUnsafeBufferPointer { try index.add(id: 1, vector: $0) }
        }
        #expect(throws: VectorError.dimensionMismatch(expected: 4, got: 3)) {
            try short.withUnsafeBufferPointer { try index.search($0, k: 1, nprobes: 1) }
        }
        #expect(throws: VectorError.notEnoughTrainingData(needed: 3, got: 2)) {
            try [Float](repeating: 1, count: 8).withUnsafeBufferPointer { try index.train($0) }
        }
        #expect(throws: VectorError.self) { try index.add(id: 1, list: 0, code: [1, 2]) }
        #expect(throws: VectorError.self) { try index.add(id: 1, list: 1, code: [UInt8](repeating: 0, count: 16)) }
        #expect(throws: VectorError.self) {
            try IVFIndex(dimensions: 10, centroids: 3, metric: .dot,
                         encoding: .productQuantizer(subquantizers: 3, bits: 8))
        }
        #expect(throws: VectorError.self) { try IVFIndex(dimensions: 4, centroids: 0, metric: .dot, encoding: .none) }
    }

    @Test(arguments: [DistanceMetric.dot, .euclideanSquared])
    func batchAddMatchesOneByOneAdd(metric: DistanceMetric) throws {
        let data = Array(Self.data[0..<600 * Self.d])
        let single = try IVFIndex(dimensions: Self.d, centroids: 16, metric: metric,
                                  encoding: .scalarQuantizer(bits: 8))
        try data.withUnsafeBufferPointer { try single.train($0) }
        for i in 0..<600 {
            try TestData.row(data, i, Self.d).withUnsafeBufferPointer { try single.add(id: Int64(i), vector: $0) }
        }
        let batch = try IVFIndex(parameters: single.parameters())
        try data.withUnsafeBufferPointer {
            try batch.add(ids: (0..<600).map { Int64($0) }, vectors: $0, parallel: KMeansTests.reversed)
        }
        #expect(batch.listSizes == single.listSizes)
        let query = TestData.row(Self.queries, 5, Self.d)
        let a = try query.withUnsafeBufferPointer { try single.search($0, k: 10, nprobes: 3) }
        let b = try query.withUnsafeBufferPointer { try batch.search($0, k: 10, nprobes: 3) }
        #expect(a == b)
    }

    @Test func cosineWithAZeroQueryReportsDistanceOne() throws {
        let index = try IVFIndex(dimensions: 3, centroids: 1, metric: .cosine, encoding: .none)
        for i in 0..<4 { try [Float(i) + 1, 1, 0].withUnsafeBufferPointer { try index.add(id: Int64(i), vector: $0) } }
        let zero = [Float](repeating: 0, count: 3)
        let found = try zero.withUnsafeBufferPointer { try index.search($0, k: 2, nprobes: 1) }
        #expect(found == [VectorMatch(id: 0, distance: 1), VectorMatch(id: 1, distance: 1)])
    }
}
