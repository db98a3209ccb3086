/// Greedy k-means++ seeding (as scikit-learn does it) on a random subsample of the data.
///
/// The first centroid is a uniformly random sample point. Each next one is chosen among `2 + ⌊ln k⌋` candidates,
/// each drawn with probability proportional to its squared distance from the nearest centroid chosen so far (D²
/// sampling); the candidate that most reduces the total of those squared distances wins. Plain k-means++ often puts
/// two seeds in one natural cluster and none in another, which Lloyd's iterations cannot undo and which leaves IVF
/// lists unbalanced; trying a few candidates per step all but removes that.
///
/// The subsample (at most `20·k` points) is copied contiguously so every round streams through cache; distances use
/// ‖x‖² + ‖c‖² − 2x·c with the shared dot-product kernels. Each round's work is split into fixed chunks for the
/// caller's ``ParallelFor`` and the chunks' partial sums are combined in chunk order, so the seeds depend only on
/// the data and the generator.
enum KMeansSeeding {
    /// Sample points per parallel chunk.
    static let chunkSize = 512

    /// `k × d` seed centroids for the `n × d` points at `data` (requires `n > k ≥ 1`).
    static func seed(_ data: UnsafePointer<Float>, n: Int, d: Int, k: Int, rng: inout SplitMix64,
                     parallel: ParallelFor) -> [Float] {
        let s = min(n, 20 * k)
        let sample = subsample(data, n: n, d: d, count: s, rng: &rng)
        let norms = sample.withUnsafeBufferPointer { KMeans.squaredNorms($0.baseAddress!, count: s, d: d) }
        // ≈ 2 + ln k, from the bit length (ln 2 ≈ 0.693).
        let trials = 2 + (Int.bitWidth - k.leadingZeroBitCount - 1) * 693 / 1000
        let chunks = ParallelLoop.chunkCount(s, size: chunkSize)
        var centroids = [Float](repeating: 0, count: k * d)
        var nearest = [Float](repeating: .infinity, count: s)
        var cumulative = [Double](repeating: 0, count: s)
        // Reused every round: each point's distance to each candidate, and each chunk's totals per candidate.
        var perPoint = [Float](repeating: 0, count: s * trials)
        var partial = [Double](repeating: 0, count: chunks * trials)
        var candidates = [rng.nextIndex(below: s)]
        for c in 0..<k {
            if c > 0 {
                // Draw candidates by D² sampling.
                var total = 0.0
                for i in 0..<s {
                    total += Double(nearest[i])
                    cumulative[i] = total
                }
                if total > 0 && total.isFinite {
                    candidates = (0..<trials).map { _ in Self.draw(rng.nextUnit() * total, cumulative) }
                } else {
                    candidates = [rng.nextIndex(below: s)]
                }
            }
            // Every candidate's distances, and the total each would leave; keep the best.
            let t = candidates.count
            evaluate(candidates, sample: sample, norms: norms, nearest: nearest, d: d, perPoint: &perPoint,
                     partial: &partial, parallel: parallel)
            var potential = [Double](repeating: 0, count: t)
            for chunk in 0..<chunks {
                for j in 0..<t { potential[j] += partial[chunk * t + j] }
            }
            var winner = 0
            for j in 1..<t where potential[j] < potential[winner] { winner = j }
            let chosen = candidates[winner]
            centroids.replaceSubrange(c * d..<(c + 1) * d, with: sample[chosen * d..<(chosen + 1) * d])
            perPoint.withUnsafeBufferPointer { distances in
                for i in 0..<s { nearest[i] = min(nearest[i], distances[i * t + winner]) }
            }
        }
        return centroids
    }

    /// `count` distinct random rows of `data` (ascending row order), copied contiguously.
    static func subsample(_ data: UnsafePointer<Float>, n: Int, d: Int, count: Int,
                          rng: inout SplitMix64) -> [Float] {
        var rows = Array(0..<n)
        if count < n {
            for i in 0..<count { rows.swapAt(i, i + rng.nextIndex(below: n - i)) }
            rows.removeSubrange(count...)
            rows.sort()
        }
        var sample = [Float](repeating: 0, count: count * d)
        sample.withUnsafeMutableBufferPointer { out in
            for (p, row) in rows.enumerated() { (out.baseAddress! + p * d).update(from: data + row * d, count: d) }
        }
        return sample
    }

    /// The first index whose cumulative total exceeds `target` (the last index when none does).
    static func draw(_ target: Double, _ cumulative: [Double]) -> Int {
        var low = 0, high = cumulative.count - 1
        while low < high {
            let mid = (low + high) / 2
            if cumulative[mid] > target { high = mid } else { low = mid + 1 }
        }
        return low
    }

    /// For each sample point, its squared distance to each candidate (`perPoint[i·T + t]`, T = candidates), and per
    /// chunk and candidate the total Σᵢ min(nearest[i], distance) over the chunk's points (`partial[chunk·T + t]`).
    /// Four points × two candidates per kernel call.
    static func evaluate(_ candidates: [Int], sample: [Float], norms: [Float], nearest: [Float], d: Int,
                         perPoint: inout [Float], partial: inout [Double], parallel: ParallelFor) {
        let s = norms.count, t = candidates.count
        sample.withUnsafeBufferPointer { sb in
            norms.withUnsafeBufferPointer { nb in
                nearest.withUnsafeBufferPointer { eb in
                    candidates.withUnsafeBufferPointer { cb in
                        perPoint.withUnsafeMutableBufferPointer { pb in
                            partial.withUnsafeMutableBufferPointer { sumsBuffer in
                                let v = Unchecked((x: sb.baseAddress!, norms: nb.baseAddress!,
                                                   nearest: eb.baseAddress!, candidates: cb.baseAddress!,
                                                   out: pb.baseAddress!, sums: sumsBuffer.baseAddress!))
                                parallel(ParallelLoop.chunkCount(s, size: chunkSize)) { chunk in
                                    let start = chunk * chunkSize, end = min(s, start + chunkSize)
                                    evaluateChunk(v.value, start: start, end: end, t: t, d: d,
                                                  sums: v.value.sums + chunk * t)
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// One chunk of ``evaluate(_:sample:norms:nearest:d:perPoint:partial:parallel:)``.
    private static func evaluateChunk(
        _ v: (x: UnsafePointer<Float>, norms: UnsafePointer<Float>, nearest: UnsafePointer<Float>,
              candidates: UnsafePointer<Int>, out: UnsafeMutablePointer<Float>, sums: UnsafeMutablePointer<Double>),
        start: Int, end: Int, t: Int, d: Int, sums: UnsafeMutablePointer<Double>
    ) {
        var i = start
        while i < end {
            // Four points (a short last group repeats its last point) …
            let rows = SIMD4(i, min(i + 1, end - 1), min(i + 2, end - 1), min(i + 3, end - 1))
            let pointNorms = SIMD4(v.norms[rows[0]], v.norms[rows[1]], v.norms[rows[2]], v.norms[rows[3]])
            var c = 0
            while c < t {
                // … by two candidates (a lone last candidate is paired with itself).
                let j0 = v.candidates[c], j1 = v.candidates[min(c + 1, t - 1)]
                let dots = CentroidScan.dot4x2(v.x + rows[0] * d, v.x + rows[1] * d, v.x + rows[2] * d,
                                               v.x + rows[3] * d, v.x + j0 * d, v.x + j1 * d, d)
                let first = pointNorms + SIMD4(repeating: v.norms[j0]) - 2 * SIMD4(dots[0], dots[2], dots[4], dots[6])
                let second = pointNorms + SIMD4(repeating: v.norms[j1]) - 2 * SIMD4(dots[1], dots[3], dots[5], dots[7])
                for lane in 0..<min(4, end - i) {
                    v.out[(i + lane) * t + c] = max(0, first[lane])
                    if c + 1 < t { v.out[(i + lane) * t + c + 1] = max(0, second[lane]) }
                }
                c += 2
            }
            i += 4
        }
        for c in 0..<t { sums[c] = 0 }
        for i in start..<end {
            for c in 0..<t { sums[c] += Double(min(v.nearest[i], v.out[i * t + c])) }
        }
    }
}
