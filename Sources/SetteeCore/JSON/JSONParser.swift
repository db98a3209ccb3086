/// The recursive-descent parser behind ``JSON/parse(_:limits:)-(UnsafeRawBufferPointer,_)``.
///
/// It reads a borrowed buffer byte by byte with no copying. Strings without escapes become a
/// `String` straight from their byte range once validated; strings with escapes are decoded into a
/// reused scratch buffer first. Array elements and object members collect on shared stacks and are
/// copied out in one exact-size allocation when their container closes. Duplicate keys are found by
/// comparing 64-bit fingerprints of the key bytes first, so the common no-duplicate case costs no
/// string comparisons.
struct JSONParser: ~Copyable {
    private let base: UnsafeRawPointer
    private let count: Int
    private let maxDepth: Int
    private var pos = 0
    private var depth = 0
    /// Elements of every array still open, innermost last.
    private var values: ParseStack<JSON>
    /// Members of every object still open, innermost last.
    private var members: ParseStack<PendingMember>
    /// Decoded bytes of the current string when it has escapes.
    private var scratch: [UInt8] = []
    /// Whether ``SmallString`` may build strings directly (checked once per process).
    private let smallStrings = SmallString.isSupported

    /// An object member waiting for its object to close, with a fingerprint of its key for
    /// finding duplicates.
    struct PendingMember {
        var key: String
        var value: JSON
        var fingerprint: UInt64
    }

    /// Parses `bytes`, using `valueStorage` and `memberStorage` (uninitialized; typically on the
    /// stack) for the first few open elements and members.
    init(
        base: UnsafeRawPointer, count: Int, maxDepth: Int,
        valueStorage: UnsafeMutableBufferPointer<JSON>,
        memberStorage: UnsafeMutableBufferPointer<PendingMember>
    ) {
        self.base = base
        self.count = count
        self.maxDepth = maxDepth
        self.values = ParseStack(initialStorage: valueStorage)
        self.members = ParseStack(initialStorage: memberStorage)
    }

    mutating func parseDocument() throws(JSONError) -> JSON {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if pos < count {
            throw JSONError(.trailingData, at: pos, byte: byte(pos))
        }
        return value
    }

    // MARK: - Bytes

    @inline(__always)
    private func byte(_ i: Int) -> UInt8 {
        base.load(fromByteOffset: i, as: UInt8.self)
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while pos < count {
            switch byte(pos) {
            case 0x20, 0x0A, 0x0D, 0x09: pos += 1
            default: return
            }
        }
    }

    private func unexpected(_ i: Int) -> JSONError {
        i < count ? JSONError(.unexpectedCharacter, at: i, byte: byte(i)) : JSONError(.unexpectedEnd, at: count)
    }

    // MARK: - Values

    private mutating func parseValue() throws(JSONError) -> JSON {
        guard pos < count else { throw JSONError(.unexpectedEnd, at: count) }
        switch byte(pos) {
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "{"):
            return try parseObject()
        case UInt8(ascii: "["):
            return try parseArray()
        case UInt8(ascii: "t"):
            try expect("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expect("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expect("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        default:
            throw unexpected(pos)
        }
    }

    private mutating func expect(_ literal: StaticString) throws(JSONError) {
        let bytes = literal.utf8Start
        for k in 0..<literal.utf8CodeUnitCount {
            guard pos + k < count, byte(pos + k) == bytes[k] else { throw unexpected(pos + k) }
        }
        pos += literal.utf8CodeUnitCount
    }

    private mutating func enterContainer() throws(JSONError) {
        depth += 1
        if depth > maxDepth {
            throw JSONError(.tooDeep, at: pos)
        }
    }

    private mutating func parseArray() throws(JSONError) -> JSON {
        try enterContainer()
        pos += 1
        skipWhitespace()
        if pos < count && byte(pos) == UInt8(ascii: "]") {
            pos += 1
            depth -= 1
            return .array([])
        }
        let start = values.count
        while true {
            values.append(try parseValue())
            skipWhitespace()
            guard pos < count else { throw JSONError(.unexpectedEnd, at: count) }
            let b = byte(pos)
            pos += 1
            if b == UInt8(ascii: ",") {
                skipWhitespace()
            } else if b == UInt8(ascii: "]") {
                break
            } else {
                throw unexpected(pos - 1)
            }
        }
        let array = values.removeArray(from: start)
        depth -= 1
        return .array(array)
    }

    private mutating func parseObject() throws(JSONError) -> JSON {
        try enterContainer()
        pos += 1
        skipWhitespace()
        if pos < count && byte(pos) == UInt8(ascii: "}") {
            pos += 1
            depth -= 1
            return .object(JSONObject())
        }
        let start = members.count
        while true {
            guard pos < count, byte(pos) == UInt8(ascii: "\"") else { throw unexpected(pos) }
            let (key, fingerprint) = try parseKey()
            skipWhitespace()
            guard pos < count, byte(pos) == UInt8(ascii: ":") else { throw unexpected(pos) }
            pos += 1
            skipWhitespace()
            let value = try parseValue()
            members.append(PendingMember(key: key, value: value, fingerprint: fingerprint))
            skipWhitespace()
            guard pos < count else { throw JSONError(.unexpectedEnd, at: count) }
            let b = byte(pos)
            pos += 1
            if b == UInt8(ascii: ",") {
                skipWhitespace()
            } else if b == UInt8(ascii: "}") {
                break
            } else {
                throw unexpected(pos - 1)
            }
        }
        let object = makeObject(from: start)
        depth -= 1
        return .object(object)
    }

    /// Moves `members[start...]` into an object: a repeated key keeps its first position and its last value.
    private mutating func makeObject(from start: Int) -> JSONObject {
        let count = members.count - start
        if count > JSONObject.indexThreshold {
            let object = JSONObject(uniqueEntries: members.removeArray(from: start) { Self.member($0) })
            if object.index?.count == object.count { return object }
            return JSONObject(object.entries.map { ($0.key, $0.value) })
        }
        let pending = members.elements(from: start)
        var hasDuplicate = false
        search: for i in 1..<count {
            for j in 0..<i where pending[i].fingerprint == pending[j].fingerprint && pending[i].key == pending[j].key {
                hasDuplicate = true
                break search
            }
        }
        let entries = members.removeArray(from: start) { Self.member($0) }
        if hasDuplicate {
            return JSONObject(entries.map { ($0.key, $0.value) })
        }
        return JSONObject(uniqueEntries: entries)
    }

    @inline(__always)
    private static func member(_ pending: consuming PendingMember) -> JSONObject.Member {
        JSONObject.Member(key: pending.key, value: pending.value)
    }

    // MARK: - Strings

    private mutating func parseString() throws(JSONError) -> String {
        if let range = try scanString() {
            return makeString(at: range.lowerBound, count: range.count)
        }
        return String(decoding: scratch, as: UTF8.self)
    }

    private mutating func parseKey() throws(JSONError) -> (String, UInt64) {
        if let range = try scanString() {
            let raw = UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count)
            return (makeString(at: range.lowerBound, count: range.count), Self.fingerprint(raw))
        }
        let fingerprint = scratch.withUnsafeBytes { Self.fingerprint($0) }
        return (String(decoding: scratch, as: UTF8.self), fingerprint)
    }

    /// A `String` from the input bytes at `start..<start + n`, already checked to be well-formed UTF-8.
    ///
    /// ASCII strings of up to 15 bytes are built directly as small strings (see ``SmallString``),
    /// skipping the standard library's re-validation and its out-of-line calls; everything else
    /// goes through `String(decoding:)`.
    @inline(__always)
    private func makeString(at start: Int, count n: Int) -> String {
        if n <= SmallString.capacity && smallStrings && start + 16 <= count {
            let low = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: start, as: UInt64.self))
            let high = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: start + 8, as: UInt64.self))
            if let string = SmallString.ascii(low: low, high: high, count: n) { return string }
        }
        return String(decoding: UnsafeRawBufferPointer(start: base + start, count: n), as: UTF8.self)
    }

    /// A cheap 64-bit summary of the decoded key bytes: keys with different fingerprints differ.
    /// Up to 8 bytes it is the bytes themselves; longer keys mix the first and last 8 bytes and the length.
    ///
    /// Keys compare as Swift strings (canonical equivalence), so two keys with different bytes can be the same key
    /// (a precomposed "é" and "e" with a combining accent; the Kelvin sign and "K"). Every key that may be spelled
    /// otherwise — one that is not ASCII, or holds `K`, `;` or `` ` ``, the only ASCII characters a non-ASCII
    /// character decomposes to — gets one shared fingerprint, so the duplicate check compares those as strings and
    /// an object never holds two keys that are equal strings.
    @inline(__always)
    private static func fingerprint(_ raw: UnsafeRawBufferPointer) -> UInt64 {
        if JSONKeySpelling.mayBeSpelledOtherwise(raw) { return spelledOtherwise }
        let n = raw.count
        if n >= 8 {
            let first = raw.loadUnaligned(as: UInt64.self)
            let last = raw.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
            return first ^ (last << 29 | last >> 35) ^ (UInt64(n) &* 0x9E37_79B9_7F4A_7C15)
        }
        var value: UInt64 = 0
        for b in raw {
            value = value << 8 | UInt64(b)
        }
        return value ^ (UInt64(n) << 56)
    }

    /// The fingerprint shared by keys that may equal a key with other bytes (``fingerprint(_:)``).
    private static let spelledOtherwise: UInt64 = 0xFFFF_FFFF_FFFF_FFFF

    /// Scans the string whose opening quote is at `pos` and leaves `pos` after its closing quote.
    /// Returns the byte range of its content when it has no escapes; otherwise decodes it into
    /// `scratch` and returns `nil`.
    private mutating func scanString() throws(JSONError) -> Range<Int>? {
        let start = pos + 1
        var i = start
        while true {
            // Skip 8 plain bytes at a time; stop at the first one that needs a look.
            while i + 8 <= count {
                let special = Self.specialBytes(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
                if special != 0 {
                    i += special.trailingZeroBitCount >> 3
                    break
                }
                i += 8
            }
            guard i < count else { throw JSONError(.unexpectedEnd, at: count) }
            let b = byte(i)
            if b >= 0x20 && b < 0x80 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") {
                i += 1
            } else if b == UInt8(ascii: "\"") {
                pos = i + 1
                return start..<i
            } else if b == UInt8(ascii: "\\") {
                try decodeEscapedString(from: start, firstEscape: i)
                return nil
            } else if b < 0x20 {
                throw JSONError(.controlCharacterInString, at: i, byte: b)
            } else {
                i = try validateUTF8(at: i)
            }
        }
    }

    /// Marks (with the byte's high bit) the bytes of `word` that are `"`, `\`, below 0x20 or above
    /// 0x7F. Bits above the lowest mark may be false positives; the lowest mark is always exact.
    @inline(__always)
    private static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let control = (word &- ones &* 0x20) & ~word
        let zeroInQuote = (quote &- ones) & ~quote
        let zeroInBackslash = (backslash &- ones) & ~backslash
        return (zeroInQuote | zeroInBackslash | control | word) & (ones &* 0x80)
    }

    private mutating func appendRaw(_ range: Range<Int>) {
        scratch.append(contentsOf: UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count))
    }

    private mutating func decodeEscapedString(from start: Int, firstEscape: Int) throws(JSONError) {
        scratch.removeAll(keepingCapacity: true)
        appendRaw(start..<firstEscape)
        var i = firstEscape
        var run = i
        while i < count {
            let b = byte(i)
            if b >= 0x20 && b < 0x80 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") {
                i += 1
            } else if b == UInt8(ascii: "\"") {
                appendRaw(run..<i)
                pos = i + 1
                return
            } else if b == UInt8(ascii: "\\") {
                appendRaw(run..<i)
                i = try decodeEscape(at: i)
                run = i
            } else if b < 0x20 {
                throw JSONError(.controlCharacterInString, at: i, byte: b)
            } else {
                i = try validateUTF8(at: i)
            }
        }
        throw JSONError(.unexpectedEnd, at: count)
    }

    /// Decodes the escape whose backslash is at `i` into `scratch`; returns the index after it.
    private mutating func decodeEscape(at i: Int) throws(JSONError) -> Int {
        guard i + 1 < count else { throw JSONError(.unexpectedEnd, at: count) }
        let decoded: UInt8
        switch byte(i + 1) {
        case UInt8(ascii: "\""): decoded = 0x22
        case UInt8(ascii: "\\"): decoded = 0x5C
        case UInt8(ascii: "/"): decoded = 0x2F
        case UInt8(ascii: "b"): decoded = 0x08
        case UInt8(ascii: "f"): decoded = 0x0C
        case UInt8(ascii: "n"): decoded = 0x0A
        case UInt8(ascii: "r"): decoded = 0x0D
        case UInt8(ascii: "t"): decoded = 0x09
        case UInt8(ascii: "u"):
            let unit = try hex4(at: i + 2, escapeAt: i)
            if unit >= 0xDC00 && unit <= 0xDFFF {
                throw JSONError(.invalidEscape, at: i)
            }
            if unit < 0xD800 || unit > 0xDBFF {
                appendScalar(unit)
                return i + 6
            }
            // A high surrogate must be followed by an escaped low surrogate.
            guard i + 6 < count else { throw JSONError(.unexpectedEnd, at: count) }
            guard byte(i + 6) == UInt8(ascii: "\\") else { throw JSONError(.invalidEscape, at: i) }
            guard i + 7 < count else { throw JSONError(.unexpectedEnd, at: count) }
            guard byte(i + 7) == UInt8(ascii: "u") else { throw JSONError(.invalidEscape, at: i) }
            let low = try hex4(at: i + 8, escapeAt: i + 6)
            guard low >= 0xDC00 && low <= 0xDFFF else { throw JSONError(.invalidEscape, at: i) }
            appendScalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
            return i + 12
        default:
            throw JSONError(.invalidEscape, at: i)
        }
        scratch.append(decoded)
        return i + 2
    }

    private func hex4(at j: Int, escapeAt escape: Int) throws(JSONError) -> UInt32 {
        guard j + 4 <= count else { throw JSONError(.unexpectedEnd, at: count) }
        var value: UInt32 = 0
        for k in j..<(j + 4) {
            let b = byte(k)
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw JSONError(.invalidEscape, at: escape)
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    private mutating func appendScalar(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | scalar >> 6))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | scalar >> 12))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | scalar >> 18))
            scratch.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// Checks the multi-byte UTF-8 sequence whose lead byte (≥ 0x80) is at `i`; returns the index after it.
    /// Rejects stray continuation bytes, overlongs, UTF-16 surrogates and code points above U+10FFFF.
    private func validateUTF8(at i: Int) throws(JSONError) -> Int {
        let lead = byte(i)
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw JSONError(.invalidUTF8, at: i, byte: lead)
        }
        guard i + length <= count else { throw JSONError(.invalidUTF8, at: i, byte: lead) }
        let second = byte(i + 1)
        guard second >= low && second <= high else { throw JSONError(.invalidUTF8, at: i, byte: lead) }
        for k in 2..<length where byte(i + k) & 0xC0 != 0x80 {
            throw JSONError(.invalidUTF8, at: i, byte: lead)
        }
        return i + length
    }

    // MARK: - Numbers

    /// Parses `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    ///
    /// Up to 19 significant digits accumulate in a `UInt64`. With no fraction or exponent that is an
    /// `Int64` if it fits. Otherwise a mantissa ≤ 2^53 with a decimal exponent within ±22 converts
    /// exactly with one multiplication or division (Clinger's fast path); anything else goes to the
    /// standard library's correctly rounded conversion.
    private mutating func parseNumber() throws(JSONError) -> JSON {
        let start = pos
        var i = pos
        let negative = byte(i) == UInt8(ascii: "-")
        if negative { i += 1 }
        guard i < count else { throw JSONError(.invalidNumber, at: i) }

        var mantissa: UInt64 = 0
        var digits = 0
        var exponent = 0
        var exact = true
        let first = byte(i)
        if first == UInt8(ascii: "0") {
            i += 1
            if i < count && byte(i) &- UInt8(ascii: "0") <= 9 {
                throw JSONError(.invalidNumber, at: i)
            }
        } else if first &- UInt8(ascii: "1") <= 8 {
            while i < count {
                let d = byte(i) &- UInt8(ascii: "0")
                if d > 9 { break }
                if digits < 19 {
                    mantissa = mantissa &* 10 &+ UInt64(d)
                    digits += 1
                } else {
                    exponent += 1
                    exact = false
                }
                i += 1
            }
        } else {
            throw JSONError(.invalidNumber, at: i)
        }

        var isInteger = true
        if i < count && byte(i) == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            let fractionStart = i
            while i < count {
                let d = byte(i) &- UInt8(ascii: "0")
                if d > 9 { break }
                if digits < 19 {
                    if mantissa != 0 || d != 0 {
                        mantissa = mantissa &* 10 &+ UInt64(d)
                        digits += 1
                    }
                    exponent -= 1
                } else {
                    exact = false
                }
                i += 1
            }
            if i == fractionStart { throw JSONError(.invalidNumber, at: i) }
        }

        if i < count && byte(i) | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            i += 1
            var exponentNegative = false
            if i < count && (byte(i) == UInt8(ascii: "+") || byte(i) == UInt8(ascii: "-")) {
                exponentNegative = byte(i) == UInt8(ascii: "-")
                i += 1
            }
            let exponentStart = i
            var e = 0
            while i < count {
                let d = byte(i) &- UInt8(ascii: "0")
                if d > 9 { break }
                if e < 1_000_000 { e = e * 10 + Int(d) }
                i += 1
            }
            if i == exponentStart { throw JSONError(.invalidNumber, at: i) }
            exponent += exponentNegative ? -e : e
        }
        pos = i

        if isInteger && exact {
            if negative {
                if mantissa <= UInt64(Int64.max) + 1 { return .int(Int64(bitPattern: 0 &- mantissa)) }
            } else if mantissa <= UInt64(Int64.max) {
                return .int(Int64(mantissa))
            }
        }
        if exact && mantissa <= 1 << 53 && exponent >= -22 && exponent <= 22 {
            var scale = 1.0
            for _ in 0..<exponent.magnitude { scale *= 10 }
            let value = exponent < 0 ? Double(mantissa) / scale : Double(mantissa) * scale
            return .double(negative ? -value : value)
        }
        let text = String(decoding: UnsafeRawBufferPointer(start: base + start, count: i - start), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw JSONError(.invalidNumber, at: start)
        }
        return .double(value)
    }
}
