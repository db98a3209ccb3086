extension JSON {
    /// Appends the serialized form (document key order) to `body` and the canonical form (keys sorted by
    /// UTF-8 bytes, recursively) to `canonical`, in one traversal. Both are byte-identical to what
    /// ``serialize(into:)`` and ``canonicalize(into:)`` produce.
    ///
    /// The canonical form is assembled from the serialized bytes: every value's canonical text has the
    /// same length as its serialized text, and differs only inside objects whose keys are out of order,
    /// where whole members (`"key":value`) are copied in sorted order.
    public func serialize(into body: inout [UInt8], canonical: inout [UInt8]) {
        FusedJSONWriter.write(self, body: &body, canonical: &canonical)
    }
}

/// Serializes once while recording where each object lies in the output and, for an object whose keys
/// are out of order, where each of its members (`"key":value`) lies; then builds the canonical form by
/// copying those byte ranges, recursing only into objects that are not already canonical.
struct FusedJSONWriter: ~Copyable {
    /// One object in the serialized text, in document (pre-)order.
    struct ObjectRecord {
        /// Offset of `{` and just past `}`.
        var start: Int
        var end: Int
        /// Index of the first object after this one's descendants.
        var subtreeEnd: Int
        /// For `.unsorted`: where the object's members are in `keys` and `ranges`.
        var firstMember: Int
        var memberCount: Int
        var state: State
    }

    enum State: UInt8 {
        /// Keys sorted here and in every nested object: the serialized bytes are canonical.
        case clean
        /// Keys sorted here, but not in some nested object.
        case sortedHere
        /// Keys out of order here.
        case unsorted
    }

    /// A member's sort key: its key's first 8 UTF-8 bytes (see ``JSONWriter/utf8Prefix(_:)``) and its
    /// position in the object.
    struct SortKey {
        var prefix: UInt64
        var position: Int
    }

    /// Where a member (`"key":value`) lies in the serialized text.
    struct MemberRange {
        /// Offset of the key's opening quote and just past the value.
        var start: Int
        var end: Int
        /// Index of the first object that can lie inside the value.
        var firstObject: Int
    }

    private var out: ByteWriter
    private var objects: ScratchStack<ObjectRecord>
    /// Both grow and shrink together, so one index finds a member in each. An unsorted object's keys
    /// are sorted in place; its ranges stay in document order.
    private var keys: ScratchStack<SortKey>
    private var ranges: ScratchStack<MemberRange>
    private var unsortedCount = 0

    private init(
        out: consuming ByteWriter, objects: consuming ScratchStack<ObjectRecord>,
        keys: consuming ScratchStack<SortKey>, ranges: consuming ScratchStack<MemberRange>
    ) {
        self.out = out
        self.objects = objects
        self.keys = keys
        self.ranges = ranges
    }

    static func write(_ value: JSON, body: inout [UInt8], canonical: inout [UInt8]) {
        // Each at most 1 KiB, the size `withUnsafeTemporaryAllocation` always puts on the stack.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { bytes in
            withUnsafeTemporaryAllocation(of: ObjectRecord.self, capacity: 1024 / MemoryLayout<ObjectRecord>.stride) { objectStorage in
                withUnsafeTemporaryAllocation(of: SortKey.self, capacity: 1024 / MemoryLayout<SortKey>.stride) { keyStorage in
                    withUnsafeTemporaryAllocation(of: MemberRange.self, capacity: 1024 / MemoryLayout<MemberRange>.stride) { rangeStorage in
                        var writer = FusedJSONWriter(
                            out: ByteWriter(initialStorage: bytes),
                            objects: ScratchStack(initialStorage: objectStorage),
                            keys: ScratchStack(initialStorage: keyStorage),
                            ranges: ScratchStack(initialStorage: rangeStorage))
                        writer.write(value)
                        writer.finish(body: &body, canonical: &canonical)
                    }
                }
            }
        }
    }

    private func finish(body: inout [UInt8], canonical: inout [UInt8]) {
        out.withBytes { bytes in
            body.append(contentsOf: bytes)
            let base = canonical.count
            // Same length as the serialized text, and the same bytes if every object's keys are in order.
            canonical.append(contentsOf: bytes)
            guard unsortedCount > 0, let source = bytes.baseAddress else { return }
            canonical.withUnsafeMutableBufferPointer { destination in
                var emitter = CanonicalEmitter(
                    source: source, cursor: destination.baseAddress.unsafelyUnwrapped + base,
                    objects: objects.base, objectCount: objects.count, keys: keys.base, ranges: ranges.base)
                emitter.emitRange(from: 0, to: bytes.count, firstObject: 0)
            }
        }
    }

    private mutating func write(_ value: JSON) {
        switch value {
        case .null:
            out.append(UnsafeRawBufferPointer(start: ("null" as StaticString).utf8Start, count: 4))
        case .bool(let flag):
            if flag {
                out.append(UnsafeRawBufferPointer(start: ("true" as StaticString).utf8Start, count: 4))
            } else {
                out.append(UnsafeRawBufferPointer(start: ("false" as StaticString).utf8Start, count: 5))
            }
        case .int(let number):
            JSONWriter.writeInteger(number, into: &out)
        case .double(let number):
            JSONWriter.writeDouble(number, into: &out)
        case .string(let string):
            JSONWriter.writeString(string, into: &out)
        case .array(let array):
            out.append(UInt8(ascii: "["))
            array.withUnsafeBufferPointer { elements in
                for i in elements.indices {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    write(elements[i])
                }
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            writeObject(object)
        }
    }

    private mutating func writeObject(_ object: JSONObject) {
        let index = objects.count
        objects.append(ObjectRecord(start: out.count, end: 0, subtreeEnd: 0, firstMember: 0, memberCount: 0, state: .clean))
        let unsortedBefore = unsortedCount
        out.append(UInt8(ascii: "{"))
        let sorted = object.entries.withUnsafeBufferPointer { entries -> Bool in
            let n = entries.count
            guard n > 1 else {
                if n == 1 {
                    JSONWriter.writeString(entries[0].key, into: &out)
                    out.append(UInt8(ascii: ":"))
                    write(entries[0].value)
                }
                return true
            }
            let first = keys.extend(by: n)
            _ = ranges.extend(by: n)
            var sorted = true
            var previous: UInt64 = 0
            for i in 0..<n {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                let start = out.count
                let firstObject = objects.count
                let key = entries[i].key
                JSONWriter.writeString(key, into: &out)
                let keyLength = out.count - start - 2
                out.append(UInt8(ascii: ":"))
                write(entries[i].value)
                // The key's first 8 UTF-8 bytes, read back from the output unless escaping changed them.
                let prefix =
                    keyLength == key.utf8.count
                    ? out.bigEndianPrefix(at: start + 1, length: keyLength) : JSONWriter.utf8Prefix(key)
                keys[first + i] = SortKey(prefix: prefix, position: i)
                ranges[first + i] = MemberRange(start: start, end: out.count, firstObject: firstObject)
                if i > 0 && sorted
                    && (prefix < previous || (prefix == previous && !JSONWriter.utf8Precedes(entries[i - 1].key, key)))
                {
                    sorted = false
                }
                previous = prefix
            }
            if sorted {
                // Nested unsorted objects may have put their members after these; then leave these be.
                if keys.count == first + n {
                    keys.removeLast(n)
                    ranges.removeLast(n)
                }
                return true
            }
            Self.sort(UnsafeMutableBufferPointer(start: keys.base + first, count: n), by: entries)
            objects[index].firstMember = first
            objects[index].memberCount = n
            return false
        }
        out.append(UInt8(ascii: "}"))
        objects[index].end = out.count
        objects[index].subtreeEnd = objects.count
        if !sorted {
            objects[index].state = .unsorted
            unsortedCount += 1
        } else if unsortedCount != unsortedBefore {
            objects[index].state = .sortedHere
        }
    }

    /// Sorts `keys` by their keys' UTF-8 bytes: insertion sort up to 16 members, else the standard sort.
    private static func sort(_ keys: UnsafeMutableBufferPointer<SortKey>, by entries: UnsafeBufferPointer<JSONObject.Member>) {
        @inline(__always)
        func precedes(_ a: SortKey, _ b: SortKey) -> Bool {
            if a.prefix != b.prefix { return a.prefix < b.prefix }
            return JSONWriter.utf8Precedes(entries[a.position].key, entries[b.position].key)
        }
        let n = keys.count
        if n <= 16 {
            let keys = keys.baseAddress.unsafelyUnwrapped
            for i in 1..<n {
                let item = keys[i]
                var j = i
                while j > 0 && precedes(item, keys[j - 1]) {
                    keys[j] = keys[j - 1]
                    j -= 1
                }
                keys[j] = item
            }
        } else {
            var keys = keys
            keys.sort(by: precedes)
        }
    }
}

/// Writes the canonical text by copying ranges of the serialized text, reordering the members of
/// objects whose keys are out of order.
private struct CanonicalEmitter {
    let source: UnsafePointer<UInt8>
    var cursor: UnsafeMutablePointer<UInt8>
    let objects: UnsafePointer<FusedJSONWriter.ObjectRecord>
    let objectCount: Int
    let keys: UnsafePointer<FusedJSONWriter.SortKey>
    let ranges: UnsafePointer<FusedJSONWriter.MemberRange>

    /// Copies `source[start..<end]`; short runs (most members) without a call to `memmove`.
    @inline(__always)
    private mutating func copy(from start: Int, to end: Int) {
        let count = end - start
        let from = UnsafeRawPointer(source + start)
        let to = UnsafeMutableRawPointer(cursor)
        if count >= 8 {
            if count <= 16 {
                let head = from.loadUnaligned(as: UInt64.self)
                let tail = from.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
                to.storeBytes(of: head, as: UInt64.self)
                to.storeBytes(of: tail, toByteOffset: count - 8, as: UInt64.self)
            } else if count <= 32 {
                let head = from.loadUnaligned(as: (UInt64, UInt64).self)
                let tail = from.loadUnaligned(fromByteOffset: count - 16, as: (UInt64, UInt64).self)
                to.storeBytes(of: head, as: (UInt64, UInt64).self)
                to.storeBytes(of: tail, toByteOffset: count - 16, as: (UInt64, UInt64).self)
            } else {
                to.copyMemory(from: from, byteCount: count)
            }
        } else {
            for i in 0..<count {
                cursor[i] = source[start + i]
            }
        }
        cursor += count
    }

    @inline(__always)
    private mutating func put(_ byte: UInt8) {
        cursor.pointee = byte
        cursor += 1
    }

    /// Copies `source[start..<end]`, rewriting the objects in it; `firstObject` is the first object
    /// that can start in the range.
    mutating func emitRange(from start: Int, to end: Int, firstObject: Int) {
        var position = start
        var k = firstObject
        while k < objectCount {
            let object = objects[k]
            if object.start >= end { break }
            copy(from: position, to: object.start)
            emitObject(object, at: k)
            position = object.end
            k = object.subtreeEnd
        }
        copy(from: position, to: end)
    }

    private mutating func emitObject(_ object: FusedJSONWriter.ObjectRecord, at index: Int) {
        switch object.state {
        case .clean:
            copy(from: object.start, to: object.end)
        case .sortedHere:
            emitRange(from: object.start, to: object.end, firstObject: index + 1)
        case .unsorted:
            put(UInt8(ascii: "{"))
            for j in 0..<object.memberCount {
                if j > 0 { put(UInt8(ascii: ",")) }
                let range = ranges[object.firstMember + keys[object.firstMember + j].position]
                if range.firstObject < objectCount && objects[range.firstObject].start < range.end {
                    emitRange(from: range.start, to: range.end, firstObject: range.firstObject)
                } else {
                    copy(from: range.start, to: range.end)
                }
            }
            put(UInt8(ascii: "}"))
        }
    }
}

/// A stack of plain records that starts in caller-provided (typically stack-allocated) memory and moves
/// to the heap only if that fills up.
struct ScratchStack<Element: BitwiseCopyable>: ~Copyable {
    private(set) var base: UnsafeMutablePointer<Element>
    private(set) var count = 0
    private var capacity: Int
    private var ownsStorage = false

    /// A stack that starts in `initialStorage`, which must outlive it.
    init(initialStorage: UnsafeMutableBufferPointer<Element>) {
        if let start = initialStorage.baseAddress, initialStorage.count > 0 {
            base = start
            capacity = initialStorage.count
        } else {
            base = .allocate(capacity: 16)
            capacity = 16
            ownsStorage = true
        }
    }

    deinit {
        if ownsStorage { base.deallocate() }
    }

    private mutating func grow(to needed: Int) {
        let newCapacity = Swift.max(needed, capacity * 2)
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: count)
        if ownsStorage { base.deallocate() }
        base = newBase
        capacity = newCapacity
        ownsStorage = true
    }

    @inline(__always)
    mutating func append(_ element: Element) {
        if count == capacity { grow(to: count + 1) }
        (base + count).initialize(to: element)
        count += 1
    }

    /// Adds `n` records, to be assigned before they are read; returns the index of the first.
    @inline(__always)
    mutating func extend(by n: Int) -> Int {
        if count + n > capacity { grow(to: count + n) }
        let first = count
        count += n
        return first
    }

    @inline(__always)
    mutating func removeLast(_ n: Int) {
        count -= n
    }

    subscript(index: Int) -> Element {
        @inline(__always) get { base[index] }
        @inline(__always) nonmutating set { base[index] = newValue }
    }
}
