import Testing
@testable import SetteeCore

/// `serialize(into:canonical:)` must produce exactly `serializedBytes` and `canonicalBytes`.
@Suite struct JSONFusedSerializationTests {
    static let keyPool: [String] = [
        "a", "b", "c", "z", "A", "Z", "_id", "_rev", "_attachments", "type", "name", "email", "age",
        "", " ", "0", "10", "9", "aa", "ab", "abc",
        // Shared 8-byte prefixes: the sort must fall back to comparing whole keys.
        "prefix00", "prefix00a", "prefix00b", "prefix00\u{1}", "prefix00\"", "prefix000", "longer-key-with-prefix-1",
        "longer-key-with-prefix-2", "longer-key-with-prefix-10",
        // Escaped keys: the escaped form sorts differently from the raw UTF-8.
        "a\"", "a\\", "a\n", "a\u{0}", "\u{1F}", "\t", "quote\"d", "back\\slash", "\u{7F}",
        // Unicode: byte order, not String order.
        "é", "e\u{301}", "ü", "z\u{308}", "日本", "日本語", "😀", "😀a", "\u{FFFF}", "ａ", "Ω", "ω",
    ]

    static func key(_ g: inout SeededGenerator) -> String {
        if Int.random(in: 0..<8, using: &g) == 0 {
            // A random key, sometimes long.
            let length = Int.random(in: 0..<20, using: &g)
            let scalars = (0..<length).map { _ -> Character in
                switch Int.random(in: 0..<6, using: &g) {
                case 0: return Character(Unicode.Scalar(UInt8.random(in: 0..<0x20, using: &g)))
                case 1: return Character(Unicode.Scalar(UInt32.random(in: 0xA0...0x2FFF, using: &g))!)
                default: return Character(Unicode.Scalar(UInt8.random(in: 0x20..<0x7F, using: &g)))
                }
            }
            return String(scalars)
        }
        return keyPool.randomElement(using: &g)!
    }

    static func value(_ g: inout SeededGenerator, depth: Int) -> JSON {
        let maxKind = depth > 7 ? 6 : 9
        switch Int.random(in: 0..<maxKind, using: &g) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &g))
        case 2: return .int(Int64.random(in: -1_000_000...1_000_000, using: &g))
        case 3: return .double([0.5, -0.0, 1e300, 3.0, 142.857142857142861, .nan, -2.5e-8].randomElement(using: &g)!)
        case 4, 5: return .string(key(&g))
        case 6:
            let count = Int.random(in: 0..<5, using: &g)
            return .array((0..<count).map { _ in value(&g, depth: depth + 1) })
        default:
            return .object(object(&g, depth: depth + 1))
        }
    }

    static func object(_ g: inout SeededGenerator, depth: Int) -> JSONObject {
        let count = (depth < 2 ? [0, 1, 2, 3, 5, 9, 17, 30] : [0, 1, 2, 3, 4]).randomElement(using: &g)!
        var pairs = (0..<count).map { _ in (key(&g), value(&g, depth: depth)) }
        switch Int.random(in: 0..<4, using: &g) {
        case 0: pairs.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
        case 1: pairs.sort { $1.0.utf8.lexicographicallyPrecedes($0.0.utf8) }
        default: break
        }
        return JSONObject(pairs)
    }

    static func check(_ value: JSON, sourceLocation: SourceLocation = #_sourceLocation) {
        var body: [UInt8] = []
        var canonical: [UInt8] = []
        value.serialize(into: &body, canonical: &canonical)
        #expect(body == value.serializedBytes, sourceLocation: sourceLocation)
        #expect(canonical == value.canonicalBytes, "\(value)", sourceLocation: sourceLocation)
    }

    @Test func randomValuesMatchTheSeparatePasses() {
        var g = SeededGenerator(seed: 0x5E77EE)
        for i in 0..<3000 {
            let value: JSON = i % 10 == 0 ? Self.value(&g, depth: 0) : .object(Self.object(&g, depth: 0))
            Self.check(value)
        }
    }

    @Test func deepNestingOfObjectsInArraysInObjects() {
        var g = SeededGenerator(seed: 42)
        for _ in 0..<50 {
            var value: JSON = .object(Self.object(&g, depth: 5))
            for level in 0..<40 {
                switch level % 3 {
                case 0: value = .array([.int(1), value, .object(["b": 1, "a": 2])])
                case 1: value = .object(["z": .array([value]), "m": .object(Self.object(&g, depth: 6)), "a": [:]])
                default: value = .object(["a": value, "b": .null])
                }
            }
            Self.check(value)
        }
    }

    @Test(arguments: [
        JSON.null, true, false, 0, -7, 123_456_789, 1.5, -0.0, .double(.infinity), "", "text", "a\"b\\c\n",
        [], [[]], [:], [[:]], ["a": [:]], ["b": [], "a": [:]], [1, [2, [3, ["y": 1, "x": 2]]]],
        ["type": "user", "address": ["zip": "1", "city": "D"], "tags": ["a", ["k": ["q": 1, "p": 2]]]],
    ] as [JSON])
    func fixedValues(value: JSON) {
        Self.check(value)
    }

    @Test func benchmarkDocument() {
        var o = JSONObject()
        o["type"] = "user"; o["name"] = .string("Alpha Bravo"); o["email"] = .string("user7@example.com")
        o["age"] = .int(25); o["score"] = .double(142.857142857142861); o["active"] = .bool(true)
        o["tags"] = .array([.string("alpha"), .string("foxtrot")])
        o["address"] = .object(["city": .string("Deltaville"), "zip": .string("10007")])
        o["bio"] = .string("Member since 2003. " + String(repeating: "hotel ", count: 10))
        Self.check(.object(o))
        var body: [UInt8] = []
        var canonical: [UInt8] = []
        JSON.object(o).serialize(into: &body, canonical: &canonical)
        #expect(String(decoding: canonical, as: UTF8.self).hasPrefix(#"{"active":true,"address":{"city":"Deltaville","zip":"10007"},"age":25,"#))
    }

    @Test func largeDocumentsSpillTheScratchToTheHeap() {
        var g = SeededGenerator(seed: 7)
        var outer = JSONObject()
        for i in (0..<300).reversed() {
            var inner = JSONObject()
            for j in (0..<12).reversed() { inner["k\(j)"] = .string(String(repeating: "x", count: (i + j) % 40)) }
            outer["key\(i)"] = i % 3 == 0 ? .object(inner) : Self.value(&g, depth: 3)
        }
        Self.check(.object(outer))
        Self.check(.array([.object(outer), .object(outer)]))
    }

    @Test func appendsToNonEmptyBuffers() {
        var g = SeededGenerator(seed: 99)
        for _ in 0..<200 {
            let value = JSON.object(Self.object(&g, depth: 1))
            let bodyPrefix: [UInt8] = Array("body-prefix:".utf8)
            let canonicalPrefix: [UInt8] = Array(repeating: 0xEE, count: Int.random(in: 0..<2000, using: &g))
            var body = bodyPrefix
            var canonical = canonicalPrefix
            value.serialize(into: &body, canonical: &canonical)
            #expect(body == bodyPrefix + value.serializedBytes)
            #expect(canonical == canonicalPrefix + value.canonicalBytes)
            // Twice in a row appends twice.
            value.serialize(into: &body, canonical: &canonical)
            #expect(body == bodyPrefix + value.serializedBytes + value.serializedBytes)
            #expect(canonical == canonicalPrefix + value.canonicalBytes + value.canonicalBytes)
        }
    }
}
