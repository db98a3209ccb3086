import Testing
@testable import SetteeVector

@Suite struct KMeansTests {
    /// A ``ParallelFor`` that runs the chunks last to first.
    static func reversed(_ count: Int, _ body: @Sendable (Int) -> Void) {
        for i in (0..<count).reversed() { body(i) }
    }

    @Test func trainingIsDeterministicForASeed() {
        let (data, _, _) = TestData.clustered(count: 1500, dimensions: 8, clusters: 12, spread: 2, seed: 5)
        let first = data.withUnsafeBufferPointer { KMeans.train($0, dimensions: 8, k: 20, seed: 77) }
        let again = data.withUnsafeBufferPointer { KMeans.train($0, dimensions: 8, k: 20, seed: 77) }
        #expect(first == again)
        #expect(first.count == 20 * 8)
    }

    @Test func resultsDoNotDependOnHowChunksAreScheduled() {
        // More points than one chunk, so the assignment really is split.
        let (data, _, _) = TestData.clustered(count: 1200, dimensions: 5, clusters: 9, spread: 1.5, seed: 6)
        let serial = data.withUnsafeBufferPointer { KMeans.train($0, dimensions: 5, k: 16, seed: 3) }
        let shuffled = data.withUnsafeBufferPointer {
            KMeans.train($0, dimensions: 5, k: 16, seed: 3, parallel: Self.reversed)
        }
        #expect(serial == shuffled)
    }

    @Test func separatesWellSeparatedClusters() {
        let d = 6, clusters = 7
        let (data, labels, centres) = TestData.clustered(count: 700, dimensions: d, clusters: clusters, spread: 0.3,
                                                         seed: 12)
        let centroids = data.withUnsafeBufferPointer { KMeans.train($0, dimensions: d, k: clusters, seed: 1) }
        // Every true centre has a centroid close to it …
        var owner = [Int](repeating: -1, count: clusters)
        for c in 0..<clusters {
            let centre = TestData.row(centres, c, d)
            let distances = (0..<clusters).map {
                VectorDistance.distance(.euclidean, centre, TestData.row(centroids, $0, d))
            }
            let nearest = distances.indices.min { distances[$0] < distances[$1] }!
            #expect(distances[nearest] < 0.5, "centre \(c) is \(distances[nearest]) from the nearest centroid")
            owner[c] = nearest
        }
        #expect(Set(owner).count == clusters)
        // … and every point is nearest the centroid of its own cluster.
        for i in 0..<700 {
            let point = TestData.row(data, i, d)
            let distances = (0..<clusters).map {
                VectorDistance.distance(.euclideanSquared, point, TestData.row(centroids, $0, d))
            }
            #expect(distances.indices.min { distances[$0] < distances[$1] } == owner[labels[i]])
        }
    }

    @Test func fewerPointsThanCentroidsReturnsThePointsRepeated() {
        let data: [Float] = [1, 2, 3, 4, 5, 6]
        let centroids = data.withUnsafeBufferPointer { KMeans.train($0, dimensions: 2, k: 5) }
        #expect(centroids == [1, 2, 3, 4, 5, 6, 1, 2, 3, 4])
        let empty = [Float]().withUnsafeBufferPointer { KMeans.train($0, dimensions: 3, k: 2) }
        #expect(empty == [0, 0, 0, 0, 0, 0])
    }

    @Test func centroidsAreTheMeansOfTheirPoints() {
        // After convergence each centroid is the mean of the points nearest it.
        let d = 3
        let (data, _, _) = TestData.clustered(count: 400, dimensions: d, clusters: 4, spread: 0.5, seed: 19)
        let centroids = data.withUnsafeBufferPointer { KMeans.train($0, dimensions: d, k: 4, iterations: 50) }
        var sums = [Double](repeating: 0, count: 4 * d), counts = [Int](repeating: 0, count: 4)
        for i in 0..<400 {
            let point = TestData.row(data, i, d)
            let distances = (0..<4).map {
                VectorDistance.distance(.euclideanSquared, point, TestData.row(centroids, $0, d))
            }
            let j = distances.indices.min { distances[$0] < distances[$1] }!
            counts[j] += 1
            for t in 0..<d { sums[j * d + t] += Double(point[t]) }
        }
        for j in 0..<4 where counts[j] > 0 {
            for t in 0..<d { #expect(abs(sums[j * d + t] / Double(counts[j]) - Double(centroids[j * d + t])) < 1e-3) }
        }
    }

    @Test func emptyClustersAreReseededBySplitting() {
        // Forty copies of two points: any k > 2 leaves clusters empty, which must be re-seeded, not left behind.
        var data: [Float] = []
        for i in 0..<40 { data += i % 2 == 0 ? [0, 0] : [10, 10] }
        let centroids = data.withUnsafeBufferPointer { KMeans.train($0, dimensions: 2, k: 4, seed: 2) }
        #expect(centroids.count == 8)
        #expect(centroids.allSatisfy { $0.isFinite })
        for j in 0..<4 {
            let c = TestData.row(centroids, j, 2)
            let nearestPoint = min(VectorDistance.distance(.euclidean, c, [0, 0]),
                                   VectorDistance.distance(.euclidean, c, [10, 10]))
            #expect(nearestPoint < 0.1)
        }
    }
}
