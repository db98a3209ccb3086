import Testing
@testable import SetteeCore

@Suite struct JSONErrorTests {
    private func error(_ text: String) -> JSONError? {
        do {
            _ = try JSON.parse(text)
            return nil
        } catch {
            return error
        }
    }

    private func error(_ bytes: [UInt8]) -> JSONError? {
        do {
            _ = try JSON.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [
        ("[1,]", 3), ("{\"a\":1,}", 7), ("NaN", 0), ("Infinity", 0), ("[1 2]", 3), ("{1:2}", 1),
        ("{\"a\" 1}", 5), ("{\"a\":1 \"b\":2}", 7), ("trUe", 2), ("nul1", 3), ("'a'", 0),
        ("\u{A0}1", 0), ("]", 0), ("[,1]", 1), ("{,}", 1), ("// c\n1", 0),
    ] as [(String, Int)])
    func unexpectedCharacterReportsItsOffset(text: String, offset: Int) {
        #expect(error(text) == JSONError(kind: .unexpectedCharacter, offset: offset), "\(text)")
    }

    @Test(arguments: ["", "   ", "[", "[1", "[1,", "{", "{\"a\"", "{\"a\":", "{\"a\":1", "\"abc", "\"a\\", "\"\\u12", "tru", "\"\\ud800\\"])
    func truncatedInputIsUnexpectedEndAtTheEnd(text: String) {
        #expect(error(text) == JSONError(kind: .unexpectedEnd, offset: text.utf8.count), "\(text)")
    }

    @Test(arguments: [
        ("01", 1), ("-01", 2), ("1.", 2), ("1.e5", 2), ("-", 1), ("-a", 1), ("1e", 2), ("1e+", 3), ("[1.5e]", 5),
        ("-Infinity", 1), (".5", 0), ("1e400", 0), ("-1e400", 0),
    ] as [(String, Int)])
    func malformedNumberIsInvalidNumber(text: String, offset: Int) {
        let expectedKind: JSONError.Kind = text == ".5" ? .unexpectedCharacter : .invalidNumber
        #expect(error(text) == JSONError(kind: expectedKind, offset: offset), "\(text)")
    }

    @Test(arguments: [
        (#""\x""#, 1), (#""ab\u12G4""#, 3), (#""\ud800""#, 1), (#""\udc00""#, 1), (#""a\ud800\u0041""#, 2),
        (#""\ud800x""#, 1), (#""\ud800\n""#, 1), (#""\ud800\ud800""#, 1), (#""\U0041""#, 1),
    ] as [(String, Int)])
    func badEscapeIsInvalidEscapeAtTheBackslash(text: String, offset: Int) {
        #expect(error(text) == JSONError(kind: .invalidEscape, offset: offset), "\(text)")
    }

    @Test(arguments: [
        ([0x22, 0x80, 0x22], 1),                   // stray continuation byte
        ([0x22, 0xC0, 0x80, 0x22], 1),             // overlong NUL
        ([0x22, 0xC1, 0xBF, 0x22], 1),             // overlong
        ([0x22, 0xE0, 0x80, 0x80, 0x22], 1),       // overlong 3-byte
        ([0x22, 0xF0, 0x80, 0x80, 0x80, 0x22], 1), // overlong 4-byte
        ([0x22, 0x61, 0xED, 0xA0, 0x80, 0x22], 2), // encoded surrogate U+D800
        ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1), // U+110000
        ([0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], 1), // invalid lead byte
        ([0x22, 0xE2, 0x82, 0x22], 1),             // truncated sequence
        ([0x22, 0xC3, 0x41, 0x22], 1),             // bad continuation
        ([0x22, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0xFF, 0x22], 10), // after a fast-scanned word
        ([0x22, 0x5C, 0x6E, 0xFF, 0x22], 3),       // after an escape
        ([0x22, 0xE2, 0x82], 1),                   // truncated at end of input
    ] as [([UInt8], Int)])
    func malformedUTF8IsInvalidUTF8AtTheLeadByte(bytes: [UInt8], offset: Int) {
        #expect(error(bytes) == JSONError(kind: .invalidUTF8, offset: offset), "\(bytes)")
    }

    @Test func validMultiByteUTF8Boundaries() throws {
        // U+0080, U+07FF, U+0800, U+FFFF, U+10000, U+10FFFF, U+E000 (just past the surrogates)
        let text = "\"\u{80}\u{7FF}\u{800}\u{FFFF}\u{10000}\u{10FFFF}\u{E000}\""
        #expect(try JSON.parse(text) == .string("\u{80}\u{7FF}\u{800}\u{FFFF}\u{10000}\u{10FFFF}\u{E000}"))
    }

    @Test(arguments: [("\"a\u{0}b\"", 2), ("\"\n\"", 1), ("\"abcdefghij\u{1F}\"", 11), ("\"\\t\u{9}\"", 3)] as [(String, Int)])
    func rawControlCharacterInStringIsAnError(text: String, offset: Int) {
        #expect(error(text) == JSONError(kind: .controlCharacterInString, offset: offset), "\(text.debugDescription)")
    }

    @Test(arguments: [("1 2", 2), ("{} x", 3), ("[]]", 2), ("\"a\"\"b\"", 3), ("null,", 4), ("0 \n\t1", 4), ("[1]\u{0B}", 3)] as [(String, Int)])
    func dataAfterTheValueIsTrailingData(text: String, offset: Int) {
        #expect(error(text) == JSONError(kind: .trailingData, offset: offset), "\(text)")
    }

    @Test func descriptionNamesTheCharacterAndOffset() {
        let text = #"{"a": [1, 2,], "b": 3}"#
        #expect(error(text)?.description == "Unexpected character ']' at byte 12")
        #expect(error("[1,")?.description == "Unexpected end of input at byte 3")
        #expect(error("\"\u{1}\"")?.description == "Unescaped control character 0x01 in string at byte 1")
        #expect(JSONError(kind: .tooDeep, offset: 9).description == "Arrays and objects nested too deeply at byte 9")
    }
}
