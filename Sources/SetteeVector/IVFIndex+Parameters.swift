extension IVFIndex {
    /// The first four bytes of ``parameters()``: "SVIX".
    static let parametersMagic: [UInt8] = [0x53, 0x56, 0x49, 0x58]
    /// The ``parameters()`` format version this build writes and reads.
    static let parametersVersion: UInt16 = 1

    /// Everything training learned — configuration, coarse centroids and quantizer state — as bytes; the lists are
    /// not included.
    ///
    /// Layout (all little-endian): magic "SVIX", version u16, flags u16 (bit 0: trained), dimensions u32,
    /// centroids u32, metric u8 (0 euclideanSquared, 1 euclidean, 2 cosine, 3 dot), encoding u8 (0 none, 1 scalar,
    /// 2 product), bits u8, reserved u8, subquantizers u32; when trained the centroids (f32 × centroids ×
    /// dimensions), then the scalar quantizer's minimums and steps (f32 × dimensions each) or the product
    /// quantizer's codebooks (f32 × dimensions × 2^bits); finally an FNV-1a 64 checksum of all preceding bytes.
    package func parameters() -> [UInt8] {
        var out = ByteWriter()
        out.bytes(Self.parametersMagic)
        out.u16(Self.parametersVersion)
        out.u16(isTrained ? 1 : 0)
        out.u32(UInt32(dimensions))
        out.u32(UInt32(centroidCount))
        out.u8(Self.metricCode(metric))
        switch encoding {
        case .none:
            out.bytes([0, 0, 0])
            out.u32(0)
        case .scalarQuantizer(let bits):
            out.bytes([1, UInt8(bits), 0])
            out.u32(0)
        case .productQuantizer(let subquantizers, let bits):
            out.bytes([2, UInt8(bits), 0])
            out.u32(UInt32(subquantizers))
        }
        if isTrained {
            out.floats(centroids)
            if let scalarQuantizer {
                out.floats(scalarQuantizer.minimums)
                out.floats(scalarQuantizer.steps)
            }
            if let productQuantizer { out.floats(productQuantizer.centroids) }
        }
        out.u64(ByteWriter.fnv1a(out.data))
        return out.data
    }

    /// Restores an index from ``parameters()``: its configuration and, when the bytes came from a trained index,
    /// its centroids and quantizer (`isTrained` true). The lists start empty; re-add entries with
    /// ``add(id:list:code:)``.
    ///
    /// Throws ``VectorError/corruptParameters(_:)`` for bytes that are truncated, fail the checksum, come from
    /// another format version or hold non-finite values, and ``VectorError/invalidConfiguration(_:)`` for a
    /// configuration ``init(dimensions:centroids:metric:encoding:)`` would reject.
    package convenience init(parameters: [UInt8]) throws(VectorError) {
        guard parameters.count >= 24 + 8 else { throw .corruptParameters("only \(parameters.count) bytes") }
        var reader = ByteReader(parameters)
        guard try reader.bytes(4) == Self.parametersMagic else {
            throw .corruptParameters("not vector index parameters")
        }
        let version = try reader.u16()
        guard version == Self.parametersVersion else {
            throw .corruptParameters("format version \(version), this build reads \(Self.parametersVersion)")
        }
        let body = parameters.count - 8
        var tail = ByteReader(Array(parameters[body...]))
        guard try tail.u64() == ByteWriter.fnv1a(parameters[..<body]) else {
            throw .corruptParameters("checksum mismatch")
        }
        let trained = try reader.u16() & 1 == 1
        let dimensions = Int(try reader.u32()), centroidCount = Int(try reader.u32())
        guard let metric = Self.metric(code: try reader.u8()) else { throw .corruptParameters("unknown metric") }
        let kind = try reader.u8(), bits = Int(try reader.u8())
        _ = try reader.u8()
        let subquantizers = Int(try reader.u32())
        let encoding: VectorEncoding
        switch kind {
        case 0: encoding = .none
        case 1: encoding = .scalarQuantizer(bits: bits)
        case 2: encoding = .productQuantizer(subquantizers: subquantizers, bits: bits)
        default: throw .corruptParameters("unknown encoding \(kind)")
        }
        try self.init(dimensions: dimensions, centroids: centroidCount, metric: metric, encoding: encoding)
        guard trained else {
            guard reader.offset == body else { throw .corruptParameters("unexpected bytes after the header") }
            return
        }
        let (total, overflow) = centroidCount.multipliedReportingOverflow(by: dimensions)
        guard !overflow else { throw .corruptParameters("\(centroidCount) centroids of \(dimensions) dimensions") }
        let centroids = try reader.floats(total, before: body)
        switch encoding {
        case .none:
            break
        case .scalarQuantizer(let bits):
            let minimums = try reader.floats(dimensions, before: body)
            let steps = try reader.floats(dimensions, before: body)
            guard steps.allSatisfy({ $0 >= 0 }) else { throw .corruptParameters("negative quantizer step") }
            scalarQuantizer = ScalarQuantizer(dimensions: dimensions, bits: bits, minimums: minimums, steps: steps)
        case .productQuantizer(let subquantizers, let bits):
            let codebooks = try reader.floats(dimensions << bits, before: body)
            productQuantizer = ProductQuantizer(dimensions: dimensions, subquantizers: subquantizers, bits: bits,
                                                centroids: codebooks)
        }
        guard reader.offset == body else { throw .corruptParameters("\(body - reader.offset) unexpected bytes") }
        self.centroids = centroids
        centroidNorms = usesL2 ? centroids.withUnsafeBufferPointer {
            KMeans.squaredNorms($0.baseAddress!, count: centroidCount, d: dimensions)
        } : [Float](repeating: 0, count: centroidCount)
        lists = [InvertedList](repeating: InvertedList(), count: centroidCount)
        isTrained = true
    }

    static func metricCode(_ metric: DistanceMetric) -> UInt8 {
        switch metric {
        case .euclideanSquared: return 0
        case .euclidean: return 1
        case .cosine: return 2
        case .dot: return 3
        }
    }

    static func metric(code: UInt8) -> DistanceMetric? {
        switch code {
        case 0: return .euclideanSquared
        case 1: return .euclidean
        case 2: return .cosine
        case 3: return .dot
        default: return nil
        }
    }
}

/// Appends little-endian integers and floats to a byte array.
struct ByteWriter {
    var data: [UInt8] = []

    mutating func bytes(_ values: [UInt8]) { data.append(contentsOf: values) }
    mutating func u8(_ value: UInt8) { data.append(value) }
    mutating func u16(_ value: UInt16) { for i in 0..<2 { data.append(UInt8(truncatingIfNeeded: value >> (8 * i))) } }
    mutating func u32(_ value: UInt32) { for i in 0..<4 { data.append(UInt8(truncatingIfNeeded: value >> (8 * i))) } }
    mutating func u64(_ value: UInt64) { for i in 0..<8 { data.append(UInt8(truncatingIfNeeded: value >> (8 * i))) } }
    mutating func floats(_ values: [Float]) {
        data.reserveCapacity(data.count + values.count * 4)
        for value in values { u32(value.bitPattern) }
    }

    /// FNV-1a, 64-bit.
    static func fnv1a<Bytes: Collection>(_ bytes: Bytes) -> UInt64 where Bytes.Element == UInt8 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }
}

/// Reads what ``ByteWriter`` wrote, throwing ``VectorError/corruptParameters(_:)`` past the end.
struct ByteReader {
    let data: [UInt8]
    var offset = 0

    init(_ data: [UInt8]) { self.data = data }

    mutating func bytes(_ count: Int, before end: Int? = nil) throws(VectorError) -> [UInt8] {
        let limit = end ?? data.count
        guard count >= 0, offset <= limit, count <= limit - offset else { throw .corruptParameters("truncated") }
        defer { offset += count }
        return Array(data[offset..<offset + count])
    }

    mutating func u8() throws(VectorError) -> UInt8 { try bytes(1)[0] }
    mutating func u16() throws(VectorError) -> UInt16 { UInt16(try unsigned(2)) }
    mutating func u32() throws(VectorError) -> UInt32 { UInt32(try unsigned(4)) }
    mutating func u64() throws(VectorError) -> UInt64 { try unsigned(8) }

    private mutating func unsigned(_ width: Int) throws(VectorError) -> UInt64 {
        var value: UInt64 = 0
        for (i, byte) in try bytes(width).enumerated() { value |= UInt64(byte) << (8 * UInt64(i)) }
        return value
    }

    /// `count` floats that must end at or before `end`; non-finite values are rejected.
    mutating func floats(_ count: Int, before end: Int) throws(VectorError) -> [Float] {
        guard count >= 0, count <= (end - offset) / 4 else { throw .corruptParameters("truncated") }
        var out = [Float](repeating: 0, count: count)
        for i in 0..<count {
            var bits: UInt32 = 0
            for b in 0..<4 { bits |= UInt32(data[offset + 4 * i + b]) << (8 * UInt32(b)) }
            out[i] = Float(bitPattern: bits)
            guard out[i].isFinite else { throw .corruptParameters("non-finite value") }
        }
        offset += 4 * count
        return out
    }
}
