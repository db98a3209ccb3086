extension JSON {
    /// Appends the compact JSON text of this value: no whitespace, object keys in stored order.
    ///
    /// Strings escape `"`, `\` and control characters (`\b \f \n \r \t`, others as `\u00XX`) and keep
    /// other UTF-8 as is. Integers print in decimal; doubles print in the shortest form that reads
    /// back to the same value, keeping a `.0` on integral values (`3.0`) so they stay doubles; NaN and
    /// infinities, which JSON cannot express, print as `null`.
    ///
    /// ```swift
    /// var out: [UInt8] = []
    /// JSON.object(["a": 1.5]).serialize(into: &out)   // {"a":1.5}
    /// ```
    public func serialize(into buffer: inout [UInt8]) {
        JSONWriter.write(self, sortingKeys: false, appendingTo: &buffer)
    }

    /// The compact JSON text of this value as UTF-8; see ``serialize(into:)``.
    public var serializedBytes: [UInt8] {
        JSONWriter.bytes(of: self, sortingKeys: false)
    }

    /// The compact JSON text of this value; see ``serialize(into:)``.
    public var jsonString: String {
        String(decoding: serializedBytes, as: UTF8.self)
    }

    /// Appends the canonical JSON text of this value: like ``serialize(into:)``, but every object's
    /// keys are sorted by their UTF-8 bytes, recursively. Values equal under `==` have identical
    /// canonical bytes (except `-0.0` versus `0.0`), which makes this the form to hash.
    public func canonicalize(into buffer: inout [UInt8]) {
        JSONWriter.write(self, sortingKeys: true, appendingTo: &buffer)
    }

    /// The canonical JSON text of this value as UTF-8; see ``canonicalize(into:)``.
    public var canonicalBytes: [UInt8] {
        JSONWriter.bytes(of: self, sortingKeys: true)
    }
}

/// Writes JSON text, first into a ``ByteWriter`` that starts on the stack, then into the caller's array
/// in one copy.
enum JSONWriter {
    static func write(_ value: JSON, sortingKeys: Bool, appendingTo buffer: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { storage in
            var writer = ByteWriter(initialStorage: storage)
            write(value, sortingKeys: sortingKeys, into: &writer)
            writer.withBytes { buffer.append(contentsOf: $0) }
        }
    }

    static func bytes(of value: JSON, sortingKeys: Bool) -> [UInt8] {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { storage in
            var writer = ByteWriter(initialStorage: storage)
            write(value, sortingKeys: sortingKeys, into: &writer)
            // `Array(UnsafeBufferPointer)` stays specialized (cached type metadata, one memcpy);
            // `Array(unsafeUninitializedCapacity:)` looks the storage type up at run time on Linux.
            return writer.withBytes { [UInt8]($0) }
        }
    }

    static func write(_ value: JSON, sortingKeys: Bool, into buffer: inout ByteWriter) {
        switch value {
        case .null:
            append("null", to: &buffer)
        case .bool(let flag):
            append(flag ? "true" : "false", to: &buffer)
        case .int(let number):
            writeInteger(number, into: &buffer)
        case .double(let number):
            writeDouble(number, into: &buffer)
        case .string(let string):
            writeString(string, into: &buffer)
        case .array(let array):
            buffer.append(UInt8(ascii: "["))
            array.withUnsafeBufferPointer { elements in
                for i in elements.indices {
                    if i > 0 { buffer.append(UInt8(ascii: ",")) }
                    write(elements[i], sortingKeys: sortingKeys, into: &buffer)
                }
            }
            buffer.append(UInt8(ascii: "]"))
        case .object(let object):
            buffer.append(UInt8(ascii: "{"))
            object.entries.withUnsafeBufferPointer { members in
                if sortingKeys && members.count > 1 {
                    writeSorted(members, into: &buffer)
                } else {
                    for i in members.indices {
                        if i > 0 { buffer.append(UInt8(ascii: ",")) }
                        writeMember(members[i], sortingKeys: sortingKeys, into: &buffer)
                    }
                }
            }
            buffer.append(UInt8(ascii: "}"))
        }
    }

    /// Writes `members` in the byte order of their keys' UTF-8, recursively canonical.
    ///
    /// Each member gets a sort key: its key's first 8 UTF-8 bytes as a big-endian integer (zero
    /// padded), so most comparisons are one integer compare; equal prefixes fall back to comparing
    /// the full UTF-8. The (prefix, position) pairs live in a temporary stack buffer; up to 16
    /// members are insertion-sorted, more go through the standard sort.
    private static func writeSorted(_ members: UnsafeBufferPointer<JSONObject.Member>, into buffer: inout ByteWriter) {
        let n = members.count
        withUnsafeTemporaryAllocation(of: SortKey.self, capacity: n) { keys in
            let keys = keys.baseAddress.unsafelyUnwrapped
            for i in 0..<n {
                (keys + i).initialize(to: SortKey(prefix: utf8Prefix(members[i].key), position: i))
            }
            var sorted = UnsafeMutableBufferPointer(start: keys, count: n)
            if n <= 16 {
                for i in 1..<n {
                    let item = keys[i]
                    var j = i
                    while j > 0 && precedes(item, keys[j - 1], members) {
                        keys[j] = keys[j - 1]
                        j -= 1
                    }
                    keys[j] = item
                }
            } else {
                sorted.sort { precedes($0, $1, members) }
            }
            for k in 0..<n {
                if k > 0 { buffer.append(UInt8(ascii: ",")) }
                writeMember(members[keys[k].position], sortingKeys: true, into: &buffer)
            }
            sorted.deinitialize()
        }
    }

    struct SortKey {
        var prefix: UInt64
        var position: Int
    }

    @inline(__always)
    private static func precedes(_ a: SortKey, _ b: SortKey, _ members: UnsafeBufferPointer<JSONObject.Member>) -> Bool {
        if a.prefix != b.prefix { return a.prefix < b.prefix }
        return utf8Precedes(members[a.position].key, members[b.position].key)
    }

    /// The first 8 UTF-8 bytes of `string` as a big-endian integer, zero padded: comparing two of
    /// these orders strings as their UTF-8 does, except that equal values need a full comparison.
    @inline(__always)
    static func utf8Prefix(_ string: String) -> UInt64 {
        let prefix: UInt64? = string.utf8.withContiguousStorageIfAvailable { utf8 in
            var value: UInt64 = 0
            if utf8.count >= 8 {
                return UInt64(bigEndian: UnsafeRawPointer(utf8.baseAddress.unsafelyUnwrapped).loadUnaligned(as: UInt64.self))
            }
            var shift: UInt64 = 56
            for b in utf8 {
                value |= UInt64(b) << shift
                shift &-= 8
            }
            return value
        }
        if let prefix { return prefix }
        var value: UInt64 = 0
        var shift: UInt64 = 56
        for b in string.utf8.prefix(8) {
            value |= UInt64(b) << shift
            shift &-= 8
        }
        return value
    }

    @inline(__always)
    private static func writeMember(_ member: JSONObject.Member, sortingKeys: Bool, into buffer: inout ByteWriter) {
        writeString(member.key, into: &buffer)
        buffer.append(UInt8(ascii: ":"))
        write(member.value, sortingKeys: sortingKeys, into: &buffer)
    }

    /// Byte-wise order of the UTF-8 encodings (which is also code point order).
    static func utf8Precedes(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    @inline(__always)
    private static func append(_ literal: StaticString, to buffer: inout ByteWriter) {
        buffer.append(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    static func writeInteger(_ number: Int64, into buffer: inout ByteWriter) {
        if number >= 0 && number < 10 {
            buffer.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: number))
            return
        }
        // 20 bytes: a sign and up to 19 digits.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { raw in
            var magnitude = number.magnitude
            var i = 24
            repeat {
                i -= 1
                raw[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude != 0
            if number < 0 {
                i -= 1
                raw[i] = UInt8(ascii: "-")
            }
            buffer.append(UnsafeRawBufferPointer(rebasing: raw[i...]))
        }
    }

    static func writeDouble(_ number: Double, into buffer: inout ByteWriter) {
        guard number.isFinite else {
            append("null", to: &buffer)
            return
        }
        // Swift's description is the shortest round-tripping form and is valid JSON for finite
        // values: "3.0", "0.1", "1e-05", "1.5e+300", "-0.0".
        var text = number.description
        text.withUTF8 { buffer.append(UnsafeRawBufferPointer($0)) }
    }

    static func writeString(_ string: String, into buffer: inout ByteWriter) {
        buffer.append(UInt8(ascii: "\""))
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { utf8 in
            writeEscaped(utf8, into: &buffer)
        }
        if done == nil {
            let bytes = Array(string.utf8)
            bytes.withUnsafeBufferPointer { writeEscaped($0, into: &buffer) }
        }
        buffer.append(UInt8(ascii: "\""))
    }

    /// Writes string contents (without the quotes), escaping what JSON requires.
    static func writeEscaped(_ utf8: UnsafeBufferPointer<UInt8>, into buffer: inout ByteWriter) {
        guard let base = utf8.baseAddress else { return }
        let count = utf8.count
        var run = 0
        var i = 0
        while true {
            // Skip 8 bytes at a time while none needs escaping.
            while i + 8 <= count {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self))
                let special = needsEscape(word)
                if special != 0 {
                    i += special.trailingZeroBitCount >> 3
                    break
                }
                i += 8
            }
            while i < count {
                let b = base[i]
                if b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { break }
                i += 1
            }
            guard i < count else { break }
            let b = base[i]
            if run < i { buffer.append(UnsafeRawBufferPointer(start: base + run, count: i - run)) }
            i += 1
            run = i
            switch b {
            case UInt8(ascii: "\""): buffer.append(UInt8(ascii: "\\"), UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): buffer.append(UInt8(ascii: "\\"), UInt8(ascii: "\\"))
            case 0x08: buffer.append(UInt8(ascii: "\\"), UInt8(ascii: "b"))
            case 0x0C: buffer.append(UInt8(ascii: "\\"), UInt8(ascii: "f"))
            case 0x0A: buffer.append(UInt8(ascii: "\\"), UInt8(ascii: "n"))
            case 0x0D: buffer.append(UInt8(ascii: "\\"), UInt8(ascii: "r"))
            case 0x09: buffer.append(UInt8(ascii: "\\"), UInt8(ascii: "t"))
            default:
                let hex: StaticString = "0123456789abcdef"
                buffer.append(UInt8(ascii: "\\"), UInt8(ascii: "u"))
                buffer.append(UInt8(ascii: "0"), UInt8(ascii: "0"))
                buffer.append(hex.utf8Start[Int(b >> 4)], hex.utf8Start[Int(b & 0xF)])
            }
        }
        if run < count { buffer.append(UnsafeRawBufferPointer(start: base + run, count: count - run)) }
    }

    /// Marks (with the byte's high bit) the bytes of `word` that are `"`, `\\` or below 0x20. Bits
    /// above the lowest mark may be false positives; the lowest mark is always exact.
    @inline(__always)
    private static func needsEscape(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let control = (word &- ones &* 0x20) & ~word
        let zeroInQuote = (quote &- ones) & ~quote
        let zeroInBackslash = (backslash &- ones) & ~backslash
        return (zeroInQuote | zeroInBackslash | control) & (ones &* 0x80)
    }
}
