/// The on-disk encoding of a revision tree (the `tree` column of `docs_<cid>`).
///
/// Format (version 1), all integers LEB128 varints:
/// ```
/// u8 version=1 · count · count × node
/// node := generation · digestLength · digest bytes · (parent + 1) · flags(bit0 deleted, bit1 has body)
///         · [bodyLength · body bytes]
/// ```
/// Nodes are written in tree order (sorted), so equal trees encode to equal bytes.
extension RevTree {
    /// Encodes the tree; pass `omitBodyOf` to leave one revision's body out (the store keeps the winner's
    /// body in its own column).
    public func encoded(omitBodyOf omitted: RevID? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(8 + nodes.count * 40)
        encode(omitBodyOf: omitted, into: &out)
        return out
    }

    /// Appends the encoding to `out` (lets a writer reuse one buffer).
    public func encode(omitBodyOf omitted: RevID? = nil, into out: inout [UInt8]) {
        out.append(1)
        Varint.append(UInt64(nodes.count), to: &out)
        for node in nodes {
            Varint.append(UInt64(node.rev.generation), to: &out)
            let digest = node.rev.digest.utf8
            Varint.append(UInt64(digest.count), to: &out)
            out.append(contentsOf: digest)
            Varint.append(UInt64(node.parent + 1), to: &out)
            let body = node.rev == omitted ? nil : node.body
            out.append((node.deleted ? 1 : 0) | (body != nil ? 2 : 0))
            if let body {
                Varint.append(UInt64(body.count), to: &out)
                out.append(contentsOf: body)
            }
        }
    }

    /// Decodes bytes written by ``encoded(omitBodyOf:)``.
    /// - Throws: ``SetteeError`` with code `internalError` when the bytes are not a valid tree.
    public init(encoded bytes: [UInt8]) throws(SetteeError) {
        let result: Result<RevTree, SetteeError> = bytes.withUnsafeBytes { raw in
            do throws(SetteeError) {
                return .success(try RevTree(encoded: raw))
            } catch {
                return .failure(error)
            }
        }
        self = try result.get()
    }

    /// Decodes a tree from bytes that are valid only for the duration of the call (e.g. a SQLite column).
    public init(encoded bytes: UnsafeRawBufferPointer) throws(SetteeError) {
        var reader = ByteReader(bytes: bytes)
        // A node takes at least 5 bytes (generation, digest length, a digest byte, parent, flags), which bounds
        // the count before anything is allocated for it.
        guard reader.byte() == 1, let count = reader.varint(), count <= UInt64(bytes.count / 5) else {
            throw SetteeError(.internalError, "Corrupt revision tree: bad header")
        }
        var nodes: [Node] = []
        nodes.reserveCapacity(Int(count))
        for _ in 0..<Int(count) {
            guard let gen = reader.varint(), gen >= 1, gen < UInt64(Int.max),
                  let dlen = reader.varint(), let dcount = Int(exactly: dlen), let digest = reader.bytes(dcount), !digest.isEmpty,
                  let parentPlusOne = reader.varint(), parentPlusOne <= UInt64(nodes.count),
                  let flags = reader.byte()
            else { throw SetteeError(.internalError, "Corrupt revision tree: bad node") }
            var body: [UInt8]?
            if flags & 2 != 0 {
                guard let blen = reader.varint(), let bcount = Int(exactly: blen), let b = reader.bytes(bcount) else {
                    throw SetteeError(.internalError, "Corrupt revision tree: bad body")
                }
                body = Array(b)
            }
            nodes.append(Node(rev: RevID(generation: Int(gen), digest: String(decoding: UnsafeRawBufferPointer(rebasing: digest), as: UTF8.self)),
                              parent: Int(parentPlusOne) - 1, deleted: flags & 1 != 0, body: body))
        }
        self.init(sortedNodes: nodes)
    }
}

extension RevTree {
    /// The common edit, done on the encoded bytes: when `encoded` is a single chain of revisions (each
    /// node the parent of the next, consecutive generations, no bodies stored) that ends at `parent`,
    /// appends to `out` the encoding of that tree with `child` added under `parent` and returns true.
    ///
    /// The bytes are exactly what decoding, ``addChild(_:of:deleted:body:)`` and
    /// ``encode(omitBodyOf:into:)`` with `child` omitted would produce, without building the tree.
    /// Returns false, leaving `out` as it was, for any other tree (branches, bodies, another leaf, a
    /// chain that would need stemming past `limit`, bytes that don't parse): use the general path then.
    public static func appendChild(toChain encoded: UnsafeRawBufferPointer, parent: RevID, child: RevID,
                                   deleted: Bool, limit: Int, into out: inout [UInt8]) -> Bool {
        // (No overflow: generation ≥ 1.) A child at Int.max would encode a generation the decoder refuses.
        guard child.generation - 1 == parent.generation, child.generation < Int.max else { return false }
        var reader = ByteReader(bytes: encoded)
        guard reader.byte() == 1, let count = reader.varint(), count >= 1, count < UInt64(max(1, limit)) else {
            return false
        }
        let nodesStart = reader.offset
        var previousGeneration: UInt64 = 0
        var lastDigest: Slice<UnsafeRawBufferPointer>?
        for i in 0..<Int(count) {
            guard let generation = reader.varint(), generation >= 1, generation < UInt64(Int.max),
                  i == 0 || generation == previousGeneration + 1,
                  let digestLength = reader.varint(), let length = Int(exactly: digestLength),
                  let digest = reader.bytes(length), !digest.isEmpty,
                  let parentPlusOne = reader.varint(), parentPlusOne == UInt64(i),
                  let flags = reader.byte(), flags <= 1
            else { return false }
            previousGeneration = generation
            lastDigest = digest
        }
        guard reader.offset == encoded.count, previousGeneration == UInt64(parent.generation), let lastDigest else {
            return false
        }
        var parentDigest = parent.digest
        guard parentDigest.withUTF8({ $0.elementsEqual(lastDigest) }) else { return false }
        out.append(1)
        Varint.append(count + 1, to: &out)
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: encoded[nodesStart...]))
        Varint.append(UInt64(child.generation), to: &out)
        var childDigest = child.digest
        childDigest.withUTF8 { digest in
            Varint.append(UInt64(digest.count), to: &out)
            out.append(contentsOf: digest)
        }
        Varint.append(count, to: &out)  // the parent's index (the last node) + 1
        out.append(deleted ? 1 : 0)  // the new winner's body lives in the body column
        return true
    }
}

/// LEB128 unsigned varints.
enum Varint {
    static func append(_ value: UInt64, to out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(v & 0x7f) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }
}

/// A cursor over bytes that returns nil instead of reading past the end.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func varint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while let b = byte() {
            result |= UInt64(b & 0x7f) << shift
            if b < 0x80 { return result }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }

    mutating func bytes(_ n: Int) -> Slice<UnsafeRawBufferPointer>? {
        guard n >= 0, n <= bytes.count - offset else { return nil }
        defer { offset += n }
        return bytes[offset..<offset + n]
    }
}
