/// A scalar quantizer: each dimension is mapped onto `2^bits` evenly spaced levels between the minimum and maximum
/// that dimension took in a training sample, and stored as the level's index, `bits` per dimension, bit-packed.
///
/// Decoding gives `minᵢ + codeᵢ·stepᵢ` with `stepᵢ = (maxᵢ − minᵢ) / (2^bits − 1)`, so a value inside the trained
/// range comes back within `stepᵢ / 2` (plus float rounding); values outside it are clamped to the range first.
package struct ScalarQuantizer: Sendable, Hashable {
    /// The vector length.
    package let dimensions: Int
    /// Bits per dimension: 4, 6 or 8.
    package let bits: Int
    /// Per dimension: the value level 0 stands for (the training minimum).
    package let minimums: [Float]
    /// Per dimension: the distance between adjacent levels (0 for a dimension that was constant in training).
    package let steps: [Float]

    /// Bytes per encoded vector: ⌈dimensions·bits / 8⌉.
    package var codeSize: Int { BitPacking.byteCount(count: dimensions, bits: bits) }

    /// The highest level, `2^bits − 1`.
    var maxLevel: Int { (1 << bits) - 1 }

    /// Trains per-dimension ranges on `training` (row-major, `count × dimensions`; non-finite values are ignored).
    ///
    /// Contract: `bits` is 4, 6 or 8 and `training.count` is a multiple of `dimensions ≥ 1` (preconditions). A
    /// dimension with no finite training value gets the range [0, 0].
    package init(dimensions: Int, bits: Int, training: UnsafeBufferPointer<Float>) {
        precondition(dimensions >= 1 && VectorEncoding.scalarQuantizerBits.contains(bits),
                     "ScalarQuantizer: bits must be 4, 6 or 8")
        precondition(training.count % dimensions == 0, "ScalarQuantizer: training is not a whole number of vectors")
        var low = [Float](repeating: .infinity, count: dimensions)
        var high = [Float](repeating: -.infinity, count: dimensions)
        for row in 0..<training.count / dimensions {
            for t in 0..<dimensions {
                let value = training[row * dimensions + t]
                guard value.isFinite else { continue }
                if value < low[t] { low[t] = value }
                if value > high[t] { high[t] = value }
            }
        }
        let levels = Float((1 << bits) - 1)
        var steps = [Float](repeating: 0, count: dimensions)
        for t in 0..<dimensions {
            if low[t] > high[t] {
                low[t] = 0
                high[t] = 0
            }
            steps[t] = (high[t] - low[t]) / levels
            if !steps[t].isFinite { steps[t] = .greatestFiniteMagnitude / levels }
        }
        self.init(dimensions: dimensions, bits: bits, minimums: low, steps: steps)
    }

    /// A quantizer with explicit ranges, e.g. restored from ``IVFIndex/parameters()``.
    ///
    /// Contract: `bits` is 4, 6 or 8; `minimums` and `steps` have `dimensions` finite entries, steps ≥ 0
    /// (preconditions — validate untrusted input first).
    package init(dimensions: Int, bits: Int, minimums: [Float], steps: [Float]) {
        precondition(dimensions >= 1 && VectorEncoding.scalarQuantizerBits.contains(bits),
                     "ScalarQuantizer: bits must be 4, 6 or 8")
        precondition(minimums.count == dimensions && steps.count == dimensions, "ScalarQuantizer: range count")
        self.dimensions = dimensions
        self.bits = bits
        self.minimums = minimums
        self.steps = steps
    }

    /// The level for `value` in dimension `t`: round((value − min)/step), clamped to the levels (NaN → 0).
    @inline(__always)
    func level(_ value: Float, _ t: Int) -> Int {
        let step = steps[t]
        guard step > 0 else { return 0 }
        let scaled = ((value - minimums[t]) / step).rounded()
        let top = Float(maxLevel)
        return scaled >= 0 ? (scaled <= top ? Int(scaled) : maxLevel) : 0
    }

    /// Encodes the `dimensions` floats at `v` into `codeSize` bytes at `code`.
    package func encode(_ v: UnsafePointer<Float>, into code: UnsafeMutablePointer<UInt8>) {
        if bits == 8 {
            for t in 0..<dimensions { code[t] = UInt8(truncatingIfNeeded: level(v[t], t)) }
            return
        }
        code.update(repeating: 0, count: codeSize)
        for t in 0..<dimensions { BitPacking.write(level(v[t], t), into: code, index: t, bits: bits) }
    }

    /// Decodes `codeSize` bytes at `code` into `dimensions` floats at `v`: `minᵢ + codeᵢ·stepᵢ`.
    package func decode(_ code: UnsafePointer<UInt8>, into v: UnsafeMutablePointer<Float>) {
        levels(code, into: v)
        for t in 0..<dimensions { v[t] = minimums[t] + v[t] * steps[t] }
    }

    /// The raw levels of a code as floats (natural dimension order).
    @inline(__always)
    func levels(_ code: UnsafePointer<UInt8>, into out: UnsafeMutablePointer<Float>) {
        switch bits {
        case 8:
            for t in 0..<dimensions { out[t] = Float(code[t]) }
        case 4:
            for t in 0..<dimensions { out[t] = Float((code[t >> 1] >> UInt8((t & 1) << 2)) & 0x0F) }
        default:
            for t in 0..<dimensions { out[t] = Float(BitPacking.read(code, index: t, bits: bits)) }
        }
    }

    /// Σ (stepᵢ·codeᵢ)² over each 32-dimension stage of ``CodeScan``: the code-only terms of the expanded squared
    /// distance, which the index stores per entry (⌈dimensions / 32⌉ floats).
    func stageTerms(_ code: UnsafePointer<UInt8>) -> [Float] {
        var terms = [Float](repeating: 0, count: CodeScan.stageCount(dimensions))
        withUnsafeTemporaryAllocation(of: Float.self, capacity: dimensions) { buffer in
            let values = buffer.baseAddress!
            levels(code, into: values)
            for t in 0..<dimensions {
                let scaled = values[t] * steps[t]
                terms[t / CodeScan.stage] += scaled * scaled
            }
        }
        return terms
    }
}
