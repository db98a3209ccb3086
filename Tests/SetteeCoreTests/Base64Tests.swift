import Foundation
import Testing
@testable import SetteeCore

@Suite struct Base64Tests {
    static let vectors: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    @Test func encodesRFC4648Vectors() {
        for (plain, encoded) in Self.vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
        }
    }

    @Test func decodesRFC4648Vectors() {
        for (plain, encoded) in Self.vectors {
            #expect(Base64.decode(encoded) == Array(plain.utf8))
        }
    }

    @Test func decodesWithoutPadding() {
        #expect(Base64.decode("Zg") == Array("f".utf8))
        #expect(Base64.decode("Zm8") == Array("fo".utf8))
        #expect(Base64.decode("Zm9vYmE") == Array("fooba".utf8))
    }

    @Test func rejectsInvalidCharactersAndPadding() {
        #expect(Base64.decode("Zm9v!") == nil)
        #expect(Base64.decode("Zm 9v") == nil)
        #expect(Base64.decode("Zm9v\n") == nil)
        #expect(Base64.decode("Zm-_") == nil)
        #expect(Base64.decode("Z") == nil)
        #expect(Base64.decode("Zm9vY") == nil)
        #expect(Base64.decode("Zg=") == nil)
        #expect(Base64.decode("Z===") == nil)
        #expect(Base64.decode("Zg==Zg==") == nil)
        #expect(Base64.decode("=") == nil)
    }

    @Test func roundTripsEveryByteValue() {
        var rng = SeededGenerator(seed: 1)
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
        let all = (0...255).map { UInt8($0) }
        #expect(Base64.decode(Base64.encode(all)) == all)
        #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
    }

    @Test func urlSafeIsTheStandardAlphabetWithoutPadding() {
        var rng = SeededGenerator(seed: 2)
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            var out: [UInt8] = Array("x".utf8)
            Base64.appendURLSafe(bytes, to: &out)
            var standard = Base64.encode(bytes)
            while standard.hasSuffix("=") { standard.removeLast() }
            let expected = "x" + standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            #expect(String(decoding: out, as: UTF8.self) == expected)
        }
    }
}
