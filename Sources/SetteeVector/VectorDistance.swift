/// Distance kernels over `Float` vectors, and each ``DistanceMetric``'s definition.
///
/// The kernels are written for the x86-64 baseline (SSE2, no FMA) and any other target alike: 16 lanes per step
/// (`SIMD16<Float>`, unaligned loads), a scalar tail, and plain `acc += x * y` — never `addProduct`, which becomes a
/// software `fmaf` call where the target has no FMA. Summation order is fixed (lane-wise, then a fixed reduction), so
/// the same inputs always give the same bits.
package enum VectorDistance {
    /// Σ (aᵢ − bᵢ)² over `count` floats (SIMD).
    ///
    /// Contract: `a` and `b` each point at `count` readable floats (any alignment); `count ≥ 0` (0 gives 0).
    package static func euclideanSquared(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, count: Int) -> Float {
        l2Squared(a, b, count)
    }

    /// Σ aᵢbᵢ over `count` floats (SIMD).
    ///
    /// Contract: `a` and `b` each point at `count` readable floats (any alignment); `count ≥ 0` (0 gives 0).
    package static func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, count: Int) -> Float {
        innerProduct(a, b, count)
    }

    /// The distance by metric as Couchbase Lite defines it: `euclideanSquared` Σ(a−b)², `euclidean` its square root,
    /// `cosine` 1 − (a·b)/(|a||b|) (1 when either has zero norm), `dot` −(a·b).
    ///
    /// Contract: `a.count == b.count` (a precondition — check dimensions before calling). Cosine is clamped to
    /// `0...2` so rounding never yields a slightly negative distance for identical directions.
    package static func distance(_ metric: DistanceMetric, _ a: [Float], _ b: [Float]) -> Float {
        precondition(a.count == b.count, "VectorDistance.distance: \(a.count) vs \(b.count) dimensions")
        return a.withUnsafeBufferPointer { pa in
            b.withUnsafeBufferPointer { pb in
                guard let x = pa.baseAddress, let y = pb.baseAddress else { return metric == .cosine ? 1 : 0 }
                let n = a.count
                switch metric {
                case .euclideanSquared:
                    return l2Squared(x, y, n)
                case .euclidean:
                    return l2Squared(x, y, n).squareRoot()
                case .dot:
                    return -innerProduct(x, y, n)
                case .cosine:
                    let normA = innerProduct(x, x, n), normB = innerProduct(y, y, n)
                    guard normA > 0, normB > 0 else { return 1 }
                    let cosine = innerProduct(x, y, n) / (normA.squareRoot() * normB.squareRoot())
                    return min(max(1 - cosine, 0), 2)
                }
            }
        }
    }

    /// Scales `v` to unit length in place (unchanged if its norm is zero or not finite).
    package static func normalize(_ v: inout [Float]) {
        let n = v.count
        v.withUnsafeMutableBufferPointer { buffer in
            guard let p = buffer.baseAddress else { return }
            normalize(p, count: n)
        }
    }

    /// Scales the `count` floats at `v` to unit length in place (unchanged if their norm is zero or not finite).
    ///
    /// Contract: `v` points at `count` writable floats.
    package static func normalize(_ v: UnsafeMutablePointer<Float>, count: Int) {
        let squared = innerProduct(v, v, count)
        guard squared > 0, squared.isFinite else { return }
        let scale = 1 / squared.squareRoot()
        for i in 0..<count { v[i] *= scale }
    }

    /// Σ aᵢ² over `count` floats: the squared norm.
    ///
    /// Contract: `a` points at `count` readable floats.
    package static func squaredNorm(_ a: UnsafePointer<Float>, count: Int) -> Float {
        innerProduct(a, a, count)
    }

    // MARK: - Raw kernels (internal; any alignment)

    /// Σ (aᵢ − bᵢ)² over `n` floats stored at two raw addresses.
    @inline(__always)
    static func l2SquaredRaw(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ n: Int) -> Float {
        var acc = SIMD16<Float>()
        var i = 0
        while i &+ 16 <= n {
            let offset = i &* 4
            let d = a.loadUnaligned(fromByteOffset: offset, as: SIMD16<Float>.self)
                - b.loadUnaligned(fromByteOffset: offset, as: SIMD16<Float>.self)
            acc += d * d
            i &+= 16
        }
        var sum = reduce(acc)
        while i < n {
            let d = a.loadUnaligned(fromByteOffset: i &* 4, as: Float.self)
                - b.loadUnaligned(fromByteOffset: i &* 4, as: Float.self)
            sum += d * d
            i &+= 1
        }
        return sum
    }

    /// Σ aᵢbᵢ over `n` floats stored at two raw addresses.
    @inline(__always)
    static func innerProductRaw(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ n: Int) -> Float {
        var acc = SIMD16<Float>()
        var i = 0
        while i &+ 16 <= n {
            let offset = i &* 4
            acc += a.loadUnaligned(fromByteOffset: offset, as: SIMD16<Float>.self)
                * b.loadUnaligned(fromByteOffset: offset, as: SIMD16<Float>.self)
            i &+= 16
        }
        var sum = reduce(acc)
        while i < n {
            sum += a.loadUnaligned(fromByteOffset: i &* 4, as: Float.self)
                * b.loadUnaligned(fromByteOffset: i &* 4, as: Float.self)
            i &+= 1
        }
        return sum
    }

    @inline(__always)
    static func l2Squared(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ n: Int) -> Float {
        l2SquaredRaw(UnsafeRawPointer(a), UnsafeRawPointer(b), n)
    }

    @inline(__always)
    static func innerProduct(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ n: Int) -> Float {
        innerProductRaw(UnsafeRawPointer(a), UnsafeRawPointer(b), n)
    }

    /// A fixed-order horizontal sum of 16 lanes (pairwise halves), the same everywhere it is used.
    @inline(__always)
    static func reduce(_ v: SIMD16<Float>) -> Float {
        let h8 = v.lowHalf + v.highHalf
        let h4 = h8.lowHalf + h8.highHalf
        let h2 = h4.lowHalf + h4.highHalf
        return h2.x + h2.y
    }

    /// A fixed-order horizontal sum of 4 lanes.
    @inline(__always)
    static func reduce(_ v: SIMD4<Float>) -> Float {
        let h2 = v.lowHalf + v.highHalf
        return h2.x + h2.y
    }
}
