import SetteeCore

/// The string functions, type checks and conversions.
extension FunctionLibrary {
    // MARK: - String functions

    static func mapString(_ args: [JSON?], _ transform: (String) -> String) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0] else { return .null }
            return .string(transform(s))
        }
    }

    static func containsString(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0], case .string(let sub) = v[1] else { return .null }
            return .bool(sub.isEmpty || s.firstRange(of: sub) != nil)
        }
    }

    static func length(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0] else { return .null }
            return .int(Int64(s.count))
        }
    }

    /// LTRIM/RTRIM/TRIM(s[, chars]): strips whitespace, or any of the characters in `chars`.
    static func trimString(_ args: [JSON?], leading: Bool, trailing: Bool) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0] else { return .null }
            let strip: (Character) -> Bool
            if v.count > 1 {
                guard case .string(let chars) = v[1] else { return .null }
                let set = Set(chars)
                strip = { set.contains($0) }
            } else {
                strip = { $0.isWhitespace }
            }
            var sub = Substring(s)
            if leading { sub = sub.drop(while: strip) }
            if trailing {
                while let last = sub.last, strip(last) { sub.removeLast() }
            }
            return .string(String(sub))
        }
    }

    /// CONCAT(a, b, …): strings only (any other type gives null).
    static func concat(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            var out = ""
            for value in v {
                guard case .string(let s) = value else { return .null }
                out += s
            }
            return .string(out)
        }
    }

    /// SUBSTR(s, position[, length]): 0-based; a negative position counts from the end; a position past the end
    /// or a negative length gives null.
    static func substr(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0], let rawPosition = integer(v[1]) else { return .null }
            let count = s.count
            let position = rawPosition < 0 ? count + rawPosition : rawPosition
            guard position >= 0, position <= count else { return .null }
            let start = s.index(s.startIndex, offsetBy: position)
            guard v.count > 2 else { return .string(String(s[start...])) }
            guard let length = integer(v[2]), length >= 0 else { return .null }
            let end = s.index(start, offsetBy: length, limitedBy: s.endIndex) ?? s.endIndex
            return .string(String(s[start..<end]))
        }
    }

    /// REPLACE(s, search, replacement[, n]): literal replacement of the first n occurrences (all when n is
    /// absent or negative). An empty `search` leaves `s` unchanged.
    static func replaceString(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0], case .string(let search) = v[1],
                  case .string(let replacement) = v[2] else { return .null }
            var limit = -1
            if v.count > 3 {
                guard let n = integer(v[3]) else { return .null }
                limit = n
            }
            guard !search.isEmpty, limit != 0 else { return .string(s) }
            var out = ""
            var rest = Substring(s)
            var replaced = 0
            while limit < 0 || replaced < limit, let range = rest.firstRange(of: search) {
                out += rest[..<range.lowerBound]
                out += replacement
                rest = rest[range.upperBound...]
                replaced += 1
            }
            out += rest
            return .string(out)
        }
    }

    /// POSITION(s, sub): 0-based character offset of the first occurrence, or -1.
    static func stringPosition(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0], case .string(let sub) = v[1] else { return .null }
            if sub.isEmpty { return .int(0) }
            guard let range = s.firstRange(of: sub) else { return .int(-1) }
            return .int(Int64(s.distance(from: s.startIndex, to: range.lowerBound)))
        }
    }

    /// SPLIT(s[, separator]): without a separator, splits on runs of whitespace; an empty separator splits
    /// into characters.
    static func splitString(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0] else { return .null }
            let parts: [Substring]
            if v.count > 1 {
                guard case .string(let separator) = v[1] else { return .null }
                if separator.isEmpty {
                    return .array(s.map { .string(String($0)) })
                }
                parts = s.split(separator: separator, omittingEmptySubsequences: false)
            } else {
                parts = s.split(whereSeparator: { $0.isWhitespace })
            }
            return .array(parts.map { .string(String($0)) })
        }
    }

    /// TITLE/INITCAP: the first letter of each word upper-case, the rest lower-case. Words are separated by
    /// whitespace and by ASCII characters other than letters, digits and `_`.
    static func titleCase(_ s: String) -> String {
        var out = ""
        var atWordStart = true
        for c in s {
            if atWordStart {
                out += String(c).uppercased()
            } else {
                out += String(c).lowercased()
            }
            let separator = c.isWhitespace || (c.isASCII && !(c.isLetter || c.isNumber || c == "_"))
            atWordStart = separator
        }
        return out
    }

    /// REPEAT(s, n): n ≥ 0; a result over 64 MiB gives null.
    static func repeatString(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0], let n = integer(v[1]), n >= 0 else { return .null }
            let (bytes, overflow) = s.utf8.count.multipliedReportingOverflow(by: n)
            guard !overflow, bytes <= maxBuiltStringBytes else { return .null }
            return .string(String(repeating: s, count: n))
        }
    }

    // MARK: - Type checks

    /// MISSING → MISSING, null → null, else whether the value passes `test`.
    static func typeCheck(_ args: [JSON?], _ test: (JSON) -> Bool) -> JSON? {
        guard let value = args[0] else { return nil }
        if value.isNull { return .null }
        return .bool(test(value))
    }

    /// "missing", "null", "boolean", "number", "string", "array" or "object".
    static func typeName(_ value: JSON?) -> String {
        value?.typeName ?? "missing"
    }

    // MARK: - Type conversion

    static func toArray(_ args: [JSON?]) -> JSON? {
        guard let value = args[0] else { return nil }
        switch value {
        case .null, .array: return value
        default: return .array([value])
        }
    }

    /// Booleans, numbers and strings are themselves; a one-element array or one-member object is TOATOM of
    /// that element; anything else is null.
    static func toAtom(_ args: [JSON?]) -> JSON? {
        guard let value = args[0] else { return nil }
        func atom(_ value: JSON, depth: Int) -> JSON {
            guard depth < 512 else { return .null }
            switch value {
            case .null, .bool, .int, .double, .string: return value
            case .array(let a): return a.count == 1 ? atom(a[0], depth: depth + 1) : .null
            case .object(let o): return o.count == 1 ? atom(o[0].value, depth: depth + 1) : .null
            }
        }
        return atom(value, depth: 0)
    }

    /// false for false, 0, NaN, "", [] and {}; true otherwise.
    static func toBoolean(_ args: [JSON?]) -> JSON? {
        guard let value = args[0] else { return nil }
        if value.isNull { return .null }
        return .bool(ValueCollation.isTruthy(value))
    }

    /// Numbers are themselves; true → 1, false → 0; strings that parse as a (finite, decimal) number are that
    /// number; anything else is null.
    static func toNumber(_ args: [JSON?]) -> JSON? {
        guard let value = args[0] else { return nil }
        switch value {
        case .int, .double: return value
        case .bool(let b): return .int(b ? 1 : 0)
        case .string(let s): return parseNumber(s) ?? .null
        default: return .null
        }
    }

    static func parseNumber(_ raw: String) -> JSON? {
        let text = raw.trimmingWhitespace()
        guard !text.isEmpty,
              text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E
                                     || $0 == 0x65 || $0 == 0x45 }),
              text.utf8.contains(where: { $0 >= 0x30 && $0 <= 0x39 })
        else { return nil }
        if let i = Int64(text) { return .int(i) }
        guard let d = Double(text), d.isFinite else { return nil }
        return ValueCollation.number(d)
    }

    static func toObject(_ args: [JSON?]) -> JSON? {
        guard let value = args[0] else { return nil }
        switch value {
        case .null, .object: return value
        default: return .object(JSONObject())
        }
    }

    /// Strings are themselves; numbers in shortest form ("1", "1.5"); booleans "true"/"false"; arrays and
    /// objects their compact JSON text.
    static func toStringValue(_ args: [JSON?]) -> JSON? {
        guard let value = args[0] else { return nil }
        switch value {
        case .null: return .null
        case .string: return value
        case .bool(let b): return .string(b ? "true" : "false")
        case .int(let i): return .string(String(i))
        case .double(let d): return .string(formatDouble(d))
        case .array, .object: return .string(value.jsonString)
        }
    }

    static func formatDouble(_ d: Double) -> String {
        if d.isFinite, d.rounded() == d, let i = Int64(exactly: d) { return String(i) }
        return d.description
    }
}

extension String {
    /// The string without leading and trailing whitespace (no Foundation needed).
    func trimmingWhitespace() -> String {
        var sub = Substring(self)
        sub = sub.drop(while: { $0.isWhitespace })
        while let last = sub.last, last.isWhitespace { sub.removeLast() }
        return String(sub)
    }
}
