/// BLIP's unsigned varints: 7 bits a byte, least significant group first, high bit set on all but the last byte.
enum Varint {
    /// Appends `value` to `bytes`.
    static func write(_ value: UInt64, into bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// The encoding of `value`.
    static func encode(_ value: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        write(value, into: &bytes)
        return bytes
    }

    /// Reads a varint at `index` of `bytes`, advancing `index` past it.
    /// - Throws: ``BLIPError`` `.malformedFrame` when the bytes end inside the varint or it overflows 64 bits.
    static func read(_ bytes: ArraySlice<UInt8>, at index: inout Int) throws(BLIPError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.endIndex {
            let byte = bytes[index]
            index += 1
            if shift == 63 && byte > 1 { throw BLIPError(.malformedFrame, "varint overflows 64 bits") }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw BLIPError(.malformedFrame, "varint longer than 10 bytes") }
        }
        throw BLIPError(.malformedFrame, "frame ends inside a varint")
    }
}
