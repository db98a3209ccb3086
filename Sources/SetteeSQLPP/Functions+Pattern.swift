import SetteeCore
import Synchronization

/// The pattern functions (LIKE’s helpers, REGEXP_*), with a cache of compiled regular expressions.
extension FunctionLibrary {
    // MARK: - Pattern functions

    /// Compiled regular expressions by pattern (a small cache; cleared when full).
    final class RegexCache: Sendable {
        // @unchecked: a built `Regex` is immutable and matches safely from several threads, but the standard
        // library doesn't declare it Sendable (its `AnyRegexOutput` isn't).
        private struct Entry: @unchecked Sendable { let regex: Regex<AnyRegexOutput> }
        private let entries = Mutex<[String: Entry]>([:])
        private let capacity = 128

        func regex(_ pattern: String) throws(SetteeError) -> Regex<AnyRegexOutput> {
            if let cached = entries.withLock({ $0[pattern] }) { return cached.regex }
            let compiled: Regex<AnyRegexOutput>
            do {
                compiled = try Regex(pattern).wordBoundaryKind(.simple)
            } catch {
                throw SetteeError(.queryParseError, "Invalid regular expression \"\(pattern)\": \(error)")
            }
            let capacity = capacity
            entries.withLock { entries in
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
                entries[pattern] = Entry(regex: compiled)
            }
            return compiled
        }
    }

    static let regexCache = RegexCache()

    /// REGEXP_CONTAINS (a match anywhere) and REGEXP_LIKE (`whole`: the pattern matches the whole string).
    static func regexpContains(_ args: [JSON?], whole: Bool) throws(SetteeError) -> JSON? {
        try strict(args) { (v) throws(SetteeError) -> JSON? in
            guard case .string(let s) = v[0], case .string(let pattern) = v[1] else { return .null }
            let regex = try regexCache.regex(pattern)
            return .bool(whole ? s.wholeMatch(of: regex) != nil : s.firstMatch(of: regex) != nil)
        }
    }

    /// REGEXP_POSITION: the 0-based character offset of the first match, or -1.
    static func regexpPosition(_ args: [JSON?]) throws(SetteeError) -> JSON? {
        try strict(args) { (v) throws(SetteeError) -> JSON? in
            guard case .string(let s) = v[0], case .string(let pattern) = v[1] else { return .null }
            let regex = try regexCache.regex(pattern)
            guard let match = s.firstMatch(of: regex) else { return .int(-1) }
            return .int(Int64(s.distance(from: s.startIndex, to: match.range.lowerBound)))
        }
    }

    /// REGEXP_REPLACE(s, pattern, replacement[, n]): replaces the first n matches (all when n is absent or
    /// negative). The replacement may use `$0`…`$99`, `${n}`, `${name}`, `$&` (the match) and `$$`.
    static func regexpReplace(_ args: [JSON?]) throws(SetteeError) -> JSON? {
        try strict(args) { (v) throws(SetteeError) -> JSON? in
            guard case .string(let s) = v[0], case .string(let pattern) = v[1],
                  case .string(let replacement) = v[2] else { return .null }
            var limit = -1
            if v.count > 3 {
                guard let n = integer(v[3]) else { return .null }
                limit = n
            }
            let regex = try regexCache.regex(pattern)
            if limit == 0 { return .string(s) }
            var out = ""
            var last = s.startIndex
            var replaced = 0
            for match in s.matches(of: regex) {
                if limit >= 0 && replaced >= limit { break }
                out += s[last..<match.range.lowerBound]
                appendReplacement(replacement, for: match, into: &out)
                last = match.range.upperBound
                replaced += 1
            }
            out += s[last...]
            return .string(out)
        }
    }

    static func appendReplacement(_ template: String, for match: Regex<AnyRegexOutput>.Match, into out: inout String) {
        let chars = Array(template)
        let groups = match.output.count
        func group(_ i: Int) -> Substring? { i < groups ? match.output[i].substring : nil }
        var i = 0
        while i < chars.count {
            let c = chars[i]
            guard c == "$", i + 1 < chars.count else {
                out.append(c)
                i += 1
                continue
            }
            let next = chars[i + 1]
            if next == "$" {
                out.append("$")
                i += 2
            } else if next == "&" {
                out += group(0) ?? ""
                i += 2
            } else if let d1 = next.wholeNumberValue, next.isASCII {
                // Two digits when that names an existing group, else one.
                if i + 2 < chars.count, chars[i + 2].isASCII, let d2 = chars[i + 2].wholeNumberValue,
                   d1 * 10 + d2 < groups {
                    out += group(d1 * 10 + d2) ?? ""
                    i += 3
                } else if d1 < groups {
                    out += group(d1) ?? ""
                    i += 2
                } else {
                    out.append(c)
                    i += 1
                }
            } else if next == "{", let close = chars[(i + 2)...].firstIndex(of: "}") {
                let name = String(chars[(i + 2)..<close])
                if let index = Int(name) {
                    out += group(index) ?? ""
                } else if let named = match.output[name] {
                    out += named.substring ?? ""
                }
                i = close + 1
            } else {
                out.append(c)
                i += 1
            }
        }
    }
}
