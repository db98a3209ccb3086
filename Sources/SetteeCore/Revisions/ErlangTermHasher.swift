/// The MD5 of a term in Erlang's external term format, written straight into the hash: what CouchDB's
/// `couch_hash:md5_hash(term_to_binary(Term, [{minor_version, 1}]))` computes, for the terms a revision id hashes.
///
/// Only the encodings those terms use are written, each as `term_to_binary` picks it:
///
/// | term | encoding |
/// | --- | --- |
/// | `true`, `false`, `null` | `ATOM_EXT` (100), 2-byte length, Latin-1 name — CouchDB 3.5's recorded ids use it, not the `SMALL_ATOM_UTF8_EXT` newer OTP releases write by default |
/// | integer 0…255 | `SMALL_INTEGER_EXT` (97) |
/// | other 32-bit integer | `INTEGER_EXT` (98), 4 bytes big-endian |
/// | larger integer | `SMALL_BIG_EXT` (110), byte count, sign, magnitude little-endian |
/// | float | `NEW_FLOAT_EXT` (70), IEEE 754 big-endian (minor version 1) |
/// | binary | `BINARY_EXT` (109), 4-byte length |
/// | tuple | `SMALL_TUPLE_EXT` (104), arity |
/// | `[]` | `NIL_EXT` (106) |
/// | list of integers 0…255, at most 65,535 | `STRING_EXT` (107), 2-byte length, the bytes |
/// | other list | `LIST_EXT` (108), 4-byte length, elements, `NIL_EXT` |
///
/// JSON values map to terms as jiffy decodes them (`ErlangTermHasher+JSON.swift`).
///
/// Bytes gather in a stack buffer that is fed to the hasher whenever it fills; long strings go to the hasher
/// directly. No heap memory is used. Not copyable; lives inside one ``withHasher(_:)`` call.
struct ErlangTermHasher: ~Copyable {
    private var hasher = MD5.Hasher()
    private let buffer: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    private var count = 0
    /// Every byte hashed, kept only for tests (``encoded(_:)``).
    private var recorded: [UInt8]?

    private init(buffer: UnsafeMutableBufferPointer<UInt8>, recording: Bool) {
        self.buffer = buffer.baseAddress.unsafelyUnwrapped
        self.capacity = buffer.count
        recorded = recording ? [] : nil
    }

    /// Runs `body` with a hasher over a stack buffer and returns its result.
    static func withHasher<R>(_ body: (inout ErlangTermHasher) -> R) -> R {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { storage in
            var hasher = ErlangTermHasher(buffer: storage, recording: false)
            return body(&hasher)
        }
    }

    /// The bytes `body` writes (the encoded term, not its hash): for tests.
    static func encoded(_ body: (inout ErlangTermHasher) -> Void) -> [UInt8] {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { storage in
            var hasher = ErlangTermHasher(buffer: storage, recording: true)
            body(&hasher)
            hasher.flush()
            return hasher.recorded ?? []
        }
    }

    /// The 16-byte MD5 of everything written.
    mutating func finish() -> [UInt8] {
        flush()
        return hasher.finalize()
    }

    // MARK: Bytes

    private mutating func flush() {
        if count > 0 {
            hasher.update(UnsafeRawBufferPointer(start: buffer, count: count))
            if recorded != nil { recorded!.append(contentsOf: UnsafeBufferPointer(start: buffer, count: count)) }
            count = 0
        }
    }

    @inline(__always)
    private mutating func reserve(_ n: Int) {
        if count &+ n > capacity { flush() }
    }

    @inline(__always)
    mutating func byte(_ b: UInt8) {
        reserve(1)
        buffer[count] = b
        count &+= 1
    }

    @inline(__always)
    mutating func bytes(_ a: UInt8, _ b: UInt8) {
        reserve(2)
        buffer[count] = a
        buffer[count &+ 1] = b
        count &+= 2
    }

    /// A tag byte and a 32-bit big-endian integer.
    @inline(__always)
    mutating func tagged(_ tag: UInt8, _ value: UInt32) {
        reserve(5)
        buffer[count] = tag
        UnsafeMutableRawPointer(buffer + (count &+ 1)).storeBytes(of: value.bigEndian, as: UInt32.self)
        count &+= 5
    }

    mutating func bytes(_ raw: UnsafeRawBufferPointer) {
        guard let source = raw.baseAddress, raw.count > 0 else { return }
        if raw.count > capacity / 4 {
            flush()
            hasher.update(raw)
            if recorded != nil { recorded!.append(contentsOf: raw) }
            return
        }
        reserve(raw.count)
        UnsafeMutableRawPointer(buffer + count).copyMemory(from: source, byteCount: raw.count)
        count &+= raw.count
    }

    // MARK: Terms

    /// The version byte that starts every encoded term.
    mutating func versionMagic() { byte(131) }

    /// `[]`.
    mutating func nilList() { byte(106) }

    /// The header of a proper list of `count` ≥ 1 elements; the caller writes the elements, then ``nilList()``.
    mutating func listHeader(_ count: Int) { tagged(108, UInt32(truncatingIfNeeded: count)) }

    /// The header of a tuple of `arity` < 256 elements; the caller writes the elements.
    mutating func tupleHeader(_ arity: UInt8) { bytes(104, arity) }

    mutating func atom(_ value: Bool) { atom(value ? "true" : "false") }

    mutating func nullAtom() { atom("null") }

    /// `ATOM_EXT`: the tag, a 2-byte length, the name (ASCII, shorter than 256 bytes).
    private mutating func atom(_ name: StaticString) {
        let n = name.utf8CodeUnitCount
        reserve(3 + n)
        buffer[count] = 100
        buffer[count &+ 1] = 0
        buffer[count &+ 2] = UInt8(truncatingIfNeeded: n)
        (buffer + (count &+ 3)).update(from: name.utf8Start, count: n)
        count &+= 3 + n
    }

    mutating func integer(_ value: Int64) {
        if value >= 0 && value <= 255 {
            bytes(97, UInt8(truncatingIfNeeded: value))
        } else if value >= Int64(Int32.min) && value <= Int64(Int32.max) {
            tagged(98, UInt32(bitPattern: Int32(truncatingIfNeeded: value)))
        } else {
            var magnitude = value.magnitude
            let n = (64 - magnitude.leadingZeroBitCount + 7) / 8
            reserve(3 + n)
            buffer[count] = 110
            buffer[count &+ 1] = UInt8(truncatingIfNeeded: n)
            buffer[count &+ 2] = value < 0 ? 1 : 0
            count &+= 3
            for _ in 0..<n {
                buffer[count] = UInt8(truncatingIfNeeded: magnitude)
                magnitude >>= 8
                count &+= 1
            }
        }
    }

    mutating func float(_ value: Double) {
        reserve(9)
        buffer[count] = 70
        UnsafeMutableRawPointer(buffer + (count &+ 1)).storeBytes(of: value.bitPattern.bigEndian, as: UInt64.self)
        count &+= 9
    }

    mutating func binary(_ raw: UnsafeRawBufferPointer) {
        let n = raw.count
        guard let source = raw.baseAddress, n <= capacity / 4 else {
            tagged(109, UInt32(truncatingIfNeeded: n))
            return bytes(raw)
        }
        // The common short binary: tag, length and bytes with one capacity check.
        reserve(5 &+ n)
        buffer[count] = 109
        UnsafeMutableRawPointer(buffer + (count &+ 1)).storeBytes(of: UInt32(truncatingIfNeeded: n).bigEndian, as: UInt32.self)
        UnsafeMutableRawPointer(buffer + (count &+ 5)).copyMemory(from: source, byteCount: n)
        count &+= 5 &+ n
    }

    mutating func binary(_ string: String) {
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { binary(UnsafeRawBufferPointer($0)) }
        if done == nil { Array(string.utf8).withUnsafeBytes { binary($0) } }
    }
}
