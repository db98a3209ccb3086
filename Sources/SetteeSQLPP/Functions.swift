// Foundation is imported only for `TimeZone` (local time in the date functions) and the C math library
// (sin, log10, pow, …) it re-exports; the ISO-8601 date arithmetic below is done by hand.
import Foundation
import SetteeCore
import Synchronization

/// The SQL++ for Mobile (Couchbase Lite / N1QL) scalar functions the query evaluator calls.
///
/// Values are `JSON?` where `nil` is MISSING. Unless a function says otherwise, a MISSING argument makes the
/// result MISSING, and otherwise a null or wrongly-typed argument makes it null. Numeric results that are
/// integral come back as `.int` (see ``ValueCollation/number(_:)``); results that are not finite become null.
///
/// ```swift
/// try FunctionLibrary.call("LOWER", [.string("ABC")])   // .string("abc")
/// try FunctionLibrary.call("ROUND", [.double(2.5)])     // .int(3)
/// ```
public enum FunctionLibrary {
    /// Upper-case names of the aggregate functions, which the evaluator computes itself.
    public static let aggregates: Set<String> = ["AVG", "COUNT", "MIN", "MAX", "SUM"]

    /// The allowed argument counts of a known scalar or aggregate function (upper-case name), or nil if unknown.
    public static func arity(of name: String) -> ClosedRange<Int>? {
        if aggregates.contains(name) { return 1...1 }
        if let spec = table[name] { return spec.arity }
        let upper = name.uppercased()
        if aggregates.contains(upper) { return 1...1 }
        return table[upper]?.arity
    }

    /// Calls the scalar function `name` (upper-case) on already evaluated arguments.
    ///
    /// - Throws: `queryParseError` for an unknown function, a wrong argument count or an invalid regular
    ///   expression; `internalError` when `name` is an aggregate.
    public static func call(_ name: String, _ args: [JSON?]) throws(SetteeError) -> JSON? {
        let spec: FunctionSpec
        if let found = table[name] {
            spec = found
        } else {
            let upper = name.uppercased()
            if aggregates.contains(upper) {
                throw SetteeError(.internalError, "aggregate evaluated as scalar")
            }
            guard let found = table[upper] else {
                throw SetteeError(.queryParseError, "Unknown function \(name)")
            }
            spec = found
        }
        guard spec.arity.contains(args.count) else {
            let expected = spec.arity.lowerBound == spec.arity.upperBound
                ? "\(spec.arity.lowerBound)"
                : (spec.arity.upperBound >= variadic ? "at least \(spec.arity.lowerBound)"
                    : "\(spec.arity.lowerBound) to \(spec.arity.upperBound)")
            throw SetteeError(.queryParseError,
                              "Wrong number of arguments to \(name.uppercased())(): expected \(expected), got \(args.count)")
        }
        return try spec.body(args)
    }

    // MARK: - Registry

    /// The upper bound used for variadic functions (N1QL's limit).
    static let variadic = Int(Int16.max)

    struct FunctionSpec: Sendable {
        let arity: ClosedRange<Int>
        let body: @Sendable ([JSON?]) throws(SetteeError) -> JSON?
    }

    static let table: [String: FunctionSpec] = makeTable()

    private static func makeTable() -> [String: FunctionSpec] {
        var t: [String: FunctionSpec] = [:]
        func def(_ names: [String], _ arity: ClosedRange<Int>,
                 _ body: @escaping @Sendable ([JSON?]) throws(SetteeError) -> JSON?) {
            for name in names { t[name] = FunctionSpec(arity: arity, body: body) }
        }
        let n = variadic

        // Array
        def(["ARRAY_AVG"], 1...1) { arrayAvg($0) }
        def(["ARRAY_CONTAINS"], 2...2) { arrayContains($0) }
        def(["ARRAY_COUNT"], 1...1) { arrayCount($0) }
        def(["ARRAY_IFNULL"], 1...1) { arrayIfNull($0) }
        def(["ARRAY_LENGTH"], 1...1) { arrayLength($0) }
        def(["ARRAY_MAX"], 1...1) { arrayExtreme($0, wantMax: true) }
        def(["ARRAY_MIN"], 1...1) { arrayExtreme($0, wantMax: false) }
        def(["ARRAY_SUM"], 1...1) { arraySum($0) }
        def(["ARRAY_DISTINCT"], 1...1) { arrayDistinct($0) }
        def(["ARRAY_REVERSE"], 1...1) { arrayReverse($0) }
        def(["ARRAY_SORT"], 1...1) { arraySort($0) }
        def(["ARRAY_POSITION"], 2...2) { arrayPosition($0) }
        def(["ARRAY_APPEND"], 2...n) { arrayAppend($0) }
        def(["ARRAY_PREPEND"], 2...n) { arrayPrepend($0) }
        def(["ARRAY_CONCAT"], 2...n) { arrayConcat($0) }
        def(["ARRAY_FLATTEN"], 2...2) { arrayFlatten($0) }
        def(["ARRAY_RANGE"], 2...3) { arrayRange($0) }
        def(["ARRAY_REMOVE"], 2...n) { arrayRemove($0) }
        def(["ARRAY_INSERT"], 3...n) { arrayInsert($0) }

        // Conditional
        def(["IFMISSING"], 2...n) { ifMissing($0) }
        def(["IFMISSINGORNULL"], 2...n) { ifMissingOrNull($0) }
        def(["IFNULL"], 2...n) { ifNull($0) }
        def(["MISSINGIF"], 2...2) { missingIf($0) }
        def(["NULLIF"], 2...2) { nullIf($0) }

        // Math
        def(["ABS"], 1...1) { absolute($0) }
        def(["ACOS"], 1...1) { unary($0) { acos($0) } }
        def(["ASIN"], 1...1) { unary($0) { asin($0) } }
        def(["ATAN"], 1...1) { unary($0) { atan($0) } }
        def(["ATAN2"], 2...2) { arcTangent2($0) }
        def(["CEIL"], 1...1) { integralRounding($0, .up) }
        def(["COS"], 1...1) { unary($0) { cos($0) } }
        def(["DEGREES"], 1...1) { unary($0) { $0 * 180 / Double.pi } }
        def(["E"], 0...0) { _ in .double(2.718281828459045) }
        def(["EXP"], 1...1) { unary($0) { exp($0) } }
        def(["FLOOR"], 1...1) { integralRounding($0, .down) }
        def(["LN"], 1...1) { unary($0) { log($0) } }
        def(["LOG"], 1...1) { unary($0) { log10($0) } }
        def(["PI"], 0...0) { _ in .double(Double.pi) }
        def(["POWER"], 2...2) { power($0) }
        def(["RADIANS"], 1...1) { unary($0) { $0 * Double.pi / 180 } }
        def(["ROUND"], 1...2) { roundTo($0, .toNearestOrAwayFromZero) }
        def(["ROUND_EVEN"], 1...2) { roundTo($0, .toNearestOrEven) }
        def(["SIGN"], 1...1) { signum($0) }
        def(["SIN"], 1...1) { unary($0) { sin($0) } }
        def(["SQRT"], 1...1) { unary($0) { $0.squareRoot() } }
        def(["TAN"], 1...1) { unary($0) { tan($0) } }
        def(["TRUNC"], 1...2) { roundTo($0, .towardZero) }
        def(["DIV"], 2...2) { div($0) }
        def(["EUCLIDEAN_DISTANCE"], 2...2) { vectorDistance($0) { $0.squareRoot() } }
        def(["SQUARED_EUCLIDEAN_DISTANCE"], 2...2) { vectorDistance($0) { $0 } }
        def(["COSINE_DISTANCE"], 2...2) { cosineDistance($0) }
        def(["IDIV"], 2...2) { idiv($0) }

        // Pattern
        def(["REGEXP_CONTAINS"], 2...2) { (args) throws(SetteeError) in try regexpContains(args, whole: false) }
        def(["REGEXP_LIKE"], 2...2) { (args) throws(SetteeError) in try regexpContains(args, whole: true) }
        def(["REGEXP_POSITION"], 2...2) { (args) throws(SetteeError) in try regexpPosition(args) }
        def(["REGEXP_REPLACE"], 3...4) { (args) throws(SetteeError) in try regexpReplace(args) }

        // String
        def(["CONTAINS"], 2...2) { containsString($0) }
        def(["LENGTH"], 1...1) { length($0) }
        def(["LOWER"], 1...1) { mapString($0) { $0.lowercased() } }
        def(["UPPER"], 1...1) { mapString($0) { $0.uppercased() } }
        def(["LTRIM"], 1...2) { trimString($0, leading: true, trailing: false) }
        def(["RTRIM"], 1...2) { trimString($0, leading: false, trailing: true) }
        def(["TRIM"], 1...2) { trimString($0, leading: true, trailing: true) }
        def(["CONCAT"], 2...n) { concat($0) }
        def(["SUBSTR"], 2...3) { substr($0) }
        def(["REPLACE"], 3...4) { replaceString($0) }
        def(["REVERSE"], 1...1) { mapString($0) { String($0.reversed()) } }
        def(["POSITION"], 2...2) { stringPosition($0) }
        def(["SPLIT"], 1...2) { splitString($0) }
        def(["TITLE", "INITCAP"], 1...1) { mapString($0, titleCase) }
        def(["REPEAT"], 2...2) { repeatString($0) }

        // Type checks
        def(["ISARRAY", "IS_ARRAY"], 1...1) { typeCheck($0) { if case .array = $0 { true } else { false } } }
        def(["ISATOM", "IS_ATOM"], 1...1) {
            typeCheck($0) {
                switch $0 {
                case .bool, .int, .double, .string: true
                default: false
                }
            }
        }
        def(["ISBOOLEAN", "IS_BOOLEAN"], 1...1) { typeCheck($0) { if case .bool = $0 { true } else { false } } }
        def(["ISNUMBER", "IS_NUMBER"], 1...1) { typeCheck($0) { $0.doubleValue != nil } }
        def(["ISOBJECT", "IS_OBJECT"], 1...1) { typeCheck($0) { if case .object = $0 { true } else { false } } }
        def(["ISSTRING", "IS_STRING"], 1...1) { typeCheck($0) { if case .string = $0 { true } else { false } } }
        def(["TYPE", "TYPENAME"], 1...1) { .string(typeName($0[0])) }

        // Type conversion
        def(["TOARRAY", "TO_ARRAY"], 1...1) { toArray($0) }
        def(["TOATOM", "TO_ATOM"], 1...1) { toAtom($0) }
        def(["TOBOOLEAN", "TO_BOOLEAN"], 1...1) { toBoolean($0) }
        def(["TONUMBER", "TO_NUMBER"], 1...1) { toNumber($0) }
        def(["TOOBJECT", "TO_OBJECT"], 1...1) { toObject($0) }
        def(["TOSTRING", "TO_STRING"], 1...1) { toStringValue($0) }

        // Date
        def(["STR_TO_MILLIS"], 1...1) { strToMillis($0) }
        def(["STR_TO_UTC"], 1...1) { strToUTC($0) }
        def(["MILLIS_TO_STR"], 1...1) { millisToString($0, utc: false) }
        def(["MILLIS_TO_UTC"], 1...1) { millisToString($0, utc: true) }
        return t
    }

    // MARK: - Shared helpers

    /// The general rule: MISSING if any argument is MISSING, else null if any is null, else `body` on the values.
    @inline(__always)
    static func strict<E: Error>(_ args: [JSON?], _ body: ([JSON]) throws(E) -> JSON?) throws(E) -> JSON? {
        var values: [JSON] = []
        values.reserveCapacity(args.count)
        var sawNull = false
        for arg in args {
            guard let arg else { return nil }
            if case .null = arg { sawNull = true }
            values.append(arg)
        }
        if sawNull { return .null }
        return try body(values)
    }

    /// A numeric result: integral values as `.int`, non-finite ones as null.
    @inline(__always)
    static func number(_ d: Double) -> JSON {
        d.isFinite ? ValueCollation.number(d) : .null
    }

    /// A number argument truncated toward zero and clamped to ±2^53, or nil if it is not a finite number.
    static func integer(_ value: JSON) -> Int? {
        switch value {
        case .int(let i): return Int(clamping: max(-(1 << 53), min(1 << 53, i)))
        case .double(let d):
            guard d.isFinite else { return nil }
            return Int(max(-9_007_199_254_740_992, min(9_007_199_254_740_992, d.rounded(.towardZero))))
        default: return nil
        }
    }

    /// The largest string (in UTF-8 bytes) REPEAT will build.
    static let maxBuiltStringBytes = 1 << 26
    /// The largest array ARRAY_RANGE will build.
    static let maxRangeCount = 1 << 20

    // MARK: - Array functions

    static func arrayAvg(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            var sum = 0.0
            var count = 0
            for element in a {
                if let d = element.doubleValue { sum += d; count += 1 }
            }
            return count == 0 ? .null : number(sum / Double(count))
        }
    }

    static func arraySum(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            var intSum: Int64 = 0
            var doubleSum = 0.0
            var exact = true
            for element in a {
                switch element {
                case .int(let i):
                    if exact {
                        let (r, overflow) = intSum.addingReportingOverflow(i)
                        if overflow {
                            exact = false
                            doubleSum = Double(intSum) + Double(i)
                        } else {
                            intSum = r
                        }
                    } else {
                        doubleSum += Double(i)
                    }
                case .double(let d):
                    if exact { exact = false; doubleSum = Double(intSum) }
                    doubleSum += d
                default: break
                }
            }
            return exact ? .int(intSum) : number(doubleSum)
        }
    }

    static func arrayContains(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .bool(a.contains { ValueCollation.equal($0, v[1]) })
        }
    }

    static func arrayCount(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .int(Int64(a.count(where: { !$0.isNull })))
        }
    }

    static func arrayIfNull(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return a.first { !$0.isNull } ?? .null
        }
    }

    static func arrayLength(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .int(Int64(a.count))
        }
    }

    static func arrayExtreme(_ args: [JSON?], wantMax: Bool) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            var best: JSON?
            for element in a where !element.isNull {
                guard let current = best else { best = element; continue }
                let c = ValueCollation.compare(element, current)
                if (wantMax ? c > 0 : c < 0) { best = element }
            }
            return best ?? .null
        }
    }

    static func arrayDistinct(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            guard a.count > 1 else { return .array(a) }
            // Sort positions by collation (stable), keep the first position of each run of equal values,
            // then emit the kept elements in their original order.
            let order = a.indices.sorted { i, j in
                let c = ValueCollation.compare(a[i], a[j])
                return c != 0 ? c < 0 : i < j
            }
            var keep = [Bool](repeating: false, count: a.count)
            var runStart = order[0]
            keep[runStart] = true
            for position in order.dropFirst() where !ValueCollation.equal(a[position], a[runStart]) {
                runStart = position
                keep[position] = true
            }
            return .array(a.indices.filter { keep[$0] }.map { a[$0] })
        }
    }

    static func arrayReverse(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .array(a.reversed())
        }
    }

    static func arraySort(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            let order = a.indices.sorted { i, j in
                let c = ValueCollation.compare(a[i], a[j])
                return c != 0 ? c < 0 : i < j
            }
            return .array(order.map { a[$0] })
        }
    }

    static func arrayPosition(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0] else { return .null }
            return .int(Int64(a.firstIndex { ValueCollation.equal($0, v[1]) } ?? -1))
        }
    }

    /// MISSING if any argument is MISSING; the values may be null (they are added as is).
    static func arrayAppend(_ args: [JSON?]) -> JSON? {
        guard !args.contains(where: { $0 == nil }) else { return nil }
        guard case .array(var a)? = args[0] else { return .null }
        a.append(contentsOf: args.dropFirst().compactMap { $0 })
        return .array(a)
    }

    /// `ARRAY_PREPEND(value1, …, array)`: the array is the last argument.
    static func arrayPrepend(_ args: [JSON?]) -> JSON? {
        guard !args.contains(where: { $0 == nil }) else { return nil }
        guard case .array(let a)? = args[args.count - 1] else { return .null }
        return .array(args.dropLast().compactMap { $0 } + a)
    }

    static func arrayConcat(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            var out: [JSON] = []
            for value in v {
                guard case .array(let a) = value else { return .null }
                out.append(contentsOf: a)
            }
            return .array(out)
        }
    }

    /// `ARRAY_FLATTEN(array, depth)`: a negative depth flattens every level.
    static func arrayFlatten(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .array(let a) = v[0], let depth = v[1].intValue else { return .null }
            func flatten(_ items: [JSON], _ depth: Int64, into out: inout [JSON]) {
                for item in items {
                    if case .array(let inner) = item, depth != 0 {
                        flatten(inner, depth &- 1, into: &out)
                    } else {
                        out.append(item)
                    }
                }
            }
            var out: [JSON] = []
            flatten(a, depth, into: &out)
            return .array(out)
        }
    }

    /// `ARRAY_RANGE(start, end[, step])`: end is exclusive; a zero step or one pointing away from `end` gives [].
    static func arrayRange(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let start = v[0].doubleValue, let end = v[1].doubleValue else { return .null }
            var step = 1.0
            if v.count > 2 {
                guard let s = v[2].doubleValue else { return .null }
                step = s
            }
            guard start.isFinite, end.isFinite, step.isFinite else { return .null }
            if step == 0 || (step > 0 && start >= end) || (step < 0 && start <= end) { return .array([]) }
            let count = ((end - start) / step).rounded(.up)
            guard count.isFinite, count <= Double(maxRangeCount) else { return .null }
            let total = Int(count)
            var out: [JSON] = []
            out.reserveCapacity(total)
            for i in 0..<total {
                let value = start + Double(i) * step
                if step > 0 ? value >= end : value <= end { break }
                out.append(number(value))
            }
            return .array(out)
        }
    }

    static func arrayRemove(_ args: [JSON?]) -> JSON? {
        guard !args.contains(where: { $0 == nil }) else { return nil }
        guard case .array(let a)? = args[0] else { return .null }
        let remove = args.dropFirst().compactMap { $0 }
        return .array(a.filter { element in !remove.contains { ValueCollation.equal(element, $0) } })
    }

    /// `ARRAY_INSERT(array, position, value1, …)`: a negative position counts from the end; out of range → null.
    static func arrayInsert(_ args: [JSON?]) -> JSON? {
        guard !args.contains(where: { $0 == nil }) else { return nil }
        guard case .array(var a)? = args[0], let positionValue = args[1], let raw = integer(positionValue),
              positionValue.intValue != nil
        else { return .null }
        let position = raw < 0 ? a.count + raw : raw
        guard position >= 0, position <= a.count else { return .null }
        a.insert(contentsOf: args.dropFirst(2).compactMap { $0 }, at: position)
        return .array(a)
    }

    // MARK: - Conditional functions

    /// The first non-MISSING argument, or null.
    static func ifMissing(_ args: [JSON?]) -> JSON? {
        for arg in args { if let arg { return arg } }
        return .null
    }

    /// The first argument that is neither MISSING nor null, or null.
    static func ifMissingOrNull(_ args: [JSON?]) -> JSON? {
        for arg in args { if let arg, !arg.isNull { return arg } }
        return .null
    }

    /// The first argument that is not null — which may be MISSING (as N1QL and Couchbase Lite do) — or null.
    static func ifNull(_ args: [JSON?]) -> JSON? {
        for arg in args where arg?.isNull != true { return arg }
        return .null
    }

    static func missingIf(_ args: [JSON?]) -> JSON? {
        strict(args) { v in ValueCollation.equal(v[0], v[1]) ? JSON?.none : v[0] }
    }

    static func nullIf(_ args: [JSON?]) -> JSON? {
        strict(args) { v in ValueCollation.equal(v[0], v[1]) ? .null : v[0] }
    }

    // MARK: - Math functions

    static func unary(_ args: [JSON?], _ fn: (Double) -> Double) -> JSON? {
        strict(args) { v in
            guard let x = v[0].doubleValue else { return .null }
            return number(fn(x))
        }
    }

    /// Two arrays of numbers of the same length, or nil.
    static func vectors(_ a: JSON, _ b: JSON) -> ([Double], [Double])? {
        guard case .array(let x) = a, case .array(let y) = b, x.count == y.count else { return nil }
        var u: [Double] = [], v: [Double] = []
        u.reserveCapacity(x.count)
        v.reserveCapacity(y.count)
        for (p, q) in zip(x, y) {
            guard let p = p.doubleValue, let q = q.doubleValue else { return nil }
            u.append(p)
            v.append(q)
        }
        return (u, v)
    }

    /// `EUCLIDEAN_DISTANCE(a, b)` and `SQUARED_EUCLIDEAN_DISTANCE(a, b)` of two vectors (null for anything else).
    static func vectorDistance(_ args: [JSON?], _ finish: (Double) -> Double) -> JSON? {
        strict(args) { v in
            guard let (a, b) = vectors(v[0], v[1]) else { return .null }
            var sum = 0.0
            for (p, q) in zip(a, b) { sum += (p - q) * (p - q) }
            return number(finish(sum))
        }
    }

    /// `COSINE_DISTANCE(a, b)`: 1 − the cosine similarity (null for anything but two non-zero vectors).
    static func cosineDistance(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let (a, b) = vectors(v[0], v[1]) else { return .null }
            var dot = 0.0, na = 0.0, nb = 0.0
            for (p, q) in zip(a, b) {
                dot += p * q
                na += p * p
                nb += q * q
            }
            guard na > 0, nb > 0 else { return .null }
            return number(1 - dot / (na.squareRoot() * nb.squareRoot()))
        }
    }

    static func absolute(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            switch v[0] {
            case .int(let i): return i == .min ? number(-Double(i)) : .int(Swift.abs(i))
            case .double(let d): return number(Swift.abs(d))
            default: return .null
            }
        }
    }

    /// CEIL and FLOOR: ints are already integral.
    static func integralRounding(_ args: [JSON?], _ rule: FloatingPointRoundingRule) -> JSON? {
        strict(args) { v in
            switch v[0] {
            case .int: return v[0]
            case .double(let d): return number(d.rounded(rule))
            default: return .null
            }
        }
    }

    /// `ATAN2(a, b)` is the arctangent of b/a, as in N1QL and Couchbase Lite (`atan2(b, a)` in C).
    static func arcTangent2(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let a = v[0].doubleValue, let b = v[1].doubleValue else { return .null }
            return number(atan2(b, a))
        }
    }

    static func power(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            if case .int(let base) = v[0], case .int(let exponent) = v[1], exponent >= 0,
               let exact = integerPower(base, exponent) {
                return .int(exact)
            }
            guard let a = v[0].doubleValue, let b = v[1].doubleValue else { return .null }
            return number(pow(a, b))
        }
    }

    /// `base^exponent` in Int64, or nil on overflow.
    static func integerPower(_ base: Int64, _ exponent: Int64) -> Int64? {
        var result: Int64 = 1
        var b = base
        var e = exponent
        while e > 0 {
            if e & 1 == 1 {
                let (r, overflow) = result.multipliedReportingOverflow(by: b)
                if overflow { return nil }
                result = r
            }
            e >>= 1
            if e > 0 {
                let (sq, overflow) = b.multipliedReportingOverflow(by: b)
                if overflow { return nil }
                b = sq
            }
        }
        return result
    }

    /// ROUND (half away from zero), ROUND_EVEN (half to even) and TRUNC, with optional decimal digits
    /// (negative digits round to tens, hundreds, …).
    static func roundTo(_ args: [JSON?], _ rule: FloatingPointRoundingRule) -> JSON? {
        strict(args) { v in
            guard let x = v[0].doubleValue else { return .null }
            var digits = 0
            if v.count > 1 {
                guard let d = v[1].doubleValue, d.isFinite else { return .null }
                digits = Int(Swift.max(-400, Swift.min(400, d.rounded(.towardZero))))
            }
            if case .int(let i) = v[0] {
                if digits >= 0 { return .int(i) }
                if let exact = roundInteger(i, toPowerOfTen: -digits, rule) { return .int(exact) }
            }
            return number(roundDouble(x, digits: digits, rule))
        }
    }

    static func roundDouble(_ x: Double, digits: Int, _ rule: FloatingPointRoundingRule) -> Double {
        guard x.isFinite else { return x }
        if digits == 0 { return x.rounded(rule) }
        if digits > 0 {
            let scale = pow(10.0, Double(digits))
            let scaled = x * scale
            // Past 2^52 every double is integral at this scale: nothing to round.
            guard scale.isFinite, scaled.isFinite, Swift.abs(scaled) < 4_503_599_627_370_496 else { return x }
            return scaled.rounded(rule) / scale
        }
        let unit = pow(10.0, Double(-digits))
        guard unit.isFinite else { return 0 }
        return (x / unit).rounded(rule) * unit
    }

    /// Rounds an integer to a multiple of 10^power exactly, or nil when that does not fit in Int64.
    static func roundInteger(_ i: Int64, toPowerOfTen power: Int, _ rule: FloatingPointRoundingRule) -> Int64? {
        guard power >= 1, power <= 18 else { return nil }
        var unit: Int64 = 1
        for _ in 0..<power { unit *= 10 }
        var quotient = i / unit
        let remainder = i % unit
        let twice = Swift.abs(remainder) * 2
        let away: Int64 = i < 0 ? -1 : 1
        switch rule {
        case .towardZero: break
        case .toNearestOrEven:
            if twice > unit || (twice == unit && quotient % 2 != 0) { quotient += away }
        default:
            if twice >= unit { quotient += away }
        }
        let (result, overflow) = quotient.multipliedReportingOverflow(by: unit)
        return overflow ? nil : result
    }

    static func signum(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let x = v[0].doubleValue else { return .null }
            return .int(x > 0 ? 1 : (x < 0 ? -1 : 0))
        }
    }

    /// `DIV(a, b)`: a / b as a number; division by zero → null.
    static func div(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let a = v[0].doubleValue, let b = v[1].doubleValue, b != 0 else { return .null }
            return number(a / b)
        }
    }

    /// `IDIV(a, b)`: both operands truncated to integers, then divided truncating; division by zero → null.
    static func idiv(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            if case .int(let a) = v[0], case .int(let b) = v[1] {
                guard b != 0 else { return .null }
                if a == .min && b == -1 { return number(-Double(a)) }
                return .int(a / b)
            }
            guard let a = v[0].doubleValue, let b = v[1].doubleValue else { return .null }
            let ta = a.rounded(.towardZero), tb = b.rounded(.towardZero)
            guard tb != 0 else { return .null }
            return number((ta / tb).rounded(.towardZero))
        }
    }

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

    // MARK: - Date functions

    static func strToMillis(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0], let millis = parseISO8601(s) else { return .null }
            return .int(millis)
        }
    }

    static func strToUTC(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0], let millis = parseISO8601(s) else { return .null }
            return .string(formatISO8601(millis, offsetSeconds: 0))
        }
    }

    static func millisToString(_ args: [JSON?], utc: Bool) -> JSON? {
        strict(args) { v in
            let millis: Int64
            switch v[0] {
            case .int(let i): millis = i
            case .double(let d):
                guard d.isFinite, Swift.abs(d) <= Double(maxMillis) else { return .null }
                millis = Int64(d.rounded(.towardZero))
            default: return .null
            }
            guard millis >= -maxMillis, millis <= maxMillis else { return .null }
            return .string(formatISO8601(millis, offsetSeconds: utc ? 0 : localOffsetMinutes(atUTCMillis: millis) * 60))
        }
    }

    /// ±100,000,000 days around the epoch (JavaScript's date range).
    static let maxMillis: Int64 = 8_640_000_000_000_000

    /// Parses `YYYY-MM-DD[( |T)hh:mm[:ss[.fff]]][ ][Z|±hh[:mm]|±hhmm]` into milliseconds since the epoch; without a
    /// zone the time is local (the process's time zone).
    static func parseISO8601(_ raw: String) -> Int64? {
        let b = Array(raw.trimmingWhitespace().utf8)
        var i = 0
        func digits(_ count: Int) -> Int64? {
            guard i + count <= b.count else { return nil }
            var value: Int64 = 0
            for k in i..<(i + count) {
                let c = b[k]
                guard c >= 0x30, c <= 0x39 else { return nil }
                value = value * 10 + Int64(c - 0x30)
            }
            i += count
            return value
        }
        func eat(_ c: UInt8) -> Bool {
            if i < b.count, b[i] == c { i += 1; return true }
            return false
        }
        func isDigit(_ k: Int) -> Bool { k < b.count && b[k] >= 0x30 && b[k] <= 0x39 }

        guard let year = digits(4), eat(0x2D), let month = digits(2), eat(0x2D), let day = digits(2),
              (1...12).contains(month), day >= 1, day <= daysInMonth(year, month)
        else { return nil }
        var hour: Int64 = 0, minute: Int64 = 0, second: Int64 = 0, millis: Int64 = 0
        var zoneSeconds: Int64?
        if i < b.count {
            guard eat(0x54) || eat(0x74) || eat(0x20) else { return nil }  // T, t, space
            guard let h = digits(2), eat(0x3A), let m = digits(2) else { return nil }
            hour = h
            minute = m
            if eat(0x3A) {
                guard let s = digits(2) else { return nil }
                second = s
                if eat(0x2E) || eat(0x2C) {  // fraction: keep milliseconds, rounding on the fourth digit
                    guard isDigit(i) else { return nil }
                    var place: Int64 = 100
                    var fourth: Int64 = 0
                    var index = 0
                    while isDigit(i) {
                        let d = Int64(b[i] - 0x30)
                        if index < 3 { millis += d * place; place /= 10 } else if index == 3 { fourth = d }
                        index += 1
                        i += 1
                    }
                    if fourth >= 5 { millis += 1 }
                }
            }
            _ = eat(0x20)
            if eat(0x5A) || eat(0x7A) {  // Z, z
                zoneSeconds = 0
            } else if i < b.count, b[i] == 0x2B || b[i] == 0x2D {
                let negative = b[i] == 0x2D
                i += 1
                guard let zh = digits(2) else { return nil }
                var zm: Int64 = 0
                if eat(0x3A) {
                    guard let m = digits(2) else { return nil }
                    zm = m
                } else if isDigit(i) {
                    guard let m = digits(2) else { return nil }
                    zm = m
                }
                guard zh <= 23, zm <= 59 else { return nil }
                zoneSeconds = (negative ? -1 : 1) * (zh * 3600 + zm * 60)
            }
            guard i == b.count else { return nil }
        }
        guard hour <= 23, minute <= 59, second <= 59 else { return nil }
        let days = daysFromCivil(year, month, day)
        let wall = (((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + millis
        if let zoneSeconds { return wall - zoneSeconds * 1000 }
        // Local time: find the offset in force at that wall-clock time (two passes settle DST changes).
        let guess = Int64(localOffsetMinutes(atUTCMillis: wall)) * 60_000
        let settled = Int64(localOffsetMinutes(atUTCMillis: wall - guess)) * 60_000
        return wall - settled
    }

    /// `YYYY-MM-DDThh:mm:ss[.sss](Z|±hh:mm)`: milliseconds only when non-zero, `Z` when the offset is zero.
    static func formatISO8601(_ millis: Int64, offsetSeconds: Int) -> String {
        let wall = millis + Int64(offsetSeconds) * 1000
        let (seconds, milli) = floorDivMod(wall, 1000)
        let (days, secondOfDay) = floorDivMod(seconds, 86_400)
        let (year, month, day) = civilFromDays(days)
        var out = year < 0 ? "-" + pad(-year, 4) : pad(year, 4)
        out += "-" + pad(month, 2) + "-" + pad(day, 2)
        out += "T" + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay % 3600 / 60, 2) + ":" + pad(secondOfDay % 60, 2)
        if milli != 0 { out += "." + pad(milli, 3) }
        if offsetSeconds == 0 {
            out += "Z"
        } else {
            let magnitude = Swift.abs(offsetSeconds)
            out += (offsetSeconds < 0 ? "-" : "+") + pad(Int64(magnitude / 3600), 2) + ":" + pad(Int64(magnitude % 3600 / 60), 2)
        }
        return out
    }

    /// The process's UTC offset, in whole minutes, at an instant.
    static func localOffsetMinutes(atUTCMillis millis: Int64) -> Int {
        let date = Date(timeIntervalSince1970: Double(millis) / 1000)
        return TimeZone.current.secondsFromGMT(for: date) / 60
    }

    static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    static func floorDivMod(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        var q = a / b
        var r = a % b
        if r < 0 { q -= 1; r += b }
        return (q, r)
    }

    static func isLeapYear(_ y: Int64) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysInMonth(_ y: Int64, _ m: Int64) -> Int64 {
        switch m {
        case 2: return isLeapYear(y) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(_ year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01.
    static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension String {
    /// The string without leading and trailing whitespace (no Foundation needed).
    fileprivate func trimmingWhitespace() -> String {
        var sub = Substring(self)
        sub = sub.drop(while: { $0.isWhitespace })
        while let last = sub.last, last.isWhitespace { sub.removeLast() }
        return String(sub)
    }
}
