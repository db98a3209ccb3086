/// A product quantizer: the vector is cut into `subquantizers` equal slices and each slice is replaced by the index
/// of the nearest of `2^bits` centroids learned for that slice by k-means; the indices are bit-packed.
///
/// Distances are asymmetric: the query stays exact and is compared with each slice's centroids once, into a table;
/// a stored vector's distance is then the sum of one table entry per slice.
package struct ProductQuantizer: Sendable, Hashable {
    /// The vector length.
    package let dimensions: Int
    /// How many slices (subspaces) the vector is cut into; divides `dimensions`.
    package let subquantizers: Int
    /// Bits per slice index: each slice has `2^bits` centroids (4…12).
    package let bits: Int
    /// The codebooks, `subquantizers × 2^bits × (dimensions / subquantizers)` floats: slice-major, then centroid.
    package let centroids: [Float]
    /// ‖c‖² of every codebook centroid (derived from `centroids`).
    let centroidNorms: [Float]

    /// Floats per slice.
    package var subDimensions: Int { dimensions / subquantizers }
    /// Centroids per slice, `2^bits`.
    package var centroidsPerSubquantizer: Int { 1 << bits }
    /// Bytes per encoded vector: ⌈subquantizers·bits / 8⌉.
    package var codeSize: Int { BitPacking.byteCount(count: subquantizers, bits: bits) }

    /// Learns the codebooks from `training` (row-major, `count × dimensions`) with one ``KMeans`` run per slice
    /// (seeded with random training slices rather than k-means++, as Faiss does).
    ///
    /// Contract: a valid configuration (`subquantizers` divides `dimensions`, `bits` in 4…12) and `training.count`
    /// a multiple of `dimensions` (preconditions). With fewer training vectors than `2^bits` the codebooks repeat
    /// the training slices. Deterministic for `seed`; `parallel` as in
    /// ``KMeans/train(_:dimensions:k:iterations:seed:parallel:)``.
    package init(dimensions: Int, subquantizers: Int, bits: Int, training: UnsafeBufferPointer<Float>,
                iterations: Int = 10, seed: UInt64 = 0x5E77EE, parallel: ParallelFor = ParallelLoop.serial) {
        precondition((try? VectorEncoding.productQuantizer(subquantizers: subquantizers, bits: bits)
            .validate(dimensions: dimensions)) != nil, "ProductQuantizer: invalid configuration")
        precondition(training.count % dimensions == 0, "ProductQuantizer: training is not a whole number of vectors")
        let sub = dimensions / subquantizers, ksub = 1 << bits, n = training.count / dimensions
        var codebooks = [Float]()
        codebooks.reserveCapacity(subquantizers * ksub * sub)
        var slice = [Float](repeating: 0, count: n * sub)
        var rng = SplitMix64(seed: seed)
        for s in 0..<subquantizers {
            for row in 0..<n {
                for t in 0..<sub { slice[row * sub + t] = training[row * dimensions + s * sub + t] }
            }
            let seedForSlice = rng.next()
            let book = slice.withUnsafeBufferPointer {
                KMeans.train($0, dimensions: sub, k: ksub, iterations: iterations, seed: seedForSlice,
                             randomSeeds: true, parallel: parallel)
            }
            codebooks.append(contentsOf: book)
        }
        self.init(dimensions: dimensions, subquantizers: subquantizers, bits: bits, centroids: codebooks)
    }

    /// A quantizer with explicit codebooks, e.g. restored from ``IVFIndex/parameters()``.
    ///
    /// Contract: a valid configuration and `centroids.count == subquantizers · 2^bits · dimensions/subquantizers`
    /// (preconditions — validate untrusted input first).
    package init(dimensions: Int, subquantizers: Int, bits: Int, centroids: [Float]) {
        precondition(subquantizers >= 1 && dimensions % subquantizers == 0
            && VectorEncoding.productQuantizerBits.contains(bits), "ProductQuantizer: invalid configuration")
        precondition(centroids.count == dimensions << bits, "ProductQuantizer: codebook size")
        self.dimensions = dimensions
        self.subquantizers = subquantizers
        self.bits = bits
        self.centroids = centroids
        let sub = dimensions / subquantizers
        centroidNorms = centroids.withUnsafeBufferPointer {
            KMeans.squaredNorms($0.baseAddress!, count: centroids.count / sub, d: sub)
        }
    }

    /// Encodes the `dimensions` floats at `v` into `codeSize` bytes at `code`: per slice, the nearest centroid.
    package func encode(_ v: UnsafePointer<Float>, into code: UnsafeMutablePointer<UInt8>) {
        let sub = subDimensions, ksub = centroidsPerSubquantizer
        code.update(repeating: 0, count: codeSize)
        centroids.withUnsafeBufferPointer { cb in
            centroidNorms.withUnsafeBufferPointer { nb in
                for s in 0..<subquantizers {
                    let nearest = CentroidScan.nearest(v + s * sub, centroids: cb.baseAddress! + s * ksub * sub,
                                                       norms: nb.baseAddress! + s * ksub, k: ksub, d: sub)
                    BitPacking.write(nearest, into: code, index: s, bits: bits)
                }
            }
        }
    }

    /// Decodes `codeSize` bytes at `code` into `dimensions` floats at `v`: the chosen centroid of every slice.
    package func decode(_ code: UnsafePointer<UInt8>, into v: UnsafeMutablePointer<Float>) {
        let sub = subDimensions, ksub = centroidsPerSubquantizer
        centroids.withUnsafeBufferPointer { cb in
            for s in 0..<subquantizers {
                let j = index(code, s)
                (v + s * sub).update(from: cb.baseAddress! + (s * ksub + j) * sub, count: sub)
            }
        }
    }

    /// Slice `s`'s centroid index in a code.
    @inline(__always)
    func index(_ code: UnsafePointer<UInt8>, _ s: Int) -> Int {
        bits == 8 ? Int(code[s]) : BitPacking.read(code, index: s, bits: bits)
    }

    /// The asymmetric distance table for `query` (`dimensions` floats): entry `s·2^bits + j` is
    /// ‖query_s − c_sj‖² when `innerProduct` is false, or query_s·c_sj when it is true.
    func table(_ query: UnsafePointer<Float>, innerProduct: Bool) -> [Float] {
        let sub = subDimensions, ksub = centroidsPerSubquantizer
        var out = [Float](repeating: 0, count: subquantizers * ksub)
        let zeros = innerProduct ? [Float](repeating: 0, count: ksub) : []
        centroids.withUnsafeBufferPointer { cb in
            centroidNorms.withUnsafeBufferPointer { nb in
                zeros.withUnsafeBufferPointer { zb in
                    out.withUnsafeMutableBufferPointer { ob in
                        for s in 0..<subquantizers {
                            let q = query + s * sub, row = ob.baseAddress! + s * ksub
                            let norms = innerProduct ? zb.baseAddress! : nb.baseAddress! + s * ksub
                            CentroidScan.scores(q, centroids: cb.baseAddress! + s * ksub * sub, norms: norms,
                                                k: ksub, d: sub, into: row)
                            if innerProduct {
                                for j in 0..<ksub { row[j] *= -0.5 }
                            } else {
                                let qq = VectorDistance.innerProduct(q, q, sub)
                                for j in 0..<ksub { row[j] = max(0, row[j] + qq) }
                            }
                        }
                    }
                }
            }
        }
        return out
    }

    /// Σ over slices of `table[s·2^bits + codeₛ]` for one code.
    @inline(__always)
    func lookup(_ code: UnsafePointer<UInt8>, table: UnsafePointer<Float>) -> Float {
        let ksub = centroidsPerSubquantizer
        var sum: Float = 0
        if bits == 8 {
            for s in 0..<subquantizers { sum += table[s &* 256 &+ Int(code[s])] }
        } else {
            for s in 0..<subquantizers { sum += table[s &* ksub &+ BitPacking.read(code, index: s, bits: bits)] }
        }
        return sum
    }
}
