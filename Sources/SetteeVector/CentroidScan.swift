/// Blocked point-to-centroid kernels: the GEMM-like inner loop of k-means, of assigning vectors to IVF lists and of
/// ranking lists for a query.
///
/// Every kernel computes each point·centroid dot product the same way — four-lane partial sums over whole groups of
/// four floats, a fixed reduction, then the leftover floats in order — so a pair's value is bit-identical whichever
/// kernel (4 points × 2 centroids, 1 × 4, 1 × 1) computed it. Scores are `norms[j] − 2·(x·cⱼ)`: the squared L2
/// distance minus ‖x‖² when `norms` holds ‖cⱼ‖², or −2·(x·cⱼ) (maximum inner product first) when it holds zeros.
enum CentroidScan {
    /// The per-pair tail: Σ a[i]·b[i] for i in `from..<d`, in order.
    @inline(__always)
    static func tail(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, from: Int, _ d: Int) -> Float {
        var s: Float = 0
        var i = from
        while i < d {
            s += a[i] * b[i]
            i &+= 1
        }
        return s
    }

    @inline(__always)
    static func load4(_ p: UnsafePointer<Float>, _ i: Int) -> SIMD4<Float> {
        UnsafeRawPointer(p + i).loadUnaligned(as: SIMD4<Float>.self)
    }

    /// x·c for one pair, computed exactly as the blocked kernels compute each of theirs.
    @inline(__always)
    static func dot1x1(_ x: UnsafePointer<Float>, _ c: UnsafePointer<Float>, _ d: Int) -> Float {
        var acc = SIMD4<Float>()
        var i = 0
        while i &+ 4 <= d {
            acc += load4(x, i) * load4(c, i)
            i &+= 4
        }
        return VectorDistance.reduce(acc) + tail(x, c, from: i, d)
    }

    /// x·c₀ … x·c₃ for one point and four centroids (each pair as ``dot1x1(_:_:_:)`` computes it).
    @inline(__always)
    static func dot1x4(_ x: UnsafePointer<Float>, _ c0: UnsafePointer<Float>, _ c1: UnsafePointer<Float>,
                       _ c2: UnsafePointer<Float>, _ c3: UnsafePointer<Float>, _ d: Int) -> SIMD4<Float> {
        var a0 = SIMD4<Float>(), a1 = SIMD4<Float>(), a2 = SIMD4<Float>(), a3 = SIMD4<Float>()
        var i = 0
        while i &+ 4 <= d {
            let v = load4(x, i)
            a0 += v * load4(c0, i)
            a1 += v * load4(c1, i)
            a2 += v * load4(c2, i)
            a3 += v * load4(c3, i)
            i &+= 4
        }
        typealias R = VectorDistance
        return SIMD4(R.reduce(a0) + tail(x, c0, from: i, d), R.reduce(a1) + tail(x, c1, from: i, d),
                     R.reduce(a2) + tail(x, c2, from: i, d), R.reduce(a3) + tail(x, c3, from: i, d))
    }

    /// The eight dot products of four points with two centroids, as `[x₀c₀, x₀c₁, x₁c₀, x₁c₁, …]`.
    @inline(__always)
    static func dot4x2(_ x0: UnsafePointer<Float>, _ x1: UnsafePointer<Float>, _ x2: UnsafePointer<Float>,
                       _ x3: UnsafePointer<Float>, _ c0: UnsafePointer<Float>, _ c1: UnsafePointer<Float>,
                       _ d: Int) -> SIMD8<Float> {
        var a00 = SIMD4<Float>(), a01 = SIMD4<Float>(), a10 = SIMD4<Float>(), a11 = SIMD4<Float>()
        var a20 = SIMD4<Float>(), a21 = SIMD4<Float>(), a30 = SIMD4<Float>(), a31 = SIMD4<Float>()
        var i = 0
        while i &+ 4 <= d {
            let v0 = load4(c0, i), v1 = load4(c1, i)
            let p0 = load4(x0, i)
            a00 += p0 * v0
            a01 += p0 * v1
            let p1 = load4(x1, i)
            a10 += p1 * v0
            a11 += p1 * v1
            let p2 = load4(x2, i)
            a20 += p2 * v0
            a21 += p2 * v1
            let p3 = load4(x3, i)
            a30 += p3 * v0
            a31 += p3 * v1
            i &+= 4
        }
        typealias R = VectorDistance
        return SIMD8(R.reduce(a00) + tail(x0, c0, from: i, d), R.reduce(a01) + tail(x0, c1, from: i, d),
                     R.reduce(a10) + tail(x1, c0, from: i, d), R.reduce(a11) + tail(x1, c1, from: i, d),
                     R.reduce(a20) + tail(x2, c0, from: i, d), R.reduce(a21) + tail(x2, c1, from: i, d),
                     R.reduce(a30) + tail(x3, c0, from: i, d), R.reduce(a31) + tail(x3, c1, from: i, d))
    }

    /// The score of every centroid for one point: `scores[j] = norms[j] − 2·(x·cⱼ)`.
    static func scores(_ x: UnsafePointer<Float>, centroids: UnsafePointer<Float>, norms: UnsafePointer<Float>,
                       k: Int, d: Int, into scores: UnsafeMutablePointer<Float>) {
        var j = 0
        while j &+ 4 <= k {
            let c = centroids + j &* d
            let dots = dot1x4(x, c, c + d, c + 2 &* d, c + 3 &* d, d)
            let n = UnsafeRawPointer(norms + j).loadUnaligned(as: SIMD4<Float>.self)
            UnsafeMutableRawPointer(scores + j).storeBytes(of: n - 2 * dots, as: SIMD4<Float>.self)
            j &+= 4
        }
        while j < k {
            scores[j] = norms[j] - 2 * dot1x1(x, centroids + j &* d, d)
            j &+= 1
        }
    }

    /// The best-scoring centroid for one point (lowest index on ties).
    static func nearest(_ x: UnsafePointer<Float>, centroids: UnsafePointer<Float>, norms: UnsafePointer<Float>,
                        k: Int, d: Int) -> Int {
        withUnsafeTemporaryAllocation(of: Float.self, capacity: k) { buffer in
            let s = buffer.baseAddress!
            scores(x, centroids: centroids, norms: norms, k: k, d: d, into: s)
            var best = 0
            for j in 1..<max(k, 1) where s[j] < s[best] { best = j }
            return best
        }
    }

    /// For `count` points (rows of `data` named by `rows`), the best and second-best centroid scores and the best
    /// centroid's index (lowest index on ties; −1 only when every score is NaN), four points × two centroids at a
    /// time. Requires `k ≥ 1`.
    static func nearestTwo(data: UnsafePointer<Float>, rows: UnsafePointer<Int32>, count: Int, d: Int,
                           centroids: UnsafePointer<Float>, norms: UnsafePointer<Float>, k: Int,
                           best: UnsafeMutablePointer<Int32>, bestScore: UnsafeMutablePointer<Float>,
                           secondScore: UnsafeMutablePointer<Float>) {
        var g0 = 0
        while g0 < count {
            let last = count &- 1
            let r0 = Int(rows[g0]), r1 = Int(rows[min(g0 &+ 1, last)])
            let r2 = Int(rows[min(g0 &+ 2, last)]), r3 = Int(rows[min(g0 &+ 3, last)])
            let x0 = data + r0 &* d, x1 = data + r1 &* d, x2 = data + r2 &* d, x3 = data + r3 &* d
            var b = SIMD4<Float>(repeating: .infinity), s = SIMD4<Float>(repeating: .infinity)
            var bi = SIMD4<Int32>(repeating: -1)
            var j = 0
            while j < k {
                let j1 = min(j &+ 1, k &- 1)
                let dots = dot4x2(x0, x1, x2, x3, centroids + j &* d, centroids + j1 &* d, d)
                update(&b, &s, &bi, SIMD4(repeating: norms[j]) - 2 * SIMD4(dots[0], dots[2], dots[4], dots[6]),
                       Int32(j))
                if j1 != j {
                    update(&b, &s, &bi, SIMD4(repeating: norms[j1]) - 2 * SIMD4(dots[1], dots[3], dots[5], dots[7]),
                           Int32(j1))
                }
                j &+= 2
            }
            for p in 0..<min(4, count &- g0) {
                best[g0 &+ p] = bi[p]
                bestScore[g0 &+ p] = b[p]
                secondScore[g0 &+ p] = s[p]
            }
            g0 &+= 4
        }
    }

    /// For `count` points (rows of `data` named by `rows`), the `m` best-scoring centroids of all `k`, best first
    /// (ties to the lower index), four points × two centroids at a time. Outputs are indexed `p * m + r` for the
    /// `p`-th row's `r`-th best. Requires `1 ≤ m ≤ k`.
    static func nearestM(data: UnsafePointer<Float>, rows: UnsafePointer<Int32>, count: Int, d: Int,
                         centroids: UnsafePointer<Float>, norms: UnsafePointer<Float>, k: Int, m: Int,
                         indices: UnsafeMutablePointer<Int32>, scores: UnsafeMutablePointer<Float>) {
        var g0 = 0
        while g0 < count {
            let last = count &- 1
            let r0 = Int(rows[g0]), r1 = Int(rows[min(g0 &+ 1, last)])
            let r2 = Int(rows[min(g0 &+ 2, last)]), r3 = Int(rows[min(g0 &+ 3, last)])
            let x0 = data + r0 &* d, x1 = data + r1 &* d, x2 = data + r2 &* d, x3 = data + r3 &* d
            let lanes = min(4, count &- g0)
            withUnsafeTemporaryAllocation(of: Float.self, capacity: 4 &* m) { sb in
                withUnsafeTemporaryAllocation(of: Int32.self, capacity: 4 &* m) { ib in
                    let s = sb.baseAddress!, ix = ib.baseAddress!
                    s.initialize(repeating: .infinity, count: 4 &* m)
                    ix.initialize(repeating: -1, count: 4 &* m)
                    var worst = SIMD4<Float>(repeating: .infinity)
                    @inline(__always) func offer(_ lane: Int, _ score: Float, _ j: Int) {
                        // Insertion into the lane's sorted list; equal scores keep the earlier (lower) index first.
                        let list = s + lane &* m, ids = ix + lane &* m
                        var at = m &- 1
                        while at > 0 && score < list[at &- 1] {
                            list[at] = list[at &- 1]
                            ids[at] = ids[at &- 1]
                            at &-= 1
                        }
                        list[at] = score
                        ids[at] = Int32(j)
                        worst[lane] = list[m &- 1]
                    }
                    var j = 0
                    while j < k {
                        let j1 = min(j &+ 1, k &- 1)
                        let dots = dot4x2(x0, x1, x2, x3, centroids + j &* d, centroids + j1 &* d, d)
                        let first = SIMD4(repeating: norms[j]) - 2 * SIMD4(dots[0], dots[2], dots[4], dots[6])
                        let second = SIMD4(repeating: norms[j1]) - 2 * SIMD4(dots[1], dots[3], dots[5], dots[7])
                        if any(first .< worst) {
                            for lane in 0..<4 where first[lane] < worst[lane] { offer(lane, first[lane], j) }
                        }
                        if j1 != j, any(second .< worst) {
                            for lane in 0..<4 where second[lane] < worst[lane] { offer(lane, second[lane], j1) }
                        }
                        j &+= 2
                    }
                    for p in 0..<lanes {
                        (indices + (g0 &+ p) &* m).update(from: ix + p &* m, count: m)
                        (scores + (g0 &+ p) &* m).update(from: s + p &* m, count: m)
                    }
                }
            }
            g0 &+= 4
        }
    }

    /// Folds one centroid's scores (one per point lane) into the running best / second-best.
    @inline(__always)
    static func update(_ best: inout SIMD4<Float>, _ second: inout SIMD4<Float>, _ index: inout SIMD4<Int32>,
                       _ score: SIMD4<Float>, _ j: Int32) {
        let better = score .< best
        let secondBetter = score .< second
        second.replace(with: best, where: better)
        second.replace(with: score, where: secondBetter .& .!better)
        best.replace(with: score, where: better)
        index.replace(with: SIMD4(repeating: j), where: better)
    }
}
