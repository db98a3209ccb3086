import Foundation  // the C math library (the registry names acos, sin, …)
package import SetteeCore

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
package enum FunctionLibrary {
    /// Upper-case names of the aggregate functions, which the evaluator computes itself.
    package static let aggregates: Set<String> = ["AVG", "COUNT", "MIN", "MAX", "SUM"]

    /// The allowed argument counts of a known scalar or aggregate function (upper-case name), or nil if unknown.
    package static func arity(of name: String) -> ClosedRange<Int>? {
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
    package static func call(_ name: String, _ args: [JSON?]) throws(SetteeError) -> JSON? {
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
}
