import Testing
import SetteeCore

/// The parsers the fuzz targets (Sources/settee-fuzz, Fuzz/corpus) exercise: behaviour pinned when they moved into
/// SetteeCore, and one test per fuzzing finding.
@Suite struct ChangeSequenceTests {
    @Test func acceptsNumbersQuotedNumbersAndCouchDBSequences() throws {
        #expect(try ChangeSequence.parse("0") == 0)
        #expect(try ChangeSequence.parse("42") == 42)
        #expect(try ChangeSequence.parse("\"42\"") == 42)
        #expect(try ChangeSequence.parse("12-g1AAAABteJzLYWBgYM") == 12)
        #expect(try ChangeSequence.parse("  \"99-abc\"  ") == 99)
        #expect(try ChangeSequence.parse("\"\"7\"\"") == 7)
        #expect(try ChangeSequence.parse("18446744073709551615") == UInt64.max)
    }

    @Test func emptyOrOnlyQuotesAndSpacesIsZero() throws {
        for text in ["", " ", "\"\"", " \" \" "] {
            #expect(try ChangeSequence.parse(text) == 0, "\(text.debugDescription)")
        }
    }

    @Test func rejectsWhatIsNotASequence() {
        // "1\u{301}": the digit and the combining accent are one Character, not an ASCII digit (as before the move).
        for text in ["now", "abc", "-1", "x0", "18446744073709551616", "\u{661}\u{662}", "1\u{301}", "\t5"] {
            #expect(throws: SetteeError.self, "\(text.debugDescription)") { try ChangeSequence.parse(text) }
            do { _ = try ChangeSequence.parse(text) } catch {
                #expect(error.code == .badRequest)
                #expect(error.reason == "Malformed sequence supplied in 'since' parameter.")
            }
        }
    }
}

@Suite struct RevisionHistoryTests {
    private func history(_ text: String) throws -> [RevID] {
        try RevID.history(fromRevisions: try JSON.parse(text))
    }

    @Test func readsStartAndIDsNewestFirst() throws {
        #expect(try history(#"{"start":3,"ids":["c","b","a"]}"#).map(\.description) == ["3-c", "2-b", "1-a"])
        #expect(try history(#"{"start":5,"ids":["e"],"other":1}"#).map(\.description) == ["5-e"])
        #expect(try history(#"{"start":2.0,"ids":["b","a"]}"#).map(\.description) == ["2-b", "1-a"])
    }

    @Test func rejectsMalformedHistories() {
        let malformed = [
            #"[1]"#, #"{"ids":["a"]}"#, #"{"start":1}"#, #"{"start":0,"ids":["a"]}"#, #"{"start":-1,"ids":["a"]}"#,
            #"{"start":"2","ids":["b"]}"#, #"{"start":2.5,"ids":["b"]}"#, #"{"start":2,"ids":[]}"#,
            // More ids than generations: the replicator built revision 0 from this and trapped.
            #"{"start":1,"ids":["a","b"]}"#,
            // Empty or non-string digests: the replicator trapped on the empty one and skipped the number.
            #"{"start":3,"ids":["c","",1]}"#, #"{"start":2,"ids":["b",1]}"#, #"{"start":1,"ids":["a b"]}"#,
        ]
        for text in malformed {
            #expect(throws: SetteeError.self, "\(text)") { try history(text) }
        }
    }

    /// Finding: a `start` above 999 999 999 999 999 999 was accepted, making revision ids with 19-digit generations
    /// that `RevID(_:)` (18 digits at most) cannot parse back, so a stored `_rev` could not be sent back.
    @Test func generationsStayParseable() throws {
        #expect(throws: SetteeError.self) { try history(#"{"start":9223372036854775807,"ids":["a","b"]}"#) }
        #expect(throws: SetteeError.self) { try history(#"{"start":1000000000000000000,"ids":["a"]}"#) }
        let top = try history(#"{"start":999999999999999999,"ids":["b","a"]}"#)
        #expect(top.map { RevID($0.description) } == top.map { Optional($0) })
    }
}

/// Findings of the `revtree` target (Fuzz/corpus/revtree/regression-*).
@Suite struct RevTreeFuzzRegressionTests {
    /// A chain whose generations reach UInt64.max: the append checked `previous + 1` and overflowed.
    @Test func aChainWithAnOverflowingGenerationIsDeclinedNotATrap() throws {
        let digest = Array("00000000000000009e3779b97f4a7c15".utf8)
        var bytes: [UInt8] = [1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 32] + digest + [0, 0]
        bytes += [2, 32] + digest + [1, 0]
        var out: [UInt8] = []
        let appended = bytes.withUnsafeBytes {
            RevTree.appendChild(toChain: $0, parent: RevID(generation: 2, digest: String(decoding: digest, as: UTF8.self)),
                                child: RevID(generation: 3, digest: "c"), deleted: false, limit: 1000, into: &out)
        }
        #expect(!appended && out.isEmpty)
        #expect(throws: SetteeError.self) { try RevTree(encoded: bytes) }
    }

    /// A one-node chain at generation Int.max − 1: appending a child at Int.max wrote bytes the decoder refuses
    /// (it takes generations below Int.max), so the append must decline. (Revision ids from requests stop at 18
    /// digits, far below; only stored bytes could carry such a generation.)
    @Test func anAppendTheDecoderWouldRefuseIsDeclined() throws {
        let bytes: [UInt8] = [1, 1, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 1, 9, 0, 0]
        let tree = try RevTree(encoded: bytes)
        let leaf = try #require(tree.nodes.last?.rev)
        #expect(leaf.generation == Int.max - 1)
        var out: [UInt8] = []
        let appended = bytes.withUnsafeBytes {
            RevTree.appendChild(toChain: $0, parent: leaf, child: RevID(generation: Int.max, digest: "fuzz"),
                                deleted: false, limit: 1000, into: &out)
        }
        #expect(!appended && out.isEmpty)
    }
}
