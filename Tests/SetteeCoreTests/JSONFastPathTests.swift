import Testing
@testable import SetteeCore

/// Edge cases of the parser's and writer's fast paths (small strings, prefix-keyed sorting).
@Suite struct JSONFastPathTests {
    @Test func smallStringLayoutCheckPasses() {
        #if (arch(x86_64) || arch(arm64)) && _endian(little)
        #expect(SmallString.isSupported)
        #endif
    }

    @Test func stringsOfEveryShortLengthParseExactly() throws {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        for n in 0...20 {
            let text = String(decoding: alphabet[..<n], as: UTF8.self)
            for padding in [0, 1, 7, 20] {
                // The string at the very end of the input, and with room after it.
                let doc = #"{"\#(text)":"\#(text)"}"# + String(repeating: " ", count: padding)
                let parsed = try JSON.parse(doc)
                #expect(parsed[text]?.stringValue == text)
                #expect(parsed.objectValue?.keys == [text])
                let value = try JSON.parse(#""\#(text)""# + String(repeating: " ", count: padding))
                #expect(value.stringValue == text)
                #expect(value.stringValue?.utf8.count == n)
                #expect(value.stringValue.map { Array($0.utf8) } == Array(alphabet[..<n]))
            }
        }
    }

    @Test func shortNonASCIIAndEscapedStringsParse() throws {
        for text in ["é", "héllo", "日本", "a\u{1F600}b", "ÿÿÿÿÿÿÿ", "x\u{7F}y"] {
            let parsed = try JSON.parse(JSON.string(text).jsonString + "          ")
            #expect(parsed.stringValue == text)
            #expect(parsed.stringValue.map { Array($0.utf8) } == Array(text.utf8))
        }
        #expect(try JSON.parse(#""a\nb""#).stringValue == "a\nb")
        #expect(try JSON.parse(#"{"k\u0041":1}"#)["kA"]?.intValue == 1)
    }

    @Test func parsedShortStringsBehaveLikeOrdinaryStrings() throws {
        let parsed = try JSON.parse(#"["user","alpha","Deltaville","abcdefghijklmno"]"#)
        let expected = ["user", "alpha", "Deltaville", "abcdefghijklmno"]
        #expect(parsed.arrayValue?.compactMap(\.stringValue) == expected)
        var set = Set(expected)
        for value in parsed.arrayValue ?? [] { set.remove(value.stringValue!) }
        #expect(set.isEmpty)
        #expect(parsed[0]?.stringValue.map { $0 + "s" } == "users")
        #expect(parsed[3]?.stringValue?.hasPrefix("abc") == true)
    }

    @Test func canonicalSortHandlesSharedPrefixesAndManyKeys() throws {
        // Keys equal in their first 8 bytes, prefixes of each other, embedded NUL, non-ASCII.
        let keys = ["abcdefghZ", "abcdefgh", "abcdefghA", "abcdefgh\u{0}", "a", "", "ab", "é", "Z", "_id",
                    "abcdefgi", "\u{7F}", "\u{80}", "日本", "abcdefghij", "abcdefghi"]
        var object = JSONObject()
        for (i, key) in keys.enumerated() { object[key] = .int(Int64(i)) }
        let expected = keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        func keyOrder(_ json: JSON) throws -> [String] {
            let bytes = json.canonicalBytes
            // Re-parse keeps the written order.
            return try JSON.parse(bytes).objectValue?.keys ?? []
        }
        #expect(try keyOrder(.object(object)) == expected)

        // More than 16 keys takes the other sort.
        var big = JSONObject()
        let many = (0..<40).map { "key\(($0 * 7919) % 40)" } + keys
        for (i, key) in many.enumerated() { big[key] = .int(Int64(i)) }
        #expect(try keyOrder(.object(big)) == many.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })

        // Nested objects inside arrays are sorted too.
        let nested: JSON = ["b": [["y": 1, "x": 2]], "a": ["d": ["q": 1, "p": 2], "c": 3]]
        #expect(String(decoding: nested.canonicalBytes, as: UTF8.self)
                == #"{"a":{"c":3,"d":{"p":2,"q":1}},"b":[{"x":2,"y":1}]}"#)
    }

    @Test func benchmarkShapedDocumentRoundTrips() throws {
        var o = JSONObject()
        o["type"] = "user"
        o["name"] = .string("Alpha Bravo")
        o["email"] = .string("user17@example.com")
        o["age"] = .int(35)
        o["score"] = .double(17.0 / 7.0)
        o["active"] = .bool(true)
        o["tags"] = .array([.string("alpha"), .string("foxtrot")])
        o["address"] = .object(["city": .string("Deltaville"), "zip": .string("10017")])
        o["bio"] = .string("Member since 2003. " + String(repeating: "hotel ", count: 10))
        let json = JSON.object(o)
        let parsed = try JSON.parse(json.serializedBytes)
        #expect(parsed == json)
        #expect(parsed.serializedBytes == json.serializedBytes)
        #expect(String(decoding: parsed.canonicalBytes, as: UTF8.self).hasPrefix(#"{"active":true,"address":{"city":"Deltaville","zip":"10017"},"age":35,"bio":"#))
    }

    /// A stored body (written from a JSONObject: no key repeats) is read only up to its last wanted member; any
    /// other input keeps the full scan, where a repeated key's last value wins.
    @Test func storedBodiesAreReadUpToTheLastWantedMember() throws {
        let selector = JSONMemberSelector(["age", "city"])
        func parse(_ text: String, stored: Bool) throws -> JSON {
            let bytes = Array(text.utf8)
            return try bytes.withUnsafeBytes { stored ? try selector.parseStored($0) : try selector.parse($0) }
        }
        let body = JSON.object(["city": "Oslo", "name": "x", "age": 7, "tags": ["a", "b"], "text": "long text"])
        let text = String(decoding: body.serializedBytes, as: UTF8.self)
        #expect(try parse(text, stored: true) == parse(text, stored: false))
        #expect(try parse(text, stored: true) == JSON.object(["city": "Oslo", "age": 7]))
        // Nothing after the last wanted member is read (here, bytes that are not JSON at all).
        let cut = #"{"age":7,"city":"Oslo","text":"#
        #expect(try parse(cut, stored: true) == JSON.object(["age": 7, "city": "Oslo"]))
        #expect(throws: JSONError.self) { try parse(cut, stored: false) }
        // A missing member is looked for to the end.
        #expect(try parse(#"{"age":7,"name":"n"}"#, stored: true) == JSON.object(["age": 7]))
        // A body that repeats a key is not a stored body: parse(_:) keeps the last value.
        #expect(try parse(#"{"age":1,"city":"A","age":2}"#, stored: false) == JSON.object(["age": 2, "city": "A"]))
    }

    /// Strings are skipped eight bytes at a time: a quote or backslash at every offset from a word's start, escaped
    /// quotes and backslashes, and strings ending near the buffer's end find the same members as the full parser.
    @Test func skippingStringsWordWiseFindsEveryQuoteAndEscape() throws {
        // (`#` and `]` are one above `"` and `\\`: after a match, they are where the word-wise test's borrow can
        // raise a false one.)
        let pieces = ["", "a", "\\\"", "\\\\", "\\n", "é", "\\u00e9", "xyz\\\"w", "\\\\\\\"", "\\\"#", "\\\\]#", "#]"]
        for pad in 0..<17 {
            for piece in pieces {
                let value = String(repeating: "p", count: pad) + piece + String(repeating: "q", count: (pad * 3) % 11)
                let text = #"{"text":"\#(value)","n":\#(pad),"after":"\#(piece)"}"#
                let bytes = Array(text.utf8)
                let full = try JSON.parse(bytes)
                let fast = try bytes.withUnsafeBytes { try JSONMemberSelector(["n", "after"]).parseStored($0) }
                #expect(fast == JSON.object(["n": full["n"]!, "after": full["after"]!]), "\(text)")
                bytes.withUnsafeBytes { raw in
                    let key = Array("n".utf8)
                    key.withUnsafeBytes { k in
                        guard case .value(let range) = JSON.locateStoredMember(raw, path: [k]) else {
                            Issue.record("n not found in \(text)")
                            return
                        }
                        #expect(String(decoding: raw[range], as: UTF8.self) == "\(pad)")
                    }
                }
            }
        }
        // An unterminated string is not followed past the end: the scan can't decide.
        for cut in [#"{"text":"abcdefghijklmnop\"#, #"{"text":"abcdefghijklmno"#, #"{"text":"abc\"#] {
            let bytes = Array(cut.utf8)
            let found = bytes.withUnsafeBytes { raw in
                Array("n".utf8).withUnsafeBytes { JSON.locateStoredMember(raw, path: [$0]) }
            }
            #expect(found == .undecided, "\(cut)")
            #expect(throws: JSONError.self) { try bytes.withUnsafeBytes { try JSONMemberSelector(["n"]).parseStored($0) } }
        }
    }

    /// A key that is not ASCII can equal another as Swift strings compare without equal bytes (a decomposed "é",
    /// the Kelvin sign and "K"): the byte scan leaves those to the parser, so both find the member.
    @Test func canonicallyEquivalentKeysAreFoundAsTheParserFindsThem() throws {
        for (stored, asked) in [("cafe\u{301}", "café"), ("café", "cafe\u{301}"), ("\u{212A}elvin", "Kelvin")] {
            let text = #"{"a":1,"\#(stored)":2,"z":3}"#
            let bytes = Array(text.utf8)
            let parsed = try JSON.parse(bytes)
            #expect(parsed[asked] == .int(2), "\(asked)")
            let member = bytes.withUnsafeBytes { JSON.storedMember($0, key: asked) }
            #expect(member == .undecided, "\(asked)")
            let selected = try bytes.withUnsafeBytes { try JSONMemberSelector([asked]).parseStored($0) }
            #expect(selected[asked] == .int(2), "\(asked)")
            // An ASCII key is still found from the bytes.
            #expect(bytes.withUnsafeBytes { JSON.storedMember($0, key: "z") } == .value(.int(3)))
        }
    }

    /// Keys that are equal strings but not equal bytes (canonical equivalence) are one key, as JSONObject compares
    /// keys: the first spelling's place, the last value — in small objects (the parser's own duplicate check) and
    /// large ones (the hashed index) alike, so parse → serialize → parse gives the same object.
    @Test func canonicallyEquivalentKeysAreOneKey() throws {
        let filler = (0..<20).map { #""f\#($0)":\#($0)"# }.joined(separator: ",")
        for extra in ["", filler + ","] {
            for (first, second) in [("cafe\\u0301", "caf\\u00e9"), ("K", "\\u212A"), ("Kelvin", "\\u212Aelvin"),
                                    ("a;", "a\\u037E"), ("cafe\u{301}", "café")] {
                let text = #"{\#(extra)"\#(first)":1,"x":0,"\#(second)":2}"#
                let parsed = try JSON.parse(Array(text.utf8))
                guard case .object(let object) = parsed else { Issue.record("not an object: \(text)"); continue }
                #expect(object.count == (extra.isEmpty ? 2 : 22), "\(text)")
                let firstKey = try JSON.parse(Array(#""\#(first)""#.utf8)).stringValue!
                #expect(object[firstKey] == .int(2), "\(text)")
                #expect(object.keys.firstIndex(of: firstKey) == (extra.isEmpty ? 0 : 20), "\(text)")
                let again = try JSON.parse(parsed.serializedBytes)
                #expect(again == parsed, "\(text)")
            }
        }
        // Keys that only look alike stay apart.
        let apart = try JSON.parse(Array(#"{"K":1,"k":2,"e\u0301":3,"é":4,"e":5}"#.utf8))
        #expect(apart.objectValue?.count == 4)
    }
}
