import SetteeCore

/// Sequences as CouchDB 3 writes them (`seq`, `last_seq`, `update_seq`, `purge_seq`): `"N-OPAQUE"`, where N is
/// the number and OPAQUE the base64url of the Erlang term CouchDB packs its shard sequences into,
/// `[{Node, [0, 4294967295], {N, UuidPrefix, Node}}]` (one shard spanning the whole ring, named by this node and
/// the first 7 characters of the database's uuid). Clients treat them as opaque and send them back as `since`,
/// which takes these, plain integers (older clients, PouchDB, Settee before this form) and `now`.
struct CouchSequence: Sendable {
    private let prefix: [UInt8]
    private let suffix: [UInt8]

    init(node: String, databaseUUID: String) {
        var p: [UInt8] = [131, 108, 0, 0, 0, 1, 104, 3]      // version; a list of 1; a 3-tuple
        Self.atom(node, into: &p)
        p += [108, 0, 0, 0, 2, 97, 0, 110, 4, 0, 0xff, 0xff, 0xff, 0xff, 106]   // [0, 4294967295]
        p += [104, 3]                                         // {N, Uuid, Node}
        prefix = p
        var s: [UInt8] = []
        let uuid = Array(databaseUUID.utf8.prefix(7))
        s += [109, 0, 0, 0, UInt8(uuid.count)] + uuid         // a binary
        Self.atom(node, into: &s)
        s.append(106)                                         // the list's tail
        suffix = s
    }

    /// `"N-OPAQUE"` without quotes.
    func string(_ n: UInt64) -> String {
        var out: [UInt8] = []
        append(n, quoted: false, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The sequence as a JSON value.
    func json(_ n: UInt64) -> JSON { .string(string(n)) }

    /// Appends the sequence, as a JSON string literal when `quoted`.
    func append(_ n: UInt64, quoted: Bool = true, to out: inout [UInt8]) {
        if quoted { out.append(UInt8(ascii: "\"")) }
        out.append(contentsOf: String(n).utf8)
        out.append(UInt8(ascii: "-"))
        var term = prefix
        term.reserveCapacity(prefix.count + 10 + suffix.count)
        Self.integer(n, into: &term)
        term += suffix
        Base64.appendURLSafe(term, to: &out)
        if quoted { out.append(UInt8(ascii: "\"")) }
    }

    /// An atom as `SMALL_ATOM_UTF8_EXT` (node names are short ASCII).
    private static func atom(_ name: String, into out: inout [UInt8]) {
        let bytes = Array(name.utf8.prefix(255))
        out += [119, UInt8(bytes.count)] + bytes
    }

    /// A non-negative integer: `SMALL_INTEGER_EXT`, `INTEGER_EXT` or `SMALL_BIG_EXT`.
    private static func integer(_ n: UInt64, into out: inout [UInt8]) {
        if n < 256 {
            out += [97, UInt8(n)]
        } else if n <= UInt64(Int32.max) {
            out.append(98)
            withUnsafeBytes(of: UInt32(n).bigEndian) { out += $0 }
        } else {
            var digits: [UInt8] = []
            var v = n
            while v > 0 { digits.append(UInt8(v & 0xff)); v >>= 8 }
            out += [110, UInt8(digits.count), 0] + digits
        }
    }
}

extension Call {
    /// The sequence formatter of a database on this node.
    func sequences(_ databaseUUID: String) -> CouchSequence {
        CouchSequence(node: node.configuration.nodeName, databaseUUID: databaseUUID)
    }
}
