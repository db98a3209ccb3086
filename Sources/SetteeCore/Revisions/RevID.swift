/// A revision identifier: `generation-digest`, e.g. `3-917fa2381192822767f010b95b45325b`.
///
/// The generation counts edits from the document's first revision (1). The digest of a revision Settee makes is
/// 32 lowercase hex characters computed by ``RevID/next(after:deleted:body:)`` exactly as CouchDB computes it
/// (an MD5 of the parent, the deleted flag, the body and the attachments' digests), so the same edit made on
/// CouchDB or on any Settee node gets the same id.
/// Revisions arriving by replication may carry any non-empty digest; they are kept as given.
///
/// Ordering is CouchDB's (it picks the winning revision and orders `_conflicts`): generation first, then the
/// digest as CouchDB holds it in memory — a 32-character hex digest as its 16 bytes, any other digest as its
/// text — compared as Erlang compares binaries (bytewise, a prefix first). For two 32-hex digests that is the
/// order of their lowercase text, but a 32-hex digest against one of another shape (PouchDB and old clients make
/// those) compares its raw bytes, not its text: `1-f0…` (bytes `f0 …`) sorts after `1-z` (byte `7a`).
/// Ids whose digests CouchDB holds as the same bytes — the same hex in two letter cases, or a 16-character digest
/// and the hex of its 16 bytes — are one revision to CouchDB; Settee keeps each text as given and orders such ids
/// by their text (`A–F` before `a–f`), so the order stays total.
public struct RevID: Hashable, Sendable, Comparable, CustomStringConvertible, LosslessStringConvertible {
    /// Number of edits since the document was created; the first revision is 1.
    public let generation: Int
    /// The revision's digest (hex for revisions Settee creates).
    public let digest: String

    /// Creates a revision id from its parts. `generation` must be ≥ 1 and `digest` non-empty.
    public init(generation: Int, digest: String) {
        precondition(generation >= 1 && !digest.isEmpty, "invalid revision id parts")
        self.generation = generation
        self.digest = digest
    }

    /// Parses `N-digest`; `nil` when the text is not a revision id.
    public init?(_ description: String) {
        guard let dash = description.utf8.firstIndex(of: UInt8(ascii: "-")) else { return nil }
        let genPart = description.utf8[description.utf8.startIndex..<dash]
        let digestPart = description.utf8[description.utf8.index(after: dash)...]
        guard !genPart.isEmpty, genPart.count <= 18, !digestPart.isEmpty else { return nil }
        var gen = 0
        for byte in genPart {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            gen = gen * 10 + Int(byte - 0x30)
        }
        guard gen >= 1 else { return nil }
        // Digests are printable ASCII without whitespace, quotes or control characters.
        for byte in digestPart where byte <= 0x20 || byte >= 0x7f || byte == UInt8(ascii: "\"") {
            return nil
        }
        self.generation = gen
        self.digest = String(Substring(digestPart))
    }

    public var description: String { "\(generation)-\(digest)" }

    /// Appends the UTF-8 text of the id (`N-digest`) to `out` without making a String.
    public func write(into out: inout [UInt8]) {
        // Up to 19 decimal digits, written backwards into a stack buffer.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { raw in
            var g = generation.magnitude
            var i = raw.count
            repeat {
                i -= 1
                raw[i] = UInt8(truncatingIfNeeded: 48 &+ g % 10)
                g /= 10
            } while g > 0
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[i...]))
        }
        out.append(UInt8(ascii: "-"))
        var digest = digest
        digest.withUTF8 { out.append(contentsOf: $0) }
    }

    /// CouchDB's order: generation, then the digest as CouchDB holds it (see the type's documentation), then —
    /// only for digests CouchDB would hold as the same bytes — the text.
    public static func < (lhs: RevID, rhs: RevID) -> Bool {
        if lhs.generation != rhs.generation { return lhs.generation < rhs.generation }
        return RevID.digestPrecedes(lhs.digest, rhs.digest)
    }
}

// MARK: - CouchDB's digest order

extension RevID {
    /// Whether digest `a` sorts before digest `b` in CouchDB's order: each taken as CouchDB holds it (32 hex
    /// characters as 16 bytes, anything else as its UTF-8), compared bytewise with a prefix first; equal bytes
    /// (hex differing only in letter case) fall back to the text.
    static func digestPrecedes(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                let xHex = isHexDigest(x), yHex = isHexDigest(y)
                if xHex && yHex {
                    // Lowercase hex text orders as the bytes it spells; compare case-folded, then as text.
                    for i in 0..<32 where x[i] | 0x20 != y[i] | 0x20 {
                        return hexValue(x[i]) < hexValue(y[i])
                    }
                    return x.lexicographicallyPrecedes(y)
                }
                if !xHex && !yHex { return x.lexicographicallyPrecedes(y) }
                // One 16-byte binary against a text binary.
                let (hex, text) = xHex ? (x, y) : (y, x)
                let n = min(16, text.count)
                for i in 0..<n {
                    let h = hexValue(hex[2 * i]) << 4 | hexValue(hex[2 * i + 1])
                    if h != text[i] { return xHex ? h < text[i] : text[i] < h }
                }
                // Equal over the shorter length: the shorter binary sorts first; the same 16 bytes, by text.
                if text.count == 16 { return x.lexicographicallyPrecedes(y) }
                return xHex ? 16 < text.count : text.count < 16
            }
        }
    }

    /// Whether `digest` is 32 hex characters (either case): the shape CouchDB keeps as 16 bytes.
    @inline(__always)
    static func isHexDigest(_ digest: UnsafeBufferPointer<UInt8>) -> Bool {
        guard digest.count == 32 else { return false }
        for byte in digest where hexValue(byte) > 15 { return false }
        return true
    }

    /// The value of a hex digit, or 255.
    @inline(__always)
    static func hexValue(_ byte: UInt8) -> UInt8 {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte &- UInt8(ascii: "A") &+ 10
        default: return 255
        }
    }
}
