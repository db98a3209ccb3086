import Testing
@testable import SetteeVector

@Suite struct VectorDistanceTests {
    /// Scalar references, in Double so rounding differences stay visible but small.
    static func referenceL2(_ a: [Float], _ b: [Float]) -> Double {
        zip(a, b).reduce(0) { $0 + Double($1.0 - $1.1) * Double($1.0 - $1.1) }
    }

    static func referenceDot(_ a: [Float], _ b: [Float]) -> Double {
        zip(a, b).reduce(0) { $0 + Double($1.0) * Double($1.1) }
    }

    static func close(_ x: Float, _ y: Double, scale: Double) -> Bool {
        abs(Double(x) - y) <= 1e-5 * max(1, scale)
    }

    @Test func kernelsMatchScalarReferencesAtEveryLength() {
        var rng = SplitMix64(seed: 11)
        for length in Array(0...70) + [127, 128, 129, 255, 1000] {
            let a = (0..<length).map { _ in Float(rng.nextUnit() * 4 - 2) }
            let b = (0..<length).map { _ in Float(rng.nextUnit() * 4 - 2) }
            let l2 = a.withUnsafeBufferPointer { pa in
                b.withUnsafeBufferPointer { pb in
                    VectorDistance.euclideanSquared(pa.baseAddress!, pb.baseAddress!, count: length)
                }
            }
            let dot = a.withUnsafeBufferPointer { pa in
                b.withUnsafeBufferPointer { pb in VectorDistance.dot(pa.baseAddress!, pb.baseAddress!, count: length) }
            }
            let scale = Double(length) * 4
            #expect(Self.close(l2, Self.referenceL2(a, b), scale: scale), "length \(length)")
            #expect(Self.close(dot, Self.referenceDot(a, b), scale: scale), "length \(length)")
        }
    }

    @Test func kernelsAcceptUnalignedPointers() {
        let data = TestData.uniform(count: 1, dimensions: 67, seed: 3)
        data.withUnsafeBufferPointer { p in
            let a = p.baseAddress! + 1, b = p.baseAddress! + 2
            let expected = Self.referenceL2(Array(data[1..<66]), Array(data[2..<67]))
            #expect(Self.close(VectorDistance.euclideanSquared(a, b, count: 65), expected, scale: 65))
        }
    }

    @Test func euclideanSquaredAndEuclideanFollowTheirDefinitions() {
        let a: [Float] = [1, 2, 3], b: [Float] = [4, 6, 3]
        #expect(VectorDistance.distance(.euclideanSquared, a, b) == 25)
        #expect(VectorDistance.distance(.euclidean, a, b) == 5)
        #expect(VectorDistance.distance(.euclideanSquared, a, a) == 0)
    }

    @Test func cosineIsOneMinusCosineSimilarity() {
        #expect(VectorDistance.distance(.cosine, [1, 0], [2, 0]) == 0)
        #expect(abs(VectorDistance.distance(.cosine, [1, 0], [0, 3]) - 1) < 1e-6)
        #expect(abs(VectorDistance.distance(.cosine, [1, 1], [-1, -1]) - 2) < 1e-6)
        let half = VectorDistance.distance(.cosine, [1, 0], [1, 1])
        #expect(abs(half - (1 - 1 / Float(2).squareRoot())) < 1e-6)
    }

    @Test func cosineWithAZeroVectorIsOne() {
        #expect(VectorDistance.distance(.cosine, [0, 0, 0], [1, 2, 3]) == 1)
        #expect(VectorDistance.distance(.cosine, [1, 2, 3], [0, 0, 0]) == 1)
        #expect(VectorDistance.distance(.cosine, [], []) == 1)
    }

    @Test func dotIsTheNegatedInnerProduct() {
        #expect(VectorDistance.distance(.dot, [1, 2, 3], [4, -5, 6]) == -12)
        #expect(VectorDistance.distance(.dot, [], []) == 0)
    }

    @Test func normalizeScalesToUnitLengthAndLeavesZeroAlone() {
        var v: [Float] = [3, 4]
        VectorDistance.normalize(&v)
        #expect(abs(v[0] - 0.6) < 1e-6 && abs(v[1] - 0.8) < 1e-6)
        var long = TestData.uniform(count: 1, dimensions: 100, seed: 5)
        VectorDistance.normalize(&long)
        let norm = long.withUnsafeBufferPointer { VectorDistance.squaredNorm($0.baseAddress!, count: 100) }
        #expect(abs(norm - 1) < 1e-5)
        var zero: [Float] = [0, 0, 0]
        VectorDistance.normalize(&zero)
        #expect(zero == [0, 0, 0])
    }

    @Test func metricNamesRoundTripThroughSQLSpelling() {
        for metric in DistanceMetric.allCases { #expect(DistanceMetric(name: metric.sqlName) == metric) }
        #expect(DistanceMetric(name: "l2") == .euclidean)
        #expect(DistanceMetric(name: "manhattan") == nil)
    }

    @Test func blockedCentroidKernelsAgreeBitForBit() {
        // The 4×2, 1×4 and 1×1 kernels must give identical scores, so batch and single assignment agree.
        for d in [1, 3, 4, 7, 16, 33] {
            let points = TestData.uniform(count: 9, dimensions: d, seed: UInt64(d))
            let centroids = TestData.uniform(count: 11, dimensions: d, seed: UInt64(100 + d))
            centroids.withUnsafeBufferPointer { cb in
                points.withUnsafeBufferPointer { pb in
                    let norms = KMeans.squaredNorms(cb.baseAddress!, count: 11, d: d)
                    var best = [Int32](repeating: 0, count: 9), bestScore = [Float](repeating: 0, count: 9)
                    var second = [Float](repeating: 0, count: 9)
                    let rows = (0..<Int32(9)).map { $0 }
                    CentroidScan.nearestTwo(data: pb.baseAddress!, rows: rows, count: 9, d: d,
                                            centroids: cb.baseAddress!, norms: norms, k: 11, best: &best,
                                            bestScore: &bestScore, secondScore: &second)
                    for p in 0..<9 {
                        var scores = [Float](repeating: 0, count: 11)
                        CentroidScan.scores(pb.baseAddress! + p * d, centroids: cb.baseAddress!, norms: norms,
                                            k: 11, d: d, into: &scores)
                        let single = CentroidScan.nearest(pb.baseAddress! + p * d, centroids: cb.baseAddress!,
                                                          norms: norms, k: 11, d: d)
                        #expect(Int(best[p]) == single)
                        #expect(bestScore[p] == scores[single])
                        #expect(scores.sorted()[1] == second[p])
                    }
                }
            }
        }
    }
}
