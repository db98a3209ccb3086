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
        var digits: [UInt8] = []
        var g = generation
        repeat {
            digits.append(UInt8(48 + g % 10))
            g /= 10
        } while g > 0
        out.append(contentsOf: digits.reversed())
        out.append(UInt8(ascii: "-"))
        out.append(contentsOf: digest.utf8)
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
        var input: [UInt8] = []
        input.reserveCapacity(canonicalBody.count + 48)
        parent?.write(into: &input)
        input.append(0)
        input.append(deleted ? 1 : 0)
        input.append(0)
        input.append(contentsOf: canonicalBody)
        return RevID(generation: (parent?.generation ?? 0) + 1, digest: Murmur3.hex(input))
    }
}
