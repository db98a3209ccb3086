import Testing
@testable import SetteeCore

@Suite struct MD5Tests {
    /// The test suite from RFC 1321 appendix A.5.
    static let vectors: [(String, String)] = [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
        ("12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57edf4a22be3c955ac49da2e2107b67a"),
    ]

    @Test func matchesRFC1321Vectors() {
        for (input, digest) in Self.vectors {
            #expect(MD5.hex(Array(input.utf8)) == digest, "\(input)")
            #expect(MD5.hex(input.utf8) == digest)
            #expect(MD5.hash(Array(input.utf8)).count == 16)
        }
    }

    @Test func incrementalUpdatesMatchOneShotAtEverySplit() {
        let input = Array(Self.vectors[6].0.utf8) + Array(Self.vectors[5].0.utf8)
        let expected = MD5.hash(input)
        for split in 0...input.count {
            var hasher = MD5.Hasher()
            hasher.update(Array(input[..<split]))
            input[split...].withUnsafeBytes { hasher.update($0) }
            #expect(hasher.finalize() == expected, "split at \(split)")
        }
    }

    @Test func byteAtATimeMatchesOneShotAcrossBlockBoundaries() {
        for length in [55, 56, 57, 63, 64, 65, 119, 120, 128, 1000] {
            let input = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            var hasher = MD5.Hasher()
            for byte in input { hasher.update([byte]) }
            #expect(hasher.finalize() == MD5.hash(input), "length \(length)")
        }
    }

    @Test func finalizeDoesNotConsumeTheHasher() {
        var hasher = MD5.Hasher()
        hasher.update(Array("ab".utf8))
        _ = hasher.finalize()
        hasher.update(Array("c".utf8))
        #expect(Hex.encode(hasher.finalize()) == "900150983cd24fb0d6963f7d28e17f72")
    }

    @Test func hashesAMillionAs() {
        let input = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(MD5.hex(input) == "7707d6ae4e027c70eea2a935c2296f21")
    }
}
