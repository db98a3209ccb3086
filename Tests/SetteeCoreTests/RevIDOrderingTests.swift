import Testing
@testable import SetteeCore

private func r(_ s: String) -> RevID { RevID(s)! }

/// CouchDB compares two revisions of one generation by their digests as it holds them: a 32-hex digest as its
/// 16 bytes, any other digest as its text, binaries bytewise with a prefix first (Erlang's term order).
@Suite struct RevIDOrderingTests {
    static let ff = String(repeating: "f", count: 32)
    /// The bytes `61 62 00 … 00` spelled in hex: "ab" followed by zero bytes.
    static let abPadded = "6162" + String(repeating: "0", count: 28)

    @Test func generationComesFirst() {
        #expect(r("2-0") > r("1-" + Self.ff))
        #expect(r("10-a") > r("9-z"))
    }

    @Test func twoHexDigestsOrderAsTheirBytes() {
        #expect(r("3-" + String(repeating: "0", count: 31) + "1") < r("3-" + String(repeating: "0", count: 31) + "a"))
        #expect(r("3-0f" + String(repeating: "0", count: 30)) < r("3-f0" + String(repeating: "0", count: 30)))
    }

    @Test func aHexDigestAgainstTextComparesItsBytesNotItsText() {
        // Text order would put "ff…" (0x66) before "z" (0x7a); CouchDB compares byte 0xff with 0x7a.
        #expect(r("1-z") < r("1-" + Self.ff))
        // "ab" is a prefix of the hex digest's bytes 61 62 00 …, so it sorts first; as text "6162…" < "ab".
        #expect(r("1-ab") < r("1-" + Self.abPadded))
        #expect(r("1-ab1") > r("1-" + Self.abPadded))  // 0x31 > 0x00 at the third byte
        // A 16-character text digest against 16 hex bytes: equal length, bytewise.
        #expect(r("1-abcdefghijklmnop") > r("1-" + "6162636465666768696a6b6c6d6e6f6f"))
        #expect(r("1-abcdefghijklmnop") < r("1-" + "6162636465666768696a6b6c6d6e6f71"))
        #expect(!(r("1-abcdefghijklmnop") < r("1-6162636465666768696a6b6c6d6e6f70")))
    }

    @Test func digestsOfOtherLengthsAreText() {
        let hex31 = String(repeating: "f", count: 31), hex33 = String(repeating: "0", count: 33)
        #expect(r("1-" + hex31) > r("1-" + Self.ff.prefix(30)))  // both text: a longer string with the prefix
        #expect(r("1-" + hex33) < r("1-1"))  // text "000…" < "1"
        #expect(r("1-" + Self.ff) > r("1-" + hex31))  // bytes ff… against text "fff…" (0x66)
    }

    @Test func uppercaseHexIsTheSameBytesAsLowercase() {
        let upper = r("1-" + Self.ff.uppercased()), lower = r("1-" + Self.ff)
        // One revision to CouchDB; Settee keeps both spellings and orders them by text (A–F before a–f).
        #expect(upper != lower)
        #expect(upper < lower && !(lower < upper))
        // Against any other digest, the uppercase spelling sorts where its bytes do.
        let fe = r("1-" + String(repeating: "f", count: 31) + "e")
        #expect(fe < upper)  // bytes …fe < …ff, although text "F" (0x46) < "f" (0x66)
        #expect(r("1-z") < upper)
    }

    @Test func theOrderIsTotal() {
        let revs = ["1-z", "1-" + Self.ff, "1-" + Self.ff.uppercased(), "1-ab", "1-" + Self.abPadded, "1-ab1",
                    "1-abcdefghijklmnop", "1-6162636465666768696a6b6c6d6e6f70", "1-0", "1-00", "1-" + Self.ff.dropLast(),
                    "2-a", "1-ABCDEF0123456789abcdef0123456789", "1-abcdef0123456789ABCDEF0123456789"].map(r)
        for a in revs {
            #expect(!(a < a))
            for b in revs {
                #expect([a < b, b < a, a == b].filter { $0 }.count == 1, "\(a) vs \(b)")
                for c in revs where a < b && b < c { #expect(a < c) }
            }
        }
    }

    @Test func theWinnerIsCouchDBsAmongMixedShapes() throws {
        // 1-root with children 2-<ab padded hex> and 2-ab: CouchDB's winner is the hex one (its bytes are longer
        // with "ab" as prefix); comparing text would have picked "2-ab".
        var tree = RevTree()
        try tree.addChild(r("1-root"), of: nil, deleted: false, body: nil)
        _ = try tree.insert(path: [r("2-ab"), r("1-root")], deleted: false, body: nil)
        _ = try tree.insert(path: [r("2-" + Self.abPadded), r("1-root")], deleted: false, body: nil)
        _ = try tree.insert(path: [r("2-z"), r("1-root")], deleted: false, body: nil)
        #expect(tree.winner?.rev == r("2-z"))
        _ = try tree.insert(path: [r("2-" + Self.ff.uppercased()), r("1-root")], deleted: false, body: nil)
        #expect(tree.winner?.rev == r("2-" + Self.ff.uppercased()))
        #expect(tree.conflicts == [r("2-z"), r("2-" + Self.abPadded), r("2-ab")])
    }

    @Test func storedTreesKeepTheTextOrderOfDigests() throws {
        // The tree's node order (and so its encoded bytes) is generation then digest text, as before CouchDB's
        // ranking came in: trees stored by earlier versions decode and are searched as they are.
        var tree = RevTree()
        try tree.addChild(r("1-root"), of: nil, deleted: false, body: nil)
        for leaf in ["2-ab", "2-" + Self.abPadded, "2-z", "2-" + Self.ff.uppercased()] {
            _ = try tree.insert(path: [r(leaf), r("1-root")], deleted: false, body: nil)
        }
        #expect(tree.nodes.map(\.rev.description) == ["1-root", "2-" + Self.abPadded, "2-" + Self.ff.uppercased(),
                                                      "2-ab", "2-z"])
        let decoded = try RevTree(encoded: tree.encoded())
        #expect(decoded == tree)
        for node in tree.nodes { #expect(decoded.index(of: node.rev) != nil) }
        #expect(decoded.winner?.rev == r("2-" + Self.ff.uppercased()))
    }
}
