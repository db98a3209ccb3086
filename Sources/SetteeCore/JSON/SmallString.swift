/// Builds short ASCII `String`s straight from their bytes.
///
/// On 64-bit platforms a `String` of up to 15 UTF-8 bytes is stored inline ("small string"): the
/// bytes in order across two 64-bit words, with the top byte of the second word holding flags
/// (`0xE0` = immortal, small, ASCII) and the count. That layout is part of the standard library's
/// ABI (inlinable code in every client reads it), so building those two words and reinterpreting
/// them skips `String(decoding:)`'s validation and out-of-line calls, which the parser does not
/// need since it has checked the bytes itself.
///
/// As a guard against a different layout, ``isSupported`` compares the words built here with what
/// `String(decoding:)` produces for every length once per process; if anything differs (or the
/// platform is not 64-bit little-endian) the parser never uses this.
enum SmallString {
    static let capacity = 15

    /// Whether ``ascii(low:high:count:)`` produces exactly the strings `String(decoding:)` would.
    static let isSupported: Bool = {
        #if (arch(x86_64) || arch(arm64)) && _endian(little)
        guard MemoryLayout<String>.size == 16 else { return false }
        let sample: [UInt8] = Array("a1B2c3D4e5F6g7H8".utf8)
        for n in 0...capacity {
            var low: UInt64 = 0
            var high: UInt64 = 0
            for k in 0..<8 { low |= UInt64(sample[k]) << (8 * k) }
            for k in 0..<8 { high |= UInt64(sample[8 + k]) << (8 * k) }
            guard let built = build(low: low, high: high, count: n) else { return false }
            let expected = String(decoding: sample[..<n], as: UTF8.self)
            let builtBits = unsafeBitCast(built, to: (UInt64, UInt64).self)
            let expectedBits = unsafeBitCast(expected, to: (UInt64, UInt64).self)
            guard builtBits == expectedBits, built == expected, built.utf8.count == n,
                  Array(built.utf8) == Array(sample[..<n]) else { return false }
        }
        return true
        #else
        return false
        #endif
    }()

    /// The string whose UTF-8 is the first `count` (≤ 15) bytes of `low` then `high` (little-endian),
    /// or `nil` if any of them is not ASCII. Bytes past `count` are ignored. Only call when
    /// ``isSupported``.
    @inline(__always)
    static func ascii(low: UInt64, high: UInt64, count: Int) -> String? {
        build(low: low, high: high, count: count)
    }

    @inline(__always)
    private static func build(low: UInt64, high: UInt64, count n: Int) -> String? {
        // Keep the first n bytes: shifts of 64 or more are zero in Swift's smart shifts.
        let lowMask: UInt64 = n >= 8 ? ~0 : (1 << UInt64(8 * n)) &- 1
        let highMask: UInt64 = n <= 8 ? 0 : (1 << UInt64(8 * (n - 8))) &- 1
        let lo = low & lowMask
        let hi = high & highMask
        guard (lo | hi) & 0x8080_8080_8080_8080 == 0 else { return nil }
        #if (arch(x86_64) || arch(arm64)) && _endian(little)
        return unsafeBitCast((lo, hi | (0xE0 | UInt64(n)) << 56), to: String.self)
        #else
        return nil
        #endif
    }
}
