import Testing
@testable import SetteeVector

@Suite struct QuantizerTests {
    @Test(arguments: [4, 6, 8])
    func scalarQuantizerRoundTripIsWithinHalfAStep(bits: Int) {
        let d = 37, n = 200
        let data = TestData.uniform(count: n, dimensions: d, seed: UInt64(bits))
        let sq = data.withUnsafeBufferPointer { ScalarQuantizer(dimensions: d, bits: bits, training: $0) }
        #expect(sq.codeSize == (d * bits + 7) / 8)
        var code = [UInt8](repeating: 0, count: sq.codeSize)
        var decoded = [Float](repeating: 0, count: d)
        for row in 0..<n {
            data.withUnsafeBufferPointer { sq.encode($0.baseAddress! + row * d, into: &code) }
            sq.decode(code, into: &decoded)
            for t in 0..<d {
                let error = abs(decoded[t] - data[row * d + t])
                #expect(error <= sq.steps[t] / 2 * 1.0001 + 1e-6, "bits \(bits) row \(row) dim \(t)")
            }
        }
    }

    @Test func scalarQuantizerLevelsSpanTheTrainingRange() {
        let data: [Float] = [0, -1, 7, 10, 1, 7]  // two 3-d rows
        let sq = data.withUnsafeBufferPointer { ScalarQuantizer(dimensions: 3, bits: 8, training: $0) }
        #expect(sq.minimums == [0, -1, 7])
        #expect(sq.steps[0] == 10 / 255 && sq.steps[1] == 2 / 255 && sq.steps[2] == 0)
        var code = [UInt8](repeating: 0, count: 3)
        sq.encode([10, 1, 42], into: &code)
        #expect(code == [255, 255, 0])  // the constant dimension always encodes as level 0
        sq.encode([-100, 100, .nan], into: &code)
        #expect(code == [0, 255, 0])  // out of range clamps; NaN is level 0
    }

    @Test func scalarQuantizerPacksFourAndSixBitCodes() {
        let data = TestData.uniform(count: 50, dimensions: 5, seed: 9)
        for bits in [4, 6] {
            let sq = data.withUnsafeBufferPointer { ScalarQuantizer(dimensions: 5, bits: bits, training: $0) }
            var code = [UInt8](repeating: 0, count: sq.codeSize)
            sq.encode(Array(data[0..<5]), into: &code)
            var levels = [Float](repeating: 0, count: 5)
            sq.levels(code, into: &levels)
            for t in 0..<5 {
                #expect(Int(levels[t]) == sq.level(data[t], t))
                #expect(levels[t] >= 0 && levels[t] <= Float((1 << bits) - 1))
            }
        }
    }

    @Test func bitPackingRoundTripsEveryWidth() {
        var rng = SplitMix64(seed: 4)
        for bits in 1...16 {
            let values = (0..<23).map { _ in rng.nextIndex(below: 1 << bits) }
            var code = [UInt8](repeating: 0, count: BitPacking.byteCount(count: 23, bits: bits))
            for (i, v) in values.enumerated() { BitPacking.write(v, into: &code, index: i, bits: bits) }
            for (i, v) in values.enumerated() { #expect(BitPacking.read(code, index: i, bits: bits) == v) }
        }
    }

    @Test func productQuantizerReconstructionErrorIsWellBelowTheVariance() {
        let d = 16, n = 1000
        let (data, _, _) = TestData.clustered(count: n, dimensions: d, clusters: 20, spread: 1, seed: 21)
        let pq = data.withUnsafeBufferPointer {
            ProductQuantizer(dimensions: d, subquantizers: 4, bits: 5, training: $0, iterations: 6, seed: 1)
        }
        #expect(pq.codeSize == 3)
        #expect(pq.centroids.count == 4 * 32 * 4)
        var mean = [Double](repeating: 0, count: d)
        for i in 0..<n { for t in 0..<d { mean[t] += Double(data[i * d + t]) / Double(n) } }
        var variance = 0.0, error = 0.0
        var code = [UInt8](repeating: 0, count: pq.codeSize)
        var decoded = [Float](repeating: 0, count: d)
        for i in 0..<n {
            data.withUnsafeBufferPointer { pq.encode($0.baseAddress! + i * d, into: &code) }
            pq.decode(code, into: &decoded)
            for t in 0..<d {
                variance += pow2(Double(data[i * d + t]) - mean[t])
                error += pow2(Double(decoded[t] - data[i * d + t]))
            }
        }
        #expect(error < variance * 0.1, "error \(error), variance \(variance)")
    }

    @Test func productQuantizerTablesMatchDecodedDistances() {
        let d = 12
        let data = TestData.uniform(count: 300, dimensions: d, seed: 8)
        let pq = data.withUnsafeBufferPointer {
            ProductQuantizer(dimensions: d, subquantizers: 3, bits: 5, training: $0, iterations: 4, seed: 2)
        }
        let query = TestData.uniform(count: 1, dimensions: d, seed: 99)
        let l2Table = query.withUnsafeBufferPointer { pq.table($0.baseAddress!, innerProduct: false) }
        let dotTable = query.withUnsafeBufferPointer { pq.table($0.baseAddress!, innerProduct: true) }
        var code = [UInt8](repeating: 0, count: pq.codeSize)
        var decoded = [Float](repeating: 0, count: d)
        for i in 0..<20 {
            data.withUnsafeBufferPointer { pq.encode($0.baseAddress! + i * d, into: &code) }
            pq.decode(code, into: &decoded)
            let l2 = code.withUnsafeBufferPointer { c in
                l2Table.withUnsafeBufferPointer { pq.lookup(c.baseAddress!, table: $0.baseAddress!) }
            }
            let dot = code.withUnsafeBufferPointer { c in
                dotTable.withUnsafeBufferPointer { pq.lookup(c.baseAddress!, table: $0.baseAddress!) }
            }
            #expect(abs(l2 - VectorDistance.distance(.euclideanSquared, query, decoded)) < 1e-4)
            #expect(abs(dot + VectorDistance.distance(.dot, query, decoded)) < 1e-4)
        }
    }

    @Test func encodingValidationRejectsBadConfigurations() {
        #expect(throws: Never.self) { try VectorEncoding.none.validate(dimensions: 3) }
        #expect(throws: Never.self) { try VectorEncoding.scalarQuantizer(bits: 6).validate(dimensions: 3) }
        #expect(throws: Never.self) {
            try VectorEncoding.productQuantizer(subquantizers: 4, bits: 12).validate(dimensions: 128)
        }
        let bad: [(VectorEncoding, Int)] = [
            (.scalarQuantizer(bits: 5), 8), (.scalarQuantizer(bits: 16), 8),
            (.productQuantizer(subquantizers: 3, bits: 8), 8), (.productQuantizer(subquantizers: 2, bits: 3), 8),
            (.productQuantizer(subquantizers: 2, bits: 13), 8), (.productQuantizer(subquantizers: 0, bits: 8), 8),
            (.none, 0),
        ]
        for (encoding, dimensions) in bad {
            #expect(throws: VectorError.self, "\(encoding)") { try encoding.validate(dimensions: dimensions) }
        }
    }

    @Test func errorsDescribeThemselvesInASentence() {
        let errors: [VectorError] = [
            .invalidConfiguration("bits must be 4, 6 or 8"), .dimensionMismatch(expected: 3, got: 4),
            .notEnoughTrainingData(needed: 10, got: 2), .corruptParameters("checksum mismatch"),
        ]
        for error in errors {
            #expect(error.description.hasSuffix("."))
            #expect(error.description.first?.isUppercase == true)
        }
        #expect(VectorError.dimensionMismatch(expected: 3, got: 4).description.contains("4 dimensions"))
    }

    func pow2(_ x: Double) -> Double { x * x }
}
