/// A growable stack the parser owns outright, so closing a container can move its elements out
/// into an exact-size array without retaining and releasing each one, and without uniqueness checks
/// on every push. It starts in caller-provided (typically stack-allocated) memory and moves to the
/// heap only if that fills up.
struct ParseStack<Element>: ~Copyable {
    private var base: UnsafeMutablePointer<Element>?
    private(set) var count = 0
    private var capacity: Int
    /// Whether `base` was allocated here (and must be deallocated here).
    private var ownsStorage = false

    /// A stack that starts in `initialStorage`, which must outlive it and start uninitialized.
    init(initialStorage: UnsafeMutableBufferPointer<Element>) {
        base = initialStorage.baseAddress
        capacity = base == nil ? 0 : initialStorage.count
    }

    deinit {
        if let base {
            base.deinitialize(count: count)
            if ownsStorage { base.deallocate() }
        }
    }

    @inline(__always)
    mutating func append(_ element: consuming Element) {
        if count == capacity { grow() }
        (base.unsafelyUnwrapped + count).initialize(to: element)
        count += 1
    }

    private mutating func grow() {
        let newCapacity = Swift.max(32, capacity * 2)
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        if let base {
            newBase.moveInitialize(from: base, count: count)
            if ownsStorage { base.deallocate() }
        }
        base = newBase
        capacity = newCapacity
        ownsStorage = true
    }

    /// The elements from `start` to the top, valid until the next push or removal.
    func elements(from start: Int) -> UnsafeBufferPointer<Element> {
        UnsafeBufferPointer(start: base.map { $0 + start }, count: count - start)
    }

    /// Moves the elements from `start` to the top into a new array and pops them.
    mutating func removeArray(from start: Int) -> [Element] {
        removeArray(from: start) { $0 }
    }

    /// Moves the elements from `start` to the top, converted by `transform`, into a new array and pops them.
    @inline(__always)
    mutating func removeArray<T>(from start: Int, _ transform: (consuming Element) -> T) -> [T] {
        let n = count - start
        guard n > 0, let source = base.map({ $0 + start }) else { return [] }
        count = start
        // `reserveCapacity` + `append` stays fully specialized (cached type metadata); the
        // `unsafeUninitializedCapacity` initializer calls the generic runtime entry point, which
        // looks up `_ContiguousArrayStorage<T>` metadata on every call on Linux.
        var result = [T]()
        result.reserveCapacity(n)
        for k in 0..<n {
            result.append(transform((source + k).move()))
        }
        return result
    }
}
