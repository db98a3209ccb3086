import Testing
@testable import SetteeCore

@Suite struct JSONParsingTests {
    @Test func parsesEveryKindOfValue() throws {
        let json = try JSON.parse(#" {"n": null, "t": true, "f": false, "i": -42, "d": 2.5, "s": "hi", "a": [1, [2]], "o": {"k": "v"}} "#)
        #expect(json["n"] == .null)
        #expect(json["t"] == .bool(true))
        #expect(json["f"] == .bool(false))
        #expect(json["i"] == .int(-42))
        #expect(json["d"] == .double(2.5))
        #expect(json["s"] == .string("hi"))
        #expect(json["a"] == .array([.int(1), .array([.int(2)])]))
        #expect(json["o"]?["k"] == "v")
    }

    @Test func parsesScalarsAtTopLevel() throws {
        #expect(try JSON.parse("7") == .int(7))
        #expect(try JSON.parse(#""x""#) == .string("x"))
        #expect(try JSON.parse("null") == .null)
        #expect(try JSON.parse(" \t\r\ntrue\n") == .bool(true))
    }

    @Test func integerWithoutFractionOrExponentIsInt() throws {
        #expect(try JSON.parse("1") == .int(1))
        #expect(try JSON.parse("-0") == .int(0))
        #expect(try JSON.parse("1.0") == .double(1.0))
        #expect(try JSON.parse("1e2") == .double(100))
        #expect(try JSON.parse("1E+2") == .double(100))
        #expect(try JSON.parse("1.0") != JSON.int(1))
    }

    @Test func int64BoundsStayIntAndBeyondBecomeDouble() throws {
        #expect(try JSON.parse("9223372036854775807") == .int(.max))
        #expect(try JSON.parse("-9223372036854775808") == .int(.min))
        #expect(try JSON.parse("9223372036854775808") == .double(9223372036854775808.0))
        #expect(try JSON.parse("-9223372036854775809") == .double(-9223372036854775809.0))
        #expect(try JSON.parse("123456789012345678901234567890") == .double(1.2345678901234568e29))
    }

    @Test func doublesParseToTheNearestValue() throws {
        let cases: [(String, Double)] = [
            ("0.1", 0.1), ("-0.0", -0.0), ("3.14159", 3.14159), ("1e-5", 1e-5), ("2.5E-3", 0.0025),
            ("1.7976931348623157e308", 1.7976931348623157e308), ("5e-324", Double.leastNonzeroMagnitude),
            ("0.30000000000000004", 0.30000000000000004), ("123456789.123456789", 123456789.123456789),
            ("1.00000000000000000000000000001", 1.0), ("0.000000000000000000000000000001", 1e-30),
            ("9007199254740993", 9007199254740992), ("9007199254740993.0", 9007199254740992),
            ("1e-400", 0),
        ]
        for (text, expected) in cases {
            let parsed = try JSON.parse(text)
            #expect(parsed.doubleValue == expected, "\(text)")
            #expect(parsed.doubleValue?.sign == expected.sign, "\(text)")
        }
        #expect(try JSON.parse("9007199254740993") == .int(9007199254740993))
    }

    @Test func unicodeEscapesDecode() throws {
        #expect(try JSON.parse(#""\u0041\u00e9\u4e2D""#) == .string("Aé中"))
        #expect(try JSON.parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{C}\n\r\t"))
        #expect(try JSON.parse(#""\u0000""#) == .string("\u{0}"))
    }

    @Test func surrogatePairEscapesDecodeToOneScalar() throws {
        #expect(try JSON.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSON.parse(#""x\uD834\uDD1Ey""#) == .string("x𝄞y"))
    }

    @Test func rawUTF8PassesThrough() throws {
        #expect(try JSON.parse(#"{"clé": "日本語 😀"}"#)["clé"] == "日本語 😀")
    }

    @Test func duplicateKeyKeepsFirstPositionAndLastValue() throws {
        let json = try JSON.parse(#"{"a": 1, "b": 2, "a": 3}"#)
        #expect(json.objectValue?.keys == ["a", "b"])
        #expect(json["a"] == .int(3))
        #expect(json.jsonString == #"{"a":3,"b":2}"#)
    }

    @Test func duplicateKeysInLargeObjectsAreMergedToo() throws {
        var text = "{"
        for i in 0..<40 { text += #""k\#(i)":\#(i),"# }
        text += #""k5":"last","\u006b7":"escaped"}"#
        let object = try #require(try JSON.parse(text).objectValue)
        #expect(object.count == 40)
        #expect(object.keys.first == "k0")
        #expect(object["k5"] == "last")
        #expect(object["k7"] == "escaped")
        #expect(object.keys[5] == "k5")
    }

    @Test func escapedKeyEqualsPlainKeyForDuplicates() throws {
        let json = try JSON.parse(#"{"ab": 1, "\u0061b": 2}"#)
        #expect(json.objectValue?.count == 1)
        #expect(json["ab"] == .int(2))
    }

    @Test func keyOrderIsPreservedFromInput() throws {
        let json = try JSON.parse(#"{"zeta": 1, "alpha": 2, "mid": 3, "_id": 4}"#)
        #expect(json.objectValue?.keys == ["zeta", "alpha", "mid", "_id"])
    }

    @Test func parsesFromBytesAndBufferAlike() throws {
        let text = #"{"a":[1,2,{"b":null}]}"#
        let bytes = Array(text.utf8)
        let fromBuffer = try bytes.withUnsafeBytes { try JSON.parse($0) }
        #expect(try JSON.parse(bytes) == fromBuffer)
        #expect(try JSON.parse(text) == fromBuffer)
    }

    @Test func longStringsWithAndWithoutEscapes() throws {
        let plain = String(repeating: "abcdefgh", count: 50)
        #expect(try JSON.parse("\"\(plain)\"") == .string(plain))
        let escaped = String(repeating: #"ab\"cd\\é\n"#, count: 30)
        let expected = String(repeating: "ab\"cd\\é\n", count: 30)
        #expect(try JSON.parse("\"\(escaped)\"") == .string(expected))
    }

    @Test func depthLimitAllowsExactlyMaxDepth() throws {
        let limits = JSONLimits(maxDepth: 4)
        #expect(throws: Never.self) { try JSON.parse("[[[[1]]]]", limits: limits) }
        #expect(throws: Never.self) { try JSON.parse(#"{"a":[{"b":[]}]}"#, limits: limits) }
        #expect(throws: JSONError(kind: .tooDeep, offset: 4)) { try JSON.parse("[[[[[1]]]]]", limits: limits) }
        let deep = String(repeating: "[", count: 300) + String(repeating: "]", count: 300)
        #expect(throws: JSONError(kind: .tooDeep, offset: 256)) { try JSON.parse(deep) }
        let ok = String(repeating: "[", count: 256) + String(repeating: "]", count: 256)
        #expect(throws: Never.self) { try JSON.parse(ok) }
    }

    @Test func sizeLimitRejectsLongerInput() throws {
        let limits = JSONLimits(maxBytes: 10)
        #expect(throws: Never.self) { try JSON.parse("[1,2,3,44]", limits: limits) }
        #expect(throws: JSONError(kind: .tooLarge, offset: 10)) { try JSON.parse("[1,2,3,444]", limits: limits) }
    }
}
