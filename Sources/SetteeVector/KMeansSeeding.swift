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
        var centroids = [Float](repeating: 0, count: k * d)
        var nearest = [Float](repeating: .infinity, count: s)
        var cumulative = [Double](repeating: 0, count: s)
        var chosen = rng.nextIndex(below: s)
        var candidates = [chosen]
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
            let distances = evaluate(candidates, sample: sample, norms: norms, nearest: nearest, d: d,
                                     parallel: parallel)
            var winner = 0
            for t in 1..<candidates.count where distances.potential[t] < distances.potential[winner] { winner = t }
            chosen = candidates[winner]
            centroids.replaceSubrange(c * d..<(c + 1) * d, with: sample[chosen * d..<(chosen + 1) * d])
            let stride = candidates.count
            distances.perPoint.withUnsafeBufferPointer { perPoint in
                for i in 0..<s { nearest[i] = min(nearest[i], perPoint[i * stride + winner]) }
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

    /// For each sample point, its squared distance to each candidate (`perPoint[i·T + t]`), and for each candidate
    /// the total Σᵢ min(nearest[i], distance) it would leave.
    static func evaluate(_ candidates: [Int], sample: [Float], norms: [Float], nearest: [Float], d: Int,
                         parallel: ParallelFor) -> (perPoint: [Float], potential: [Double]) {
        let s = norms.count, t = candidates.count
        let chunks = ParallelLoop.chunkCount(s, size: chunkSize)
        var perPoint = [Float](repeating: 0, count: s * t)
        var partial = [Double](repeating: 0, count: chunks * t)
        sample.withUnsafeBufferPointer { sb in
            norms.withUnsafeBufferPointer { nb in
                nearest.withUnsafeBufferPointer { eb in
                    candidates.withUnsafeBufferPointer { cb in
                        perPoint.withUnsafeMutableBufferPointer { pb in
                            partial.withUnsafeMutableBufferPointer { sumsBuffer in
                                let v = Unchecked((x: sb.baseAddress!, norms: nb.baseAddress!,
                                                   nearest: eb.baseAddress!, candidates: cb.baseAddress!,
                                                   out: pb.baseAddress!, sums: sumsBuffer.baseAddress!))
                                parallel(chunks) { chunk in
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
        var potential = [Double](repeating: 0, count: t)
        for chunk in 0..<chunks {
            for c in 0..<t { potential[c] += partial[chunk * t + c] }
        }
        return (perPoint, potential)
    }

    /// One chunk of ``evaluate(_:sample:norms:nearest:d:parallel:)``.
    private static func evaluateChunk(
        _ v: (x: UnsafePointer<Float>, norms: UnsafePointer<Float>, nearest: UnsafePointer<Float>,
              candidates: UnsafePointer<Int>, out: UnsafeMutablePointer<Float>, sums: UnsafeMutablePointer<Double>),
        start: Int, end: Int, t: Int, d: Int, sums: UnsafeMutablePointer<Double>
    ) {
        for c in 0..<t { sums[c] = 0 }
        for i in start..<end {
            let x = v.x + i * d, row = v.out + i * t
            var c = 0
            // Four candidates per kernel call; a short last group repeats its last candidate.
            while c < t {
                let j0 = v.candidates[c], j1 = v.candidates[min(c + 1, t - 1)]
                let j2 = v.candidates[min(c + 2, t - 1)], j3 = v.candidates[min(c + 3, t - 1)]
                let dots = CentroidScan.dot1x4(x, v.x + j0 * d, v.x + j1 * d, v.x + j2 * d, v.x + j3 * d, d)
                let squared = SIMD4(repeating: v.norms[i]) + SIMD4(v.norms[j0], v.norms[j1], v.norms[j2], v.norms[j3])
                    - 2 * dots
                for lane in 0..<min(4, t - c) { row[c + lane] = max(0, squared[lane]) }
                c += 4
            }
            for c in 0..<t { sums[c] += Double(min(v.nearest[i], row[c])) }
        }
    }
}
