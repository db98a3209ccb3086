/// MurmurHash3 x64 128-bit (Austin Appleby's public-domain reference), seed 0.
///
/// A fast non-cryptographic hash. Settee uses it for revision digests: deterministic on every node and
/// platform (the output is defined byte by byte, little-endian), about ten times faster than MD5.
/// Not for security: anyone can construct collisions, as with MD5.
///
/// ```swift
/// Murmur3.hex(Array("Hello world".utf8))   // "09c01ad2296d65bdb32ceb54cdb5b54a"
/// ```
public enum Murmur3 {
    private static let c1: UInt64 = 0x87c3_7b91_1142_53d5
    private static let c2: UInt64 = 0x4cf5_ad43_2745_937f

    /// The 128-bit hash as `(h1, h2)`.
    public static func hash128(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> (UInt64, UInt64) {
        var state = State(seed: seed)
        state.absorbBlocks(bytes)
        return state.finish(tail: UnsafeRawBufferPointer(rebasing: bytes[(bytes.count & ~15)...]), count: bytes.count)
    }

    /// The 128-bit hash of `head` followed by `rest`, without copying them into one buffer.
    public static func hash128(_ head: UnsafeRawBufferPointer, _ rest: UnsafeRawBufferPointer,
                               seed: UInt64 = 0) -> (UInt64, UInt64) {
        var state = State(seed: seed)
        state.absorbBlocks(head)
        let headTail = head.count & 15
        var restStart = 0
        // `head`'s last partial block, completed from the start of `rest`, in a 16-byte buffer.
        var block: (UInt64, UInt64) = (0, 0)
        let total = head.count + rest.count
        return withUnsafeMutableBytes(of: &block) { block -> (UInt64, UInt64) in
            if headTail > 0 {
                block.copyMemory(from: UnsafeRawBufferPointer(rebasing: head[(head.count - headTail)...]))
                restStart = min(16 - headTail, rest.count)
                if restStart > 0 {
                    UnsafeMutableRawBufferPointer(rebasing: block[headTail..<(headTail + restStart)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: rest[..<restStart]))
                }
                if headTail + restStart < 16 {
                    return state.finish(tail: UnsafeRawBufferPointer(rebasing: block[..<(headTail + restStart)]), count: total)
                }
                state.absorbBlocks(UnsafeRawBufferPointer(block))
            }
            let remaining = UnsafeRawBufferPointer(rebasing: rest[restStart...])
            state.absorbBlocks(remaining)
            return state.finish(tail: UnsafeRawBufferPointer(rebasing: remaining[(remaining.count & ~15)...]), count: total)
        }
    }

    /// The running state: whole 16-byte blocks are absorbed, then the tail and length finish it.
    private struct State {
        var h1: UInt64
        var h2: UInt64

        init(seed: UInt64) {
            h1 = seed
            h2 = seed
        }

        /// Absorbs every whole 16-byte block of `bytes` (a trailing partial block is left for `finish`).
        @inline(__always)
        mutating func absorbBlocks(_ bytes: UnsafeRawBufferPointer) {
            guard let base = bytes.baseAddress else { return }
            for i in 0..<(bytes.count / 16) {
                var k1 = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i * 16, as: UInt64.self))
                var k2 = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i * 16 + 8, as: UInt64.self))
                k1 &*= c1; k1 = rotl(k1, 31); k1 &*= c2; h1 ^= k1
                h1 = rotl(h1, 27); h1 &+= h2; h1 = h1 &* 5 &+ 0x52dc_e729
                k2 &*= c2; k2 = rotl(k2, 33); k2 &*= c1; h2 ^= k2
                h2 = rotl(h2, 31); h2 &+= h1; h2 = h2 &* 5 &+ 0x3849_5ab5
            }
        }

        /// Mixes in the last `tail.count` (< 16) bytes and the total length `count`.
        @inline(__always)
        mutating func finish(tail: UnsafeRawBufferPointer, count: Int) -> (UInt64, UInt64) {
            let rest = tail.count
            var k1: UInt64 = 0, k2: UInt64 = 0
            if rest > 8 {
                for j in stride(from: rest - 1, through: 8, by: -1) {
                    k2 ^= UInt64(tail[j]) << UInt64((j - 8) * 8)
                }
                k2 &*= c2; k2 = rotl(k2, 33); k2 &*= c1; h2 ^= k2
            }
            if rest > 0 {
                for j in stride(from: min(rest, 8) - 1, through: 0, by: -1) {
                    k1 ^= UInt64(tail[j]) << UInt64(j * 8)
                }
                k1 &*= c1; k1 = rotl(k1, 31); k1 &*= c2; h1 ^= k1
            }
            h1 ^= UInt64(count); h2 ^= UInt64(count)
            h1 &+= h2; h2 &+= h1
            h1 = fmix(h1); h2 = fmix(h2)
            h1 &+= h2; h2 &+= h1
            return (h1, h2)
        }
    }

    /// The hash as 32 lowercase hex characters: `h1` then `h2`, each little-endian (as `mmh3.hash_bytes`).
    public static func hex(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> String {
        let (h1, h2) = hash128(bytes, seed: seed)
        return withUnsafeBytes(of: (h1.littleEndian, h2.littleEndian)) { Hex.encode($0) }
    }

    /// The hash of `bytes` as 32 lowercase hex characters.
    public static func hex(_ bytes: [UInt8], seed: UInt64 = 0) -> String {
        bytes.withUnsafeBytes { hex($0, seed: seed) }
    }

    @inline(__always)
    private static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }

    @inline(__always)
    private static func fmix(_ k: UInt64) -> UInt64 {
        var k = k
        k ^= k >> 33
        k &*= 0xff51_afd7_ed55_8ccd
        k ^= k >> 33
        k &*= 0xc4ce_b9fe_1a85_ec53
        k ^= k >> 33
        return k
    }
}
