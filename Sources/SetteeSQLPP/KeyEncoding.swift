package import SetteeCore

/// Order-preserving binary encoding of SQL++ values, so SQLite's byte comparison of index keys (BLOBs) follows
/// ``ValueCollation``: null < false < true < numbers < strings < arrays < objects. MISSING has no encoding (SQL NULL).
///
/// Numbers are encoded as IEEE doubles with the sign flipped so that byte order is numeric order (`1` and `1.0`
/// encode the same, as they compare equal). Strings are UTF-8 with `0x00` escaped and a `0x00 0x00` terminator,
/// so a prefix sorts first and arrays can hold them. The encoding is one-way (index keys are compared, never decoded).
package enum KeyEncoding {
    static let null: UInt8 = 0x01, falseTag: UInt8 = 0x02, trueTag: UInt8 = 0x03, number: UInt8 = 0x04
    static let string: UInt8 = 0x05, array: UInt8 = 0x06, object: UInt8 = 0x07

    /// The encoding of a present value; nil for MISSING.
    package static func encode(_ value: JSON?) -> [UInt8]? {
        guard let value else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(16)
        append(value, to: &out)
        return out
    }

    /// The smallest key above every null: `key > nullKey` means "a non-null value".
    package static let nullKey: [UInt8] = [null]

    /// Keys of strings starting with `prefix` are in `[lower, upper)`; nil upper when unbounded.
    package static func prefixRange(_ prefix: String) -> (lower: [UInt8], upper: [UInt8]) {
        var lower: [UInt8] = [string]
        for b in prefix.utf8 {
            if b == 0 { lower.append(0); lower.append(0xFF) } else { lower.append(b) }
        }
        var upper = lower
        // The next key after every string with this prefix: increment the last byte that can be incremented.
        while let last = upper.last, last == 0xFF { upper.removeLast() }
        if upper.count <= 1 { return (lower, [array]) }
        upper[upper.count - 1] += 1
        return (lower, upper)
    }

    static func append(_ value: JSON, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(null)
        case .bool(let b): out.append(b ? trueTag : falseTag)
        case .int(let i): appendNumber(Double(i), to: &out)
        case .double(let d): appendNumber(d, to: &out)
        case .string(let s):
            out.append(string)
            for b in s.utf8 {
                if b == 0 { out.append(0); out.append(0xFF) } else { out.append(b) }
            }
            out.append(0)
            out.append(0)
        case .array(let items):
            out.append(array)
            for item in items { append(item, to: &out) }
            out.append(0)
        case .object(let o):
            out.append(object)
            // ValueCollation orders objects by member count first, then sorted keys, then values.
            let count = UInt32(clamping: o.count)
            withUnsafeBytes(of: count.bigEndian) { out.append(contentsOf: $0) }
            let keys = o.keys.sorted { ValueCollation.compareStrings($0, $1) < 0 }
            for k in keys { append(.string(k), to: &out) }
            for k in keys { append(o[k]!, to: &out) }
            out.append(0)
        }
    }

    /// Appends a number's encoding (tag and 8 bytes): shared with the view-key collation.
    package static func appendNumber(_ d: Double, to out: inout [UInt8]) {
        out.append(number)
        let value = d == 0 ? 0.0 : d  // -0.0 == 0.0
        var bits = value.bitPattern
        bits = (bits & (1 << 63)) != 0 ? ~bits : bits | (1 << 63)
        withUnsafeBytes(of: bits.bigEndian) { out.append(contentsOf: $0) }
    }
}
