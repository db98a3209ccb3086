/// MD5 (RFC 1321), for CouchDB's `md5-` attachment digests and revision ids.
///
/// MD5 is not collision resistant: use it where CouchDB compatibility requires it, not for security.
///
/// ```swift
/// MD5.hex(Array("abc".utf8))   // "900150983cd24fb0d6963f7d28e17f72"
///
/// var hasher = MD5.Hasher()
/// hasher.update(Array("ab".utf8))
/// hasher.update(Array("c".utf8))
/// hasher.finalize()            // same 16 bytes as MD5.hash(Array("abc".utf8))
/// ```
package enum MD5 {
    /// The 16-byte digest of `bytes`.
    package static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var hasher = Hasher()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// The 16-byte digest of `bytes`.
    package static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// The 16-byte digest of `bytes` (for example `string.utf8`).
    package static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        let contiguous = bytes.withContiguousStorageIfAvailable { hash(UnsafeRawBufferPointer($0)) }
        return contiguous ?? hash(Array(bytes))
    }

    /// The digest of `bytes` as 32 lowercase hex characters.
    package static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        Hex.encode(hash(bytes))
    }

    /// The digest of `bytes` as 32 lowercase hex characters.
    package static func hex(_ bytes: [UInt8]) -> String {
        Hex.encode(hash(bytes))
    }

    /// The digest of `bytes` as 32 lowercase hex characters.
    package static func hex(_ bytes: some Sequence<UInt8>) -> String {
        Hex.encode(hash(bytes))
    }

    /// An incremental MD5 computation: feed bytes in any number of pieces, then ``finalize()``.
    ///
    /// A value type; copying a hasher forks the computation.
    package struct Hasher: Sendable {
        private var a: UInt32 = 0x6745_2301
        private var b: UInt32 = 0xefcd_ab89
        private var c: UInt32 = 0x98ba_dcfe
        private var d: UInt32 = 0x1032_5476
        /// Total bytes fed so far.
        private var length: UInt64 = 0
        /// A partial 64-byte block; `length % 64` bytes of it are filled.
        private var block: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)

        package init() {}

        /// Feeds `bytes`.
        package mutating func update(_ bytes: UnsafeRawBufferPointer) {
            guard var input = bytes.baseAddress, bytes.count > 0 else { return }
            var remaining = bytes.count
            var filled = Int(length % 64)
            length &+= UInt64(remaining)
            if filled > 0 {
                let take = min(64 - filled, remaining)
                withUnsafeMutableBytes(of: &block) { raw in
                    raw.baseAddress!.advanced(by: filled).copyMemory(from: input, byteCount: take)
                }
                input += take
                remaining -= take
                filled += take
                guard filled == 64 else { return }
                var copy = block
                withUnsafeBytes(of: &copy) { compress($0.baseAddress!) }
            }
            while remaining >= 64 {
                compress(input)
                input += 64
                remaining -= 64
            }
            if remaining > 0 {
                withUnsafeMutableBytes(of: &block) { raw in
                    raw.baseAddress!.copyMemory(from: input, byteCount: remaining)
                }
            }
        }

        /// Feeds `bytes`.
        package mutating func update(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { update($0) }
        }

        /// The 16-byte digest of everything fed so far. Does not change the hasher.
        package func finalize() -> [UInt8] {
            let (a, b, c, d) = finalState()
            return [UInt8](unsafeUninitializedCapacity: 16) { out, count in
                func put(_ word: UInt32, at base: Int) {
                    for k in 0..<4 { out[base + k] = UInt8(truncatingIfNeeded: word >> UInt32(8 * k)) }
                }
                put(a, at: 0)
                put(b, at: 4)
                put(c, at: 8)
                put(d, at: 12)
                count = 16
            }
        }

        /// Pads a copy of the state (0x80, zeros, bit length) and returns the final A, B, C, D.
        private func finalState() -> (UInt32, UInt32, UInt32, UInt32) {
            var copy = self
            let bitLength = length &* 8
            let filled = Int(length % 64)
            // One or two blocks of padding on the stack.
            var pad: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                      UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            let padLength = filled < 56 ? 64 - filled : 128 - filled
            withUnsafeMutableBytes(of: &pad) { raw in
                raw[0] = 0x80
                for k in 0..<8 { raw[padLength - 8 + k] = UInt8(truncatingIfNeeded: bitLength >> UInt64(8 * k)) }
                copy.update(UnsafeRawBufferPointer(rebasing: raw[0..<padLength]))
            }
            return (copy.a, copy.b, copy.c, copy.d)
        }

        @inline(__always)
        private func f(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ k: UInt32, _ s: UInt32) -> UInt32 {
            b &+ rotate(a &+ ((b & c) | (~b & d)) &+ x &+ k, s)
        }

        @inline(__always)
        private func g(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ k: UInt32, _ s: UInt32) -> UInt32 {
            b &+ rotate(a &+ ((b & d) | (c & ~d)) &+ x &+ k, s)
        }

        @inline(__always)
        private func h(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ k: UInt32, _ s: UInt32) -> UInt32 {
            b &+ rotate(a &+ (b ^ c ^ d) &+ x &+ k, s)
        }

        @inline(__always)
        private func i(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ k: UInt32, _ s: UInt32) -> UInt32 {
            b &+ rotate(a &+ (c ^ (b | ~d)) &+ x &+ k, s)
        }

        @inline(__always)
        private func rotate(_ value: UInt32, _ s: UInt32) -> UInt32 {
            value << s | value >> (32 - s)
        }

        /// Runs the 64 steps of RFC 1321 §3.4 over one 64-byte block.
        private mutating func compress(_ p: UnsafeRawPointer) {
            let x0 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
            let x1 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
            let x2 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
            let x3 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
            let x4 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
            let x5 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 20, as: UInt32.self))
            let x6 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 24, as: UInt32.self))
            let x7 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 28, as: UInt32.self))
            let x8 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 32, as: UInt32.self))
            let x9 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 36, as: UInt32.self))
            let x10 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 40, as: UInt32.self))
            let x11 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 44, as: UInt32.self))
            let x12 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 48, as: UInt32.self))
            let x13 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 52, as: UInt32.self))
            let x14 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 56, as: UInt32.self))
            let x15 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 60, as: UInt32.self))
            var a = self.a, b = self.b, c = self.c, d = self.d
            a = f(a, b, c, d, x0, 0xd76aa478, 7)
            d = f(d, a, b, c, x1, 0xe8c7b756, 12)
            c = f(c, d, a, b, x2, 0x242070db, 17)
            b = f(b, c, d, a, x3, 0xc1bdceee, 22)
            a = f(a, b, c, d, x4, 0xf57c0faf, 7)
            d = f(d, a, b, c, x5, 0x4787c62a, 12)
            c = f(c, d, a, b, x6, 0xa8304613, 17)
            b = f(b, c, d, a, x7, 0xfd469501, 22)
            a = f(a, b, c, d, x8, 0x698098d8, 7)
            d = f(d, a, b, c, x9, 0x8b44f7af, 12)
            c = f(c, d, a, b, x10, 0xffff5bb1, 17)
            b = f(b, c, d, a, x11, 0x895cd7be, 22)
            a = f(a, b, c, d, x12, 0x6b901122, 7)
            d = f(d, a, b, c, x13, 0xfd987193, 12)
            c = f(c, d, a, b, x14, 0xa679438e, 17)
            b = f(b, c, d, a, x15, 0x49b40821, 22)
            a = g(a, b, c, d, x1, 0xf61e2562, 5)
            d = g(d, a, b, c, x6, 0xc040b340, 9)
            c = g(c, d, a, b, x11, 0x265e5a51, 14)
            b = g(b, c, d, a, x0, 0xe9b6c7aa, 20)
            a = g(a, b, c, d, x5, 0xd62f105d, 5)
            d = g(d, a, b, c, x10, 0x02441453, 9)
            c = g(c, d, a, b, x15, 0xd8a1e681, 14)
            b = g(b, c, d, a, x4, 0xe7d3fbc8, 20)
            a = g(a, b, c, d, x9, 0x21e1cde6, 5)
            d = g(d, a, b, c, x14, 0xc33707d6, 9)
            c = g(c, d, a, b, x3, 0xf4d50d87, 14)
            b = g(b, c, d, a, x8, 0x455a14ed, 20)
            a = g(a, b, c, d, x13, 0xa9e3e905, 5)
            d = g(d, a, b, c, x2, 0xfcefa3f8, 9)
            c = g(c, d, a, b, x7, 0x676f02d9, 14)
            b = g(b, c, d, a, x12, 0x8d2a4c8a, 20)
            a = h(a, b, c, d, x5, 0xfffa3942, 4)
            d = h(d, a, b, c, x8, 0x8771f681, 11)
            c = h(c, d, a, b, x11, 0x6d9d6122, 16)
            b = h(b, c, d, a, x14, 0xfde5380c, 23)
            a = h(a, b, c, d, x1, 0xa4beea44, 4)
            d = h(d, a, b, c, x4, 0x4bdecfa9, 11)
            c = h(c, d, a, b, x7, 0xf6bb4b60, 16)
            b = h(b, c, d, a, x10, 0xbebfbc70, 23)
            a = h(a, b, c, d, x13, 0x289b7ec6, 4)
            d = h(d, a, b, c, x0, 0xeaa127fa, 11)
            c = h(c, d, a, b, x3, 0xd4ef3085, 16)
            b = h(b, c, d, a, x6, 0x04881d05, 23)
            a = h(a, b, c, d, x9, 0xd9d4d039, 4)
            d = h(d, a, b, c, x12, 0xe6db99e5, 11)
            c = h(c, d, a, b, x15, 0x1fa27cf8, 16)
            b = h(b, c, d, a, x2, 0xc4ac5665, 23)
            a = i(a, b, c, d, x0, 0xf4292244, 6)
            d = i(d, a, b, c, x7, 0x432aff97, 10)
            c = i(c, d, a, b, x14, 0xab9423a7, 15)
            b = i(b, c, d, a, x5, 0xfc93a039, 21)
            a = i(a, b, c, d, x12, 0x655b59c3, 6)
            d = i(d, a, b, c, x3, 0x8f0ccc92, 10)
            c = i(c, d, a, b, x10, 0xffeff47d, 15)
            b = i(b, c, d, a, x1, 0x85845dd1, 21)
            a = i(a, b, c, d, x8, 0x6fa87e4f, 6)
            d = i(d, a, b, c, x15, 0xfe2ce6e0, 10)
            c = i(c, d, a, b, x6, 0xa3014314, 15)
            b = i(b, c, d, a, x13, 0x4e0811a1, 21)
            a = i(a, b, c, d, x4, 0xf7537e82, 6)
            d = i(d, a, b, c, x11, 0xbd3af235, 10)
            c = i(c, d, a, b, x2, 0x2ad7d2bb, 15)
            b = i(b, c, d, a, x9, 0xeb86d391, 21)
            self.a &+= a
            self.b &+= b
            self.c &+= c
            self.d &+= d
        }
    }
}
