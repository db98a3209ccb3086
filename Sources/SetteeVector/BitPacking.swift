/// Little-endian bit packing of small unsigned codes: value `i` of width `bits` occupies bits
/// `i·bits ..< (i+1)·bits` of the byte string, least significant bit first. Used by the 4- and 6-bit scalar
/// quantizers and by product-quantizer codes (4…12 bits).
enum BitPacking {
    /// Bytes needed for `count` values of `bits` bits.
    @inline(__always)
    static func byteCount(count: Int, bits: Int) -> Int { (count * bits + 7) / 8 }

    /// Reads value `index` (of `bits` ≤ 16 bits). Reads only bytes that belong to the value.
    @inline(__always)
    static func read(_ code: UnsafePointer<UInt8>, index: Int, bits: Int) -> Int {
        let bit = index &* bits
        let byte = bit >> 3, shift = bit & 7
        let needed = (shift &+ bits &+ 7) >> 3
        var word = UInt32(code[byte])
        if needed > 1 { word |= UInt32(code[byte &+ 1]) << 8 }
        if needed > 2 { word |= UInt32(code[byte &+ 2]) << 16 }
        return Int((word >> UInt32(shift)) & ((1 << UInt32(bits)) &- 1))
    }

    /// Writes value `index`; the bits it occupies must be zero beforehand (start from a zeroed code).
    @inline(__always)
    static func write(_ value: Int, into code: UnsafeMutablePointer<UInt8>, index: Int, bits: Int) {
        let bit = index &* bits
        let byte = bit >> 3, shift = bit & 7
        let needed = (shift &+ bits &+ 7) >> 3
        let word = UInt32(truncatingIfNeeded: value & ((1 << bits) &- 1)) << UInt32(shift)
        code[byte] |= UInt8(truncatingIfNeeded: word)
        if needed > 1 { code[byte &+ 1] |= UInt8(truncatingIfNeeded: word >> 8) }
        if needed > 2 { code[byte &+ 2] |= UInt8(truncatingIfNeeded: word >> 16) }
    }
}
