/// A revision identifier: `generation-digest`, e.g. `3-917fa2381192822767f010b95b45325b`.
///
/// The generation counts edits from the document's first revision (1). The digest is 32 lowercase hex
/// characters computed by ``RevID/next(after:deleted:canonicalBody:)`` from the parent revision, the deleted
/// flag and the canonical JSON of the body, so the same edit made on two nodes gets the same id.
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

    /// The id of a new revision that follows `parent` (or starts a document when `parent` is nil).
    ///
    /// Deterministic: a 128-bit MurmurHash3 over the parent id, the deleted flag and the canonical body
    /// bytes, so the same edit made on any node gets the same id.
    public static func next(after parent: RevID?, deleted: Bool, canonicalBody: [UInt8]) -> RevID {
        canonicalBody.withUnsafeBytes { next(after: parent, deleted: deleted, canonicalBody: $0) }
    }

    /// ``next(after:deleted:canonicalBody:)`` over bytes the caller holds (no copy of the body is made).
    public static func next(after parent: RevID?, deleted: Bool, canonicalBody: UnsafeRawBufferPointer) -> RevID {
        // The hashed input is `parent text · 0 · deleted · 0 · canonical body`; the prefix is built on the
        // stack and the body is hashed where it lies.
        var parentDigest = parent?.digest ?? ""
        let (h1, h2) = parentDigest.withUTF8 { digest -> (UInt64, UInt64) in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: digest.count + 24) { buffer -> (UInt64, UInt64) in
                var n = 0
                if let parent {
                    var g = parent.generation.magnitude
                    var digits = 0
                    repeat { digits += 1; g /= 10 } while g > 0
                    g = parent.generation.magnitude
                    for i in stride(from: digits - 1, through: 0, by: -1) {
                        buffer[i] = UInt8(truncatingIfNeeded: 48 &+ g % 10)
                        g /= 10
                    }
                    buffer[digits] = UInt8(ascii: "-")
                    n = digits + 1
                    for byte in digest {
                        buffer[n] = byte
                        n += 1
                    }
                }
                buffer[n] = 0
                buffer[n + 1] = deleted ? 1 : 0
                buffer[n + 2] = 0
                return Murmur3.hash128(UnsafeRawBufferPointer(start: buffer.baseAddress, count: n + 3), canonicalBody)
            }
        }
        let digest = withUnsafeBytes(of: (h1.littleEndian, h2.littleEndian)) { Hex.encode($0) }
        return RevID(generation: (parent?.generation ?? 0) + 1, digest: digest)
    }
}
