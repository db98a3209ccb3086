/// Lowercase hexadecimal: digests, revision ids, generated document ids and uuids.
package enum Hex {
    private static let digits: StaticString = "0123456789abcdef"

    /// `[0xde, 0xad]` → `"dead"`.
    package static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (i, byte) in bytes.enumerated() {
                out[2 * i] = digits.utf8Start[Int(byte >> 4)]
                out[2 * i + 1] = digits.utf8Start[Int(byte & 0xF)]
            }
            return bytes.count * 2
        }
    }

    /// `[0xde, 0xad]` → `"dead"`.
    package static func encode(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { encode($0) }
    }

    /// `count` random bytes as `2 × count` hex characters (server-generated document ids, uuids, tokens).
    package static func random(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return encode((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}
