/// Lloyd's iterations for ``KMeans``: the first assignment compares every point with every centroid and remembers
/// each point's `candidates` nearest centroids; later assignments compare each point only with those (unless
/// `k ≤ 3 × candidates`, when every assignment is a full one).
///
/// Once the first iteration has placed the centroids, a point's nearest centroid is (almost always) one of the few
/// that were nearest it before, so later iterations cost `candidates / k` of a full pass. The full pass is the
/// blocked kernel of ``CentroidScan`` (four points × two centroids). Work is split into fixed chunks of points and
/// each chunk writes only its own points' entries, so results do not depend on scheduling.
final class KMeansLloyd {
    /// Points per parallel chunk.
    static let chunkSize = 256

    let data: UnsafePointer<Float>
    let n: Int, d: Int, k: Int
    /// How many of its nearest centroids each point keeps as candidates for the later iterations.
    let candidates: Int
    /// Every assignment compares with every centroid (few centroids: a full pass costs about what candidates would).
    let exact: Bool
    let assignment: UnsafeMutablePointer<Int32>
    /// `n × candidates` centroid indices, point-major.
    let candidateLists: UnsafeMutablePointer<Int32>

    init(data: UnsafePointer<Float>, n: Int, d: Int, k: Int, candidates: Int) {
        self.data = data
        self.n = n
        self.d = d
        self.k = k
        exact = k <= 3 * candidates
        self.candidates = exact ? 1 : min(k, max(1, candidates))
        assignment = .allocate(capacity: n)
        assignment.initialize(repeating: -1, count: n)
        candidateLists = .allocate(capacity: n * self.candidates)
        candidateLists.initialize(repeating: 0, count: n * self.candidates)
    }

    deinit {
        assignment.deallocate()
        candidateLists.deallocate()
    }

    /// Runs at most `iterations` assignment + update rounds, updating `centroids` in place. Stops once at most
    /// `n / 1000` points change cluster in a round.
    func run(_ centroids: inout [Float], iterations: Int, parallel: ParallelFor) {
        guard iterations > 0 else { return }
        let tolerance = n / 1000
        var changed = forEachChunk(centroids, parallel: parallel) { state, chunk, c, norms in
            state.assignAll(chunk, centroids: c, norms: norms)
        }
        for iteration in 0..<iterations {
            KMeans.moveToMeans(&centroids, data: data, n: n, d: d, assignment: assignment, parallel: parallel)
            if changed <= tolerance || iteration + 1 == iterations { break }
            changed = forEachChunk(centroids, parallel: parallel) { state, chunk, c, norms in
                state.exact ? state.assignAll(chunk, centroids: c, norms: norms)
                    : state.assignAmongCandidates(chunk, centroids: c, norms: norms)
            }
            if changed == 0 { break }
        }
    }

    /// Runs `body` for every chunk of points in parallel with the centroids and their squared norms; returns the
    /// sum of what the chunks return.
    @discardableResult
    private func forEachChunk(_ centroids: [Float], parallel: ParallelFor,
                              _ body: @escaping @Sendable (KMeansLloyd, Int, UnsafePointer<Float>,
                                                           UnsafePointer<Float>) -> Int) -> Int {
        let chunks = ParallelLoop.chunkCount(n, size: Self.chunkSize)
        var perChunk = [Int](repeating: 0, count: chunks)
        centroids.withUnsafeBufferPointer { cb in
            let norms = KMeans.squaredNorms(cb.baseAddress!, count: k, d: d)
            norms.withUnsafeBufferPointer { nb in
                perChunk.withUnsafeMutableBufferPointer { pb in
                    let shared = Unchecked((state: self, c: cb.baseAddress!, norms: nb.baseAddress!,
                                            out: pb.baseAddress!))
                    parallel(chunks) { chunk in
                        let v = shared.value
                        v.out[chunk] = body(v.state, chunk, v.c, v.norms)
                    }
                }
            }
        }
        return perChunk.reduce(0, +)
    }

    /// A full assignment: every point of the chunk against every centroid, keeping its nearest `candidates`;
    /// returns how many points changed cluster (all of them the first time).
    private func assignAll(_ chunk: Int, centroids: UnsafePointer<Float>, norms: UnsafePointer<Float>) -> Int {
        let start = chunk * Self.chunkSize, count = min(n, start + Self.chunkSize) - start, m = candidates
        return withUnsafeTemporaryAllocation(of: Int32.self, capacity: count) { rows in
            withUnsafeTemporaryAllocation(of: Float.self, capacity: count * m) { scores in
                for p in 0..<count { rows[p] = Int32(start + p) }
                CentroidScan.nearestM(data: data, rows: rows.baseAddress!, count: count, d: d, centroids: centroids,
                                      norms: norms, k: k, m: m, indices: candidateLists + start * m,
                                      scores: scores.baseAddress!)
                var moved = 0
                for i in start..<start + count {
                    let list = candidateLists + i * m
                    for r in 0..<m where list[r] < 0 { list[r] = 0 }  // only with non-finite data
                    if assignment[i] != list[0] {
                        assignment[i] = list[0]
                        moved += 1
                    }
                }
                return moved
            }
        }
    }

    /// A later assignment: each point of the chunk against its candidates; returns how many moved.
    private func assignAmongCandidates(_ chunk: Int, centroids: UnsafePointer<Float>,
                                       norms: UnsafePointer<Float>) -> Int {
        let start = chunk * Self.chunkSize, end = min(n, start + Self.chunkSize), m = candidates, d = d
        var moved = 0
        for i in start..<end {
            let x = data + i * d, list = candidateLists + i * m
            var best = list[0]
            var bestScore = norms[Int(best)] - 2 * CentroidScan.dot1x1(x, centroids + Int(best) * d, d)
            var r = 1
            @inline(__always) func fold(_ score: Float, _ j: Int32) {
                if score < bestScore || (score == bestScore && j < best) {
                    best = j
                    bestScore = score
                }
            }
            while r + 4 <= m {
                let j0 = Int(list[r]), j1 = Int(list[r + 1]), j2 = Int(list[r + 2]), j3 = Int(list[r + 3])
                let dots = CentroidScan.dot1x4(x, centroids + j0 * d, centroids + j1 * d, centroids + j2 * d,
                                               centroids + j3 * d, d)
                let scores = SIMD4(norms[j0], norms[j1], norms[j2], norms[j3]) - 2 * dots
                fold(scores[0], list[r])
                fold(scores[1], list[r + 1])
                fold(scores[2], list[r + 2])
                fold(scores[3], list[r + 3])
                r += 4
            }
            while r < m {
                let j = Int(list[r])
                fold(norms[j] - 2 * CentroidScan.dot1x1(x, centroids + j * d, d), list[r])
                r += 1
            }
            if best != assignment[i] {
                assignment[i] = best
                moved += 1
            }
        }
        return moved
    }
}
