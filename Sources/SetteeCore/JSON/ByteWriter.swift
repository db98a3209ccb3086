/// An append-only byte buffer for the serializer: it starts in caller-provided (typically
/// stack-allocated) memory, moves to the heap only if that fills up, and appends without the
/// uniqueness and capacity bookkeeping of `Array` on every byte.
struct ByteWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    /// The number of bytes written so far.
    private(set) var count = 0
    private var capacity: Int
    private var ownsStorage = false

    /// A writer that starts in `initialStorage`, which must outlive it.
    init(initialStorage: UnsafeMutableBufferPointer<UInt8>) {
        if let start = initialStorage.baseAddress, initialStorage.count > 0 {
            base = start
            capacity = initialStorage.count
        } else {
            base = .allocate(capacity: 256)
            capacity = 256
            ownsStorage = true
        }
    }

    deinit {
        if ownsStorage { base.deallocate() }
    }

    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(to: count + extra) }
    }

    private mutating func grow(to needed: Int) {
        let newCapacity = Swift.max(needed, capacity * 2)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: count)
        if ownsStorage { base.deallocate() }
        base = newBase
        capacity = newCapacity
        ownsStorage = true
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(_ first: UInt8, _ second: UInt8) {
        reserve(2)
        base[count] = first
        base[count + 1] = second
        count += 2
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress else { return }
        reserve(bytes.count)
        UnsafeMutableRawPointer(base + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    /// Calls `body` with the bytes written so far.
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        body(UnsafeBufferPointer(start: base, count: count))
    }
}
