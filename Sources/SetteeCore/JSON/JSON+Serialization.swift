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
        JSONWriter.write(self, sortingKeys: false, into: &buffer)
    }

    /// The compact JSON text of this value as UTF-8; see ``serialize(into:)``.
    public var serializedBytes: [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(JSONWriter.estimatedSize(of: self))
        serialize(into: &buffer)
        return buffer
    }

    /// The compact JSON text of this value; see ``serialize(into:)``.
    public var jsonString: String {
        String(decoding: serializedBytes, as: UTF8.self)
    }

    /// Appends the canonical JSON text of this value: like ``serialize(into:)``, but every object's
    /// keys are sorted by their UTF-8 bytes, recursively. Values equal under `==` have identical
    /// canonical bytes (except `-0.0` versus `0.0`), which makes this the form to hash.
    public func canonicalize(into buffer: inout [UInt8]) {
        JSONWriter.write(self, sortingKeys: true, into: &buffer)
    }

    /// The canonical JSON text of this value as UTF-8; see ``canonicalize(into:)``.
    public var canonicalBytes: [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(JSONWriter.estimatedSize(of: self))
        canonicalize(into: &buffer)
        return buffer
    }
}

/// Writes JSON text into a byte array.
enum JSONWriter {
    /// A cheap first guess at the output size, to avoid most regrowth without walking the value.
    static func estimatedSize(of value: JSON) -> Int {
        switch value {
        case .string(let string): return string.utf8.count + 8
        case .array(let array): return 16 + array.count * 16
        case .object(let object): return 16 + object.count * 32
        default: return 24
        }
    }

    static func write(_ value: JSON, sortingKeys: Bool, into buffer: inout [UInt8]) {
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
            for (i, element) in array.enumerated() {
                if i > 0 { buffer.append(UInt8(ascii: ",")) }
                write(element, sortingKeys: sortingKeys, into: &buffer)
            }
            buffer.append(UInt8(ascii: "]"))
        case .object(let object):
            buffer.append(UInt8(ascii: "{"))
            if sortingKeys && object.count > 1 {
                let order = object.entries.indices.sorted { a, b in
                    utf8Precedes(object.entries[a].key, object.entries[b].key)
                }
                for (n, i) in order.enumerated() {
                    if n > 0 { buffer.append(UInt8(ascii: ",")) }
                    writeMember(object.entries[i], sortingKeys: true, into: &buffer)
                }
            } else {
                for (i, member) in object.entries.enumerated() {
                    if i > 0 { buffer.append(UInt8(ascii: ",")) }
                    writeMember(member, sortingKeys: sortingKeys, into: &buffer)
                }
            }
            buffer.append(UInt8(ascii: "}"))
        }
    }

    @inline(__always)
    private static func writeMember(_ member: JSONObject.Member, sortingKeys: Bool, into buffer: inout [UInt8]) {
        writeString(member.key, into: &buffer)
        buffer.append(UInt8(ascii: ":"))
        write(member.value, sortingKeys: sortingKeys, into: &buffer)
    }

    /// Byte-wise order of the UTF-8 encodings (which is also code point order).
    static func utf8Precedes(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    @inline(__always)
    private static func append(_ literal: StaticString, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    static func writeInteger(_ number: Int64, into buffer: inout [UInt8]) {
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
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[i...]))
        }
    }

    static func writeDouble(_ number: Double, into buffer: inout [UInt8]) {
        guard number.isFinite else {
            append("null", to: &buffer)
            return
        }
        // Swift's description is the shortest round-tripping form and is valid JSON for finite
        // values: "3.0", "0.1", "1e-05", "1.5e+300", "-0.0".
        buffer.append(contentsOf: number.description.utf8)
    }

    static func writeString(_ string: String, into buffer: inout [UInt8]) {
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

    private static func writeEscaped(_ utf8: UnsafeBufferPointer<UInt8>, into buffer: inout [UInt8]) {
        var run = 0
        for i in 0..<utf8.count {
            let b = utf8[i]
            guard b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") else { continue }
            if run < i { buffer.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<i])) }
            run = i + 1
            buffer.append(UInt8(ascii: "\\"))
            switch b {
            case UInt8(ascii: "\""): buffer.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): buffer.append(UInt8(ascii: "\\"))
            case 0x08: buffer.append(UInt8(ascii: "b"))
            case 0x0C: buffer.append(UInt8(ascii: "f"))
            case 0x0A: buffer.append(UInt8(ascii: "n"))
            case 0x0D: buffer.append(UInt8(ascii: "r"))
            case 0x09: buffer.append(UInt8(ascii: "t"))
            default:
                let hex: StaticString = "0123456789abcdef"
                buffer.append(UInt8(ascii: "u"))
                buffer.append(UInt8(ascii: "0"))
                buffer.append(UInt8(ascii: "0"))
                buffer.append(hex.utf8Start[Int(b >> 4)])
                buffer.append(hex.utf8Start[Int(b & 0xF)])
            }
        }
        if run < utf8.count { buffer.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...])) }
    }
}
