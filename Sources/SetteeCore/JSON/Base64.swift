/// Base64 with the standard alphabet (RFC 4648 §4), as CouchDB uses for inline attachment data.
///
/// ```swift
/// Base64.encode(Array("foo".utf8))   // "Zm9v"
/// Base64.decode("Zm9vYg")            // [0x66, 0x6F, 0x6F, 0x62] — padding may be left off
/// Base64.decode("Zm9v!")             // nil
/// ```
package enum Base64 {
    private static let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    /// Encodes `bytes` with `=` padding to a multiple of four characters.
    package static func encode(_ bytes: [UInt8]) -> String {
        let outputCount = (bytes.count + 2) / 3 * 4
        if outputCount == 0 { return "" }
        let table = alphabet.utf8Start
        return String(unsafeUninitializedCapacity: outputCount) { out in
            var o = 0
            var i = 0
            while i + 3 <= bytes.count {
                let chunk = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                out[o] = table[Int(chunk >> 18 & 0x3F)]
                out[o + 1] = table[Int(chunk >> 12 & 0x3F)]
                out[o + 2] = table[Int(chunk >> 6 & 0x3F)]
                out[o + 3] = table[Int(chunk & 0x3F)]
                i += 3
                o += 4
            }
            let rest = bytes.count - i
            if rest > 0 {
                let chunk = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
                out[o] = table[Int(chunk >> 18 & 0x3F)]
                out[o + 1] = table[Int(chunk >> 12 & 0x3F)]
                out[o + 2] = rest == 2 ? table[Int(chunk >> 6 & 0x3F)] : UInt8(ascii: "=")
                out[o + 3] = UInt8(ascii: "=")
                o += 4
            }
            return o
        }
    }

    private static let urlAlphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

    /// Appends `bytes` in URL-safe base64 without padding (RFC 4648 §5), as cookies, JWTs and CouchDB's opaque
    /// sequences use.
    package static func appendURLSafe(_ bytes: [UInt8], to out: inout [UInt8]) {
        let table = urlAlphabet.utf8Start
        out.reserveCapacity(out.count + (bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let chunk = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(table[Int(chunk >> 18 & 0x3F)])
            out.append(table[Int(chunk >> 12 & 0x3F)])
            out.append(table[Int(chunk >> 6 & 0x3F)])
            out.append(table[Int(chunk & 0x3F)])
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            let chunk = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
            out.append(table[Int(chunk >> 18 & 0x3F)])
            out.append(table[Int(chunk >> 12 & 0x3F)])
            if rest == 2 { out.append(table[Int(chunk >> 6 & 0x3F)]) }
        }
    }

    /// Decodes standard Base64. Padding is optional, but if present it must complete the last
    /// group of four. Returns `nil` for any character outside the alphabet (including whitespace
    /// and the URL-safe `-` and `_`), misplaced `=`, or a length no encoding produces.
    package static func decode(_ string: String) -> [UInt8]? {
        var utf8 = Array(string.utf8)
        // Strip padding: at most two `=`, and only if it makes a whole group of four.
        var padding = 0
        while padding < utf8.count && utf8[utf8.count - 1 - padding] == UInt8(ascii: "=") {
            padding += 1
        }
        if padding > 0 {
            guard padding <= 2, utf8.count % 4 == 0 else { return nil }
            utf8.removeLast(padding)
        }
        guard utf8.count % 4 != 1 else { return nil }

        var output: [UInt8] = []
        output.reserveCapacity(utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for c in utf8 {
            guard let sextet = value(of: c) else { return nil }
            accumulator = accumulator << 6 | UInt32(sextet)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return output
    }

    private static func value(of c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
