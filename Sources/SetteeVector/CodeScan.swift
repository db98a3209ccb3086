/// Scoring kernels over stored codes, used by ``IVFIndex`` when it scans a list. Smaller scores are nearer.
///
/// The squared-L2 kernels are *staged*: they add up the distance 32 dimensions at a time and give up on an entry as
/// soon as the partial sum passes a limit (the current k-th best), since the rest can only add to it. In a probed
/// list most entries belong to other clusters and are abandoned after the first stage, so a scan reads and
/// computes a fraction of each code. With an infinite limit every kernel computes the full score in the same order,
/// so a score never depends on whether it was computed during a search or for ``IVFIndex/distance(_:to:)``.
///
/// The scalar-quantizer kernels use the expanded form ‖q − x̂‖² = ‖q − min‖² − 2 Σ wᵢ·codeᵢ + Σ (stepᵢ·codeᵢ)²,
/// with `w = (q − min)∘step` prepared once per query and the last term stored per entry and stage, so the inner loop
/// is a dot product of the codes with per-query weights — 16-bit integer weights for 8-bit codes (``dot8``).
enum CodeScan {
    /// Dimensions per stage of the staged kernels (a multiple of 16).
    static let stage = 32

    /// Stages for `d` dimensions: ⌈d / 32⌉.
    @inline(__always)
    static func stageCount(_ d: Int) -> Int { (d + stage - 1) / stage }

    /// Σ (qᵢ − xᵢ)² over `d` raw floats, stage by stage; returns (some value above `limit`) as soon as a partial sum
    /// exceeds `limit`. Partial sums of squares never decrease, so an abandoned entry's full score exceeds `limit`.
    @inline(__always)
    static func rawL2(_ query: UnsafeRawPointer, _ code: UnsafeRawPointer, d: Int, limit: Float) -> Float {
        var total: Float = 0
        var start = 0
        while start < d {
            total += VectorDistance.l2SquaredRaw(query + start &* 4, code + start &* 4, min(stage, d &- start))
            if total > limit { return total }
            start &+= stage
        }
        return total
    }

    /// −Σ qᵢxᵢ over `d` raw floats.
    @inline(__always)
    static func rawNegativeDot(_ query: UnsafeRawPointer, _ code: UnsafeRawPointer, d: Int) -> Float {
        -VectorDistance.innerProductRaw(query, code, d)
    }

    /// Σ wᵢ·codeᵢ over `blocks × 16` 8-bit codes with 16-bit integer weights, exactly, in Int32 (at most two blocks
    /// per call keeps every sum far inside Int32).
    ///
    /// Written so LLVM emits SSE2's `pmaddwd`: bytes widen to 16 bits and each pair of adjacent products is summed
    /// into one 32-bit lane — six vector instructions per 16 dimensions, against 18 for a float kernel.
    @inline(__always)
    static func dot8(_ code: UnsafeRawPointer, _ weights: UnsafeRawPointer, blocks: Int) -> Int32 {
        var acc0 = SIMD4<Int32>(), acc1 = SIMD4<Int32>()
        var offset = 0
        for _ in 0..<blocks {
            let bytes = code.loadUnaligned(fromByteOffset: offset, as: SIMD16<UInt8>.self)
            let w0 = SIMD8<Int32>(truncatingIfNeeded: weights.loadUnaligned(fromByteOffset: offset &* 2,
                                                                            as: SIMD8<Int16>.self))
            let w1 = SIMD8<Int32>(truncatingIfNeeded: weights.loadUnaligned(fromByteOffset: offset &* 2 &+ 16,
                                                                            as: SIMD8<Int16>.self))
            let p0 = SIMD8<Int32>(truncatingIfNeeded: bytes.lowHalf) &* w0
            let p1 = SIMD8<Int32>(truncatingIfNeeded: bytes.highHalf) &* w1
            acc0 &+= p0.evenHalf &+ p0.oddHalf
            acc1 &+= p1.evenHalf &+ p1.oddHalf
            offset &+= 16
        }
        return (acc0 &+ acc1).wrappedSum()
    }

    /// Σ wᵢ·codeᵢ over the dimensions `start..<end` of one 8-bit code (one stage): whole 16-dimension blocks with
    /// the integer weights, the rest with the float weights.
    @inline(__always)
    static func stageDot8(_ code: UnsafeRawPointer, _ weights: SQ8Weights.Pointers, start: Int, end: Int) -> Float {
        let blocks = (end &- start) >> 4
        var dot = Float(dot8(code + start, weights.integers + start &* 2, blocks: blocks)) * weights.unscale
        var t = start &+ blocks &* 16
        while t < end {
            dot += Float(code.load(fromByteOffset: t, as: UInt8.self)) * weights.floats[t]
            t &+= 1
        }
        return dot
    }

    /// The staged squared L2 of one 8-bit code: per stage `qq[s] − 2·(w·code) + terms[s]`, stopping once the sum
    /// passes `limit`. Each stage's value is a squared distance up to float rounding, so the caller's limit carries
    /// a small margin (see ``QueryScanner``).
    ///
    /// `from` resumes after the first `from` whole stages whose sum is `total` (see ``sq8FirstStage4``).
    @inline(__always)
    static func sq8L2(_ code: UnsafeRawPointer, _ weights: SQ8Weights.Pointers, stageNorms: UnsafePointer<Float>,
                      terms: UnsafePointer<Float>, d: Int, limit: Float, from: Int = 0,
                      total initial: Float = 0) -> Float {
        var total = initial
        var s = from, start = from &* stage
        // Whole stages: two integer blocks each, unrolled.
        while start &+ stage <= d {
            let dot = Float(dot8(code + start, weights.integers + start &* 2, blocks: 2)) * weights.unscale
            total += stageNorms[s] - 2 * dot + terms[s]
            if total > limit { return total }
            start &+= stage
            s &+= 1
        }
        if start < d {
            total += stageNorms[s] - 2 * stageDot8(code, weights, start: start, end: d) + terms[s]
        }
        return total
    }

    /// The first whole stage of four consecutive 8-bit codes (`stride` bytes apart, terms `stages` floats apart),
    /// computed side by side — exactly as ``sq8L2(_:_:stageNorms:terms:d:limit:from:total:)`` computes each —
    /// so one comparison can abandon all four. Requires `d ≥ 32`.
    @inline(__always)
    static func sq8FirstStage4(_ codes: UnsafeRawPointer, stride: Int, _ weights: SQ8Weights.Pointers,
                               stageNorm: Float, terms: UnsafePointer<Float>, stages: Int) -> SIMD4<Float> {
        let dots = SIMD4<Int32>(dot8(codes, weights.integers, blocks: 2),
                                dot8(codes + stride, weights.integers, blocks: 2),
                                dot8(codes + 2 &* stride, weights.integers, blocks: 2),
                                dot8(codes + 3 &* stride, weights.integers, blocks: 2))
        let scaled = SIMD4<Float>(dots) * weights.unscale
        let stageTerms = SIMD4(terms[0], terms[stages], terms[2 &* stages], terms[3 &* stages])
        return SIMD4(repeating: 0) + ((SIMD4(repeating: stageNorm) - 2 * scaled) + stageTerms)
    }

    /// Σ wᵢ·codeᵢ over a whole 8-bit code, summed stage by stage.
    @inline(__always)
    static func sq8Dot(_ code: UnsafeRawPointer, _ weights: SQ8Weights.Pointers, d: Int) -> Float {
        var total: Float = 0
        var start = 0
        while start < d {
            let end = min(d, start &+ stage)
            total += stageDot8(code, weights, start: start, end: end)
            start = end
        }
        return total
    }
}

/// A query's scalar-quantizer weights prepared for the 8-bit kernels: the dimensions in whole 16-dimension blocks as
/// 16-bit integers scaled to use the full range, all of them as floats (used for any trailing dimensions).
///
/// Rounding each weight to 1/32767 of the largest one perturbs a score by far less than the 8-bit codes' own
/// rounding, so rankings are unaffected in practice.
struct SQ8Weights {
    /// `round(wᵢ · scale)` for the dimensions in whole blocks of 16 (zero elsewhere).
    let integers: [Int16]
    /// The float weights.
    let floats: [Float]
    /// 1 / scale.
    let unscale: Float

    /// Raw views of the weights for the kernels, valid inside ``withPointers(_:)``.
    struct Pointers {
        let integers: UnsafeRawPointer
        let floats: UnsafePointer<Float>
        let unscale: Float
    }

    init(_ weights: [Float]) {
        let d = weights.count, head = d / 16 * 16
        var largest: Float = 0
        for t in 0..<head { largest = max(largest, abs(weights[t])) }
        let limit: Float = 32767
        let scale = largest > 0 && largest.isFinite ? limit / largest : 0
        var integers = [Int16](repeating: 0, count: max(d, 1))
        for t in 0..<head {
            let scaled = (weights[t] * scale).rounded()
            integers[t] = Int16(scaled >= -limit ? (scaled <= limit ? scaled : limit) : -limit)
        }
        self.integers = integers
        floats = weights
        unscale = scale > 0 ? 1 / scale : 0
    }

    func withPointers<R>(_ body: (Pointers) -> R) -> R {
        integers.withUnsafeBytes { ib in
            floats.withUnsafeBufferPointer { fb in
                body(Pointers(integers: ib.baseAddress!, floats: fb.baseAddress ?? UnsafePointer(bitPattern: 16)!,
                              unscale: unscale))
            }
        }
    }
}
