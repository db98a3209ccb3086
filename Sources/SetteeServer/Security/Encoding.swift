import SetteeCore

extension Hex {
    /// `"dead"` → `[0xde, 0xad]`; nil for odd length or a non-hex character.
    static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = nibble(chars[i]), let lo = nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}

extension Base64 {
    /// URL-safe base64 without padding (RFC 4648 §5), as cookies and JWTs use.
    static func urlEncode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        appendURLSafe(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes URL-safe base64 with or without padding (standard alphabet accepted too).
    static func urlDecode(_ text: String) -> [UInt8]? {
        var s = String(text.map { $0 == "-" ? "+" : ($0 == "_" ? "/" : $0) })
        while s.utf8.count % 4 != 0 { s += "=" }
        return decode(s)
    }
}
