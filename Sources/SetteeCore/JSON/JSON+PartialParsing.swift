/// Reads only some members of a top-level JSON object, skipping the other values without building them.
///
/// Queries and index maintenance use it to read the few properties they need from a stored document:
///
/// ```swift
/// let selector = JSONMemberSelector(["name", "age"])
/// let partial = try selector.parse(bytes)   // {"name": …, "age": …} — only those that exist
/// ```
///
/// Input that is not an object, or that the fast scanner does not follow (escaped keys), is parsed in full and then
/// filtered, so the answer never depends on the shortcut.
package struct JSONMemberSelector: Sendable {
    private let keys: [[UInt8]]
    private let names: [String]

    public init(_ keys: Set<String>) {
        names = keys.sorted()
        self.keys = names.map { Array($0.utf8) }
    }

    /// The wanted members of the object in `bytes`, in document order (a repeated key keeps its last value).
    /// - Throws: ``JSONError`` for malformed input.
    public func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONError) -> JSON {
        var scanner = MemberScanner(bytes: bytes)
        if let fast = scanner.members(keys, names, uniqueKeys: false) { return .object(fast) }
        return try parsedInFull(bytes)
    }

    /// ``parse(_:)`` for a body as the store keeps it: written by ``JSONWriter`` from a ``JSONObject``, so no key
    /// repeats, and reading stops at the last wanted member (the rest of the body is not scanned). Bytes that
    /// may repeat a key (a request's body) go through ``parse(_:)``.
    public func parseStored(_ bytes: UnsafeRawBufferPointer) throws(JSONError) -> JSON {
        var scanner = MemberScanner(bytes: bytes)
        if let fast = scanner.members(keys, names, uniqueKeys: true) { return .object(fast) }
        return try parsedInFull(bytes)
    }

    private func parsedInFull(_ bytes: UnsafeRawBufferPointer) throws(JSONError) -> JSON {
        let full = try JSON.parse(bytes)
        guard case .object(let o) = full else { return full }
        let wanted = Set(names)
        return .object(JSONObject(o.filter { wanted.contains($0.key) }.map { ($0.key, $0.value) }))
    }
}

extension JSON {
    /// Parses only the members named in `keys` of a top-level object; see ``JSONMemberSelector``.
    public static func parseMembers(_ bytes: UnsafeRawBufferPointer, keys: Set<String>) throws(JSONError) -> JSON {
        try JSONMemberSelector(keys).parse(bytes)
    }
}

/// Where a member of a stored body is (``JSON/locateStoredMember(_:path:)``).
package enum StoredMember: Equatable {
    /// Nothing at the path (a key absent, or a step into something that is not an object).
    case missing
    /// The value's bytes, as a range of the body.
    case value(Range<Int>)
    /// The fast scan can't tell (an escaped key on the way, or bytes that are not JSON): parse the body in full.
    case undecided
}

extension JSON {
    /// Finds the member at `path` (object keys, outermost first) of a body as the store keeps it — written from a
    /// ``JSONObject``, so no key repeats and the scan stops at the key — without building any value. SQL
    /// functions over stored bodies use it.
    package static func locateStoredMember(_ bytes: UnsafeRawBufferPointer, path: [UnsafeRawBufferPointer]) -> StoredMember {
        var found = StoredMember.value(0..<bytes.count)
        for key in path {
            guard case .value(let range) = found else { return found }
            found = locateStoredMember(bytes, in: range, key: key)
        }
        return found
    }

    /// ``locateStoredMember(_:path:)`` one step at a time: the member `key` of the object at `range` of `bytes`
    /// (a range of `bytes` too), for callers that walk a path without building an array of its keys.
    package static func locateStoredMember(_ bytes: UnsafeRawBufferPointer, in range: Range<Int>,
                                           key: UnsafeRawBufferPointer) -> StoredMember {
        var scanner = MemberScanner(bytes: UnsafeRawBufferPointer(rebasing: bytes[range]))
        switch scanner.find(key) {
        case .value(let found): return .value((range.lowerBound + found.lowerBound)..<(range.lowerBound + found.upperBound))
        case let other: return other
        }
    }
}

/// A member of a stored body read by itself (``JSON/storedMember(_:key:)``).
package enum StoredMemberValue: Equatable {
    /// The body has no such member.
    case missing
    /// The member's value.
    case value(JSON)
    /// The fast scan can't tell: parse the body in full.
    case undecided
}

extension JSON {
    /// The member `key` of a stored body, parsed alone (the rest of the body is skipped, not built): what a typed
    /// getter of a document read from the store needs before anything asks for the whole body.
    package static func storedMember(_ bytes: UnsafeRawBufferPointer, key: String) -> StoredMemberValue {
        var key = key
        return key.withUTF8 { utf8 in
            let found = locateStoredMember(bytes, in: 0..<bytes.count, key: UnsafeRawBufferPointer(utf8))
            switch found {
            case .missing: return .missing
            case .undecided: return .undecided
            case .value(let range):
                guard let value = MemberScanner(bytes: bytes).parseValue(range) else { return .undecided }
                return .value(value)
            }
        }
    }
}

/// A lenient forward scanner over a top-level object (the bytes were validated when they were stored).
private struct MemberScanner {
    let bytes: UnsafeRawBufferPointer
    let base: UnsafePointer<UInt8>?
    var i = 0

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
    }

    /// nil when the fast path cannot decide (then the caller parses in full). With `uniqueKeys` (no key repeats)
    /// it stops once every wanted member is found.
    mutating func members(_ keys: [[UInt8]], _ names: [String], uniqueKeys: Bool) -> JSONObject? {
        guard let base else { return nil }
        let spelledOtherwise = keys.contains { $0.withUnsafeBytes(JSONKeySpelling.mayBeSpelledOtherwise) }
        let n = bytes.count
        skipSpace()
        guard i < n, base[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        var out: [(String, JSON)] = []
        skipSpace()
        if i < n, base[i] == UInt8(ascii: "}") { return JSONObject() }
        while true {
            skipSpace()
            guard i < n, base[i] == UInt8(ascii: "\"") else { return nil }
            let keyStart = i + 1
            guard let escaped = skipString(), !escaped else { return nil }
            let keyLength = i - 1 - keyStart
            var match = -1
            for (k, key) in keys.enumerated() where key.count == keyLength {
                var same = true
                for (offset, byte) in key.enumerated() where base[keyStart + offset] != byte { same = false; break }
                if same { match = k; break }
            }
            // (As in ``find(_:)``: a non-ASCII key may equal a wanted one as strings compare; the parser decides.)
            if match < 0 && spelledOtherwise && Self.hasNonASCII(base, keyStart..<(keyStart + keyLength)) { return nil }
            skipSpace()
            guard i < n, base[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            skipSpace()
            let valueStart = i
            guard skipValue() else { return nil }
            if match >= 0 {
                guard let value = parseValue(valueStart..<i) else { return nil }
                let name = names[match]
                if let existing = out.firstIndex(where: { $0.0 == name }) { out[existing].1 = value } else { out.append((name, value)) }
                if uniqueKeys && out.count == keys.count { return JSONObject(out) }
            }
            skipSpace()
            guard i < n else { return nil }
            if base[i] == UInt8(ascii: ",") { i += 1; continue }
            if base[i] == UInt8(ascii: "}") { return JSONObject(out) }
            return nil
        }
    }

    /// The value of `key` in the object at the start (a body with no repeated keys: the first one found).
    mutating func find(_ key: UnsafeRawBufferPointer) -> StoredMember {
        guard let base else { return .undecided }
        let spelledOtherwise = JSONKeySpelling.mayBeSpelledOtherwise(key)
        var nonASCIIKey = false
        let n = bytes.count
        skipSpace()
        guard i < n else { return .undecided }
        guard base[i] == UInt8(ascii: "{") else { return .missing }
        i += 1
        skipSpace()
        if i < n, base[i] == UInt8(ascii: "}") { return .missing }
        while true {
            skipSpace()
            guard i < n, base[i] == UInt8(ascii: "\"") else { return .undecided }
            let keyStart = i + 1
            guard let escaped = skipString(), !escaped else { return .undecided }
            let keyLength = i - 1 - keyStart
            var match = keyLength == key.count
            if match {
                for offset in 0..<keyLength where base[keyStart + offset] != key[offset] {
                    match = false
                    break
                }
            }
            // A key that is not ASCII may equal the wanted one as Swift strings compare (canonical equivalence:
            // "é" precomposed or not, the Kelvin sign and "K") without equal bytes: then only the parser can tell.
            if spelledOtherwise && !match && !nonASCIIKey && Self.hasNonASCII(base, keyStart..<(keyStart + keyLength)) {
                nonASCIIKey = true
            }
            skipSpace()
            guard i < n, base[i] == UInt8(ascii: ":") else { return .undecided }
            i += 1
            skipSpace()
            let valueStart = i
            guard skipValue() else { return .undecided }
            if match { return .value(valueStart..<i) }
            skipSpace()
            guard i < n else { return .undecided }
            if base[i] == UInt8(ascii: ",") { i += 1; continue }
            if base[i] == UInt8(ascii: "}") { return nonASCIIKey ? .undecided : .missing }
            return .undecided
        }
    }

    /// Whether any byte of `range` is outside ASCII.
    static func hasNonASCII(_ base: UnsafePointer<UInt8>, _ range: Range<Int>) -> Bool {
        for j in range where base[j] >= 0x80 { return true }
        return false
    }

    /// A value: plain strings and small integers directly, anything else through the full parser.
    func parseValue(_ range: Range<Int>) -> JSON? {
        guard let base, !range.isEmpty else { return nil }
        let first = base[range.lowerBound]
        if first == UInt8(ascii: "\"") {
            let body = (range.lowerBound + 1)..<(range.upperBound - 1)
            if !body.contains(where: { base[$0] == UInt8(ascii: "\\") }) {
                // Control characters were rejected when the document was stored; UTF-8 was validated then too.
                return .string(String(decoding: UnsafeBufferPointer(start: base + body.lowerBound, count: body.count), as: UTF8.self))
            }
        } else if range.count <= 18, first == UInt8(ascii: "-") || (first >= 0x30 && first <= 0x39) {
            var value: Int64 = 0
            var j = range.lowerBound
            let negative = first == UInt8(ascii: "-")
            if negative { j += 1 }
            var digits = 0
            var plain = j < range.upperBound
            while j < range.upperBound {
                let c = base[j]
                guard c >= 0x30 && c <= 0x39 else { plain = false; break }
                value = value * 10 + Int64(c - 0x30)
                digits += 1
                j += 1
            }
            if plain && digits > 0 && !(digits > 1 && base[range.lowerBound + (negative ? 1 : 0)] == 0x30) {
                return .int(negative ? -value : value)
            }
        } else if range.count == 4 && first == UInt8(ascii: "t") {
            return .bool(true)
        } else if range.count == 5 && first == UInt8(ascii: "f") {
            return .bool(false)
        } else if range.count == 4 && first == UInt8(ascii: "n") {
            return .null
        }
        return try? JSON.parse(UnsafeRawBufferPointer(rebasing: bytes[range]))
    }

    mutating func skipSpace() {
        guard let base else { return }
        while i < bytes.count {
            switch base[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    /// At an opening quote: moves past the closing quote. Returns whether the string has escapes (nil: unterminated).
    mutating func skipString() -> Bool? {
        guard let base else { return nil }
        var escaped = false
        var j = i + 1
        let end = bytes.count
        while j < end {
            j = Self.quoteOrBackslash(base, from: j, end: end)
            guard j < end else { return nil }
            if base[j] == UInt8(ascii: "\"") {
                i = j + 1
                return escaped
            }
            escaped = true
            j += 2
        }
        return nil
    }

    /// The index of the first `"` or `\\` at or after `j` (before `end`), else `end`. Eight bytes at a time: a
    /// stored body is mostly string contents (a tenth of a scan's time went to this byte by byte).
    @inline(__always)
    static func quoteOrBackslash(_ base: UnsafePointer<UInt8>, from start: Int, end: Int) -> Int {
        var j = start
        #if _endian(little)
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        while j + 8 <= end {
            let word = raw.loadUnaligned(fromByteOffset: j, as: UInt64.self)
            let quotes = word ^ 0x2222_2222_2222_2222, backslashes = word ^ 0x5C5C_5C5C_5C5C_5C5C
            // A byte of x is zero → its high bit set here; the lowest set bit is always a true match (a false
            // one can only follow a true one, through the borrow), so little-endian order finds the first.
            let found = ((quotes &- ones) & ~quotes | (backslashes &- ones) & ~backslashes) & highs
            if found != 0 { return j + found.trailingZeroBitCount >> 3 }
            j += 8
        }
        #endif
        while j < end {
            let c = base[j]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { return j }
            j += 1
        }
        return end
    }

    mutating func skipValue() -> Bool {
        guard let base, i < bytes.count else { return false }
        switch base[i] {
        case UInt8(ascii: "\""):
            return skipString() != nil
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while i < bytes.count {
                let c = base[i]
                if c == UInt8(ascii: "\"") {
                    guard skipString() != nil else { return false }
                    continue
                }
                if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") { depth += 1 }
                else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
                    depth -= 1
                    if depth == 0 { i += 1; return true }
                }
                i += 1
            }
            return false
        default:
            let start = i
            while i < bytes.count {
                switch base[i] {
                case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D:
                    return i > start
                default: i += 1
                }
            }
            return false
        }
    }
}

/// How a JSON object key may be spelled: what the parser and the stored-body scans need to agree with Swift's string
/// equality.
enum JSONKeySpelling {
    /// Whether a key may equal, as Swift strings compare (canonical equivalence), a key with other bytes: when it
    /// holds a byte outside ASCII, or one of the three ASCII characters a non-ASCII character decomposes to (`K`, the
    /// Kelvin sign's; `;`, the Greek question mark's; `` ` ``, the Greek varia's). Any other ASCII key equals only
    /// itself. The parser's duplicate check and the stored-body scans ask it (eight bytes at a time).
    @inline(__always)
    static func mayBeSpelledOtherwise(_ raw: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        let n = raw.count
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func hasByte(_ word: UInt64, _ pattern: UInt64) -> Bool {
            let x = word ^ pattern
            return (x &- ones) & ~x & highs != 0
        }
        while i + 8 <= n {
            let word = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            if word & highs != 0 || hasByte(word, 0x4B4B_4B4B_4B4B_4B4B) || hasByte(word, 0x3B3B_3B3B_3B3B_3B3B)
                || hasByte(word, 0x6060_6060_6060_6060) { return true }
            i += 8
        }
        while i < n {
            let b = raw[i]
            if b >= 0x80 || b == UInt8(ascii: "K") || b == UInt8(ascii: ";") || b == UInt8(ascii: "`") { return true }
            i += 1
        }
        return false
    }
}
