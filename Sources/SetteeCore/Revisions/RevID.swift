/// A revision identifier: `generation-digest`, e.g. `3-917fa2381192822767f010b95b45325b`.
///
/// The generation counts edits from the document's first revision (1). The digest of a revision Settee makes is
/// 32 lowercase hex characters computed by ``RevID/next(after:deleted:body:)`` exactly as CouchDB computes it
/// (an MD5 of the parent, the deleted flag, the body and the attachments' digests), so the same edit made on
/// CouchDB or on any Settee node gets the same id.
/// Revisions arriving by replication may carry any non-empty digest; they are kept as given.
///
/// Ordering is CouchDB's: generation first, then the digest compared as a byte string.
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

    public static func < (lhs: RevID, rhs: RevID) -> Bool {
        if lhs.generation != rhs.generation { return lhs.generation < rhs.generation }
        // Digests are printable ASCII (see init), where String order is byte order.
        return lhs.digest < rhs.digest
    }
}

// MARK: - Hex digests

extension RevID {
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
