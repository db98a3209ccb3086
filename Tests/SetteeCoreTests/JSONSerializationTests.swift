import Testing
@testable import SetteeCore

@Suite struct JSONSerializationTests {
    @Test func serializesCompactlyInStoredKeyOrder() {
        let json: JSON = ["z": 1, "a": [true, false, nil], "m": ["k": "v"], "d": 1.5]
        #expect(json.jsonString == #"{"z":1,"a":[true,false,null],"m":{"k":"v"},"d":1.5}"#)
        #expect(json.description == json.jsonString)
        #expect(json.serializedBytes == Array(json.jsonString.utf8))
    }

    @Test func serializeIntoAppendsToExistingBytes() {
        var buffer = Array("x=".utf8)
        JSON.array([1, "a"]).serialize(into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == #"x=[1,"a"]"#)
    }

    @Test func emptyContainers() {
        #expect(JSON.array([]).jsonString == "[]")
        #expect(JSON.object([:]).jsonString == "{}")
    }

    @Test func integersPrintInDecimal() {
        #expect(JSON.int(0).jsonString == "0")
        #expect(JSON.int(7).jsonString == "7")
        #expect(JSON.int(-7).jsonString == "-7")
        #expect(JSON.int(1234567890).jsonString == "1234567890")
        #expect(JSON.int(.max).jsonString == "9223372036854775807")
        #expect(JSON.int(.min).jsonString == "-9223372036854775808")
    }

    @Test func doublesKeepTheirDoubleness() throws {
        #expect(JSON.double(3).jsonString == "3.0")
        #expect(JSON.double(-0.0).jsonString == "-0.0")
        #expect(JSON.double(0.1).jsonString == "0.1")
        #expect(JSON.double(1e-5).jsonString == "1e-05")
        #expect(JSON.double(1e300).jsonString == "1e+300")
        #expect(try JSON.parse(JSON.double(3).jsonString) == .double(3))
        #expect(try JSON.parse(JSON.double(1e21).jsonString) == .double(1e21))
    }

    @Test func nonFiniteDoublesBecomeNull() {
        #expect(JSON.double(.nan).jsonString == "null")
        #expect(JSON.double(.infinity).jsonString == "null")
        #expect(JSON.array([.double(-.infinity)]).jsonString == "[null]")
    }

    @Test func stringsEscapeQuotesBackslashesAndControlCharacters() {
        let json = JSON.string("q\"b\\s/\u{8}\u{C}\n\r\t\u{0}\u{1F}\u{7F}é😀")
        #expect(json.jsonString == #""q\"b\\s/\b\f\n\r\t\u0000\u001f"# + "\u{7F}é😀\"")
    }

    @Test func keysAreEscapedLikeStrings() {
        let json: JSON = ["a\"b": 1]
        #expect(json.jsonString == #"{"a\"b":1}"#)
    }

    @Test func canonicalFormSortsKeysRecursivelyByUTF8() {
        let json: JSON = ["b": 1, "a": ["d": 1, "c": [["f": 1, "e": 2]]], "é": 0, "Z": 0, "_id": 0]
        let canonical = String(decoding: json.canonicalBytes, as: UTF8.self)
        #expect(canonical == #"{"Z":0,"_id":0,"a":{"c":[{"e":2,"f":1}],"d":1},"b":1,"é":0}"#)
    }

    @Test func canonicalFormIgnoresKeyOrder() throws {
        let one = try JSON.parse(#"{"x": {"p": 1, "q": [1.5, "s"]}, "y": null, "a": true}"#)
        let two = try JSON.parse(#"{"a": true, "y": null, "x": {"q": [1.5, "s"], "p": 1}}"#)
        #expect(one.serializedBytes != two.serializedBytes)
        #expect(one.canonicalBytes == two.canonicalBytes)
        var appended: [UInt8] = []
        one.canonicalize(into: &appended)
        #expect(appended == two.canonicalBytes)
    }

    @Test func canonicalFormOrdersByBytesNotByCharacters() {
        // U+FF5E (EF BD 9E) sorts after U+1F600 (F0 9F 98 80) in UTF-16 but before it in UTF-8.
        let json: JSON = ["😀": 1, "～": 2]
        #expect(String(decoding: json.canonicalBytes, as: UTF8.self) == #"{"～":2,"😀":1}"#)
    }

    @Test func canonicalFormOfArraysKeepsElementOrder() {
        let json: JSON = [3, 1, 2]
        #expect(json.canonicalBytes == json.serializedBytes)
    }
}
