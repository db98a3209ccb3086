/// A growable stack the parser owns outright, so closing a container can move its elements out
/// into an exact-size array without retaining and releasing each one, and without uniqueness checks
/// on every push.
struct ParseStack<Element>: ~Copyable {
    private var base: UnsafeMutablePointer<Element>?
    private(set) var count = 0
    private var capacity = 0

    init() {}

    deinit {
        if let base {
            base.deinitialize(count: count)
            base.deallocate()
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
            base.deallocate()
        }
        base = newBase
        capacity = newCapacity
    }

    /// The elements from `start` to the top, valid until the next push or removal.
    func elements(from start: Int) -> UnsafeBufferPointer<Element> {
        UnsafeBufferPointer(start: base.map { $0 + start }, count: count - start)
    }

    /// Moves the elements from `start` to the top into a new array and pops them.
    mutating func removeArray(from start: Int) -> [Element] {
        let n = count - start
        guard n > 0, let source = base.map({ $0 + start }) else { return [] }
        count = start
        return [Element](unsafeUninitializedCapacity: n) { buffer, initialized in
            buffer.baseAddress.unsafelyUnwrapped.moveInitialize(from: source, count: n)
            initialized = n
        }
    }

    /// Drops the elements from `start` to the top.
    mutating func removeAll(from start: Int) {
        guard count > start, let base else { return }
        (base + start).deinitialize(count: count - start)
        count = start
    }
}
