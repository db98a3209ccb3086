import Testing
@testable import SetteeCore

@Suite struct Murmur3Tests {
    /// Reference outputs from Python's `mmh3.hash_bytes` (the C reference implementation).
    @Test(arguments: [
        ("", "00000000000000000000000000000000"),
        ("hello", "029bbd41b3a7d8cb191dae486a901e5b"),
        ("Hello world", "09c01ad2296d65bdb32ceb54cdb5b54a"),
        ("The quick brown fox jumps over the lazy dog", "6c1b07bc7bbc4be347939ac4a93c437a"),
    ])
    func matchesTheReferenceImplementation(input: String, expected: String) {
        #expect(Murmur3.hex(Array(input.utf8)) == expected)
    }

    @Test func matchesTheReferenceOnAllByteValuesAndEveryTailLength() {
        #expect(Murmur3.hex((0..<256).map { UInt8($0) }) == "b9126fdc13c3991c1ecc34ab7f07d670")
        // Every tail length 0…15 hashes without trapping and differs from its neighbours.
        let outputs = (0..<32).map { n in Murmur3.hex((0..<n).map { UInt8($0) }) }
        #expect(Set(outputs).count == 32)
    }

    /// Hashing `head` then `rest` in place equals hashing their concatenation, for every split point of
    /// inputs around the 16-byte block size.
    @Test func twoPartHashEqualsTheHashOfTheConcatenation() {
        for total in [0, 1, 7, 15, 16, 17, 31, 32, 33, 47, 100] {
            let bytes = (0..<total).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let whole = bytes.withUnsafeBytes { Murmur3.hash128($0) }
            for split in 0...total {
                let head = Array(bytes[..<split]), rest = Array(bytes[split...])
                let parts = head.withUnsafeBytes { h in rest.withUnsafeBytes { Murmur3.hash128(h, $0) } }
                #expect(parts == whole, "\(total) bytes split at \(split)")
            }
        }
    }
}
