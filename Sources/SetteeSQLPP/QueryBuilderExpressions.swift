import SetteeCore
public import struct Foundation.Date

// The expression half of the QueryBuilder API, in the shape of Couchbase Lite's Swift API
// (`Expression`, `Meta`, `Function`, `ArrayFunction`, `ArrayExpression`, `SelectResult`, `Ordering`).
// Every builder value is only a wrapper around the SQL++ AST (``SQLExpression``, ``SelectItem``,
// ``OrderItem``): the QueryBuilder and the SQL++ parser produce the same trees.

// MARK: - ExpressionProtocol

/// An expression of the QueryBuilder API (Couchbase Lite's `ExpressionProtocol`).
///
/// Build expressions with ``Expression``, ``Meta``, ``Function``, ``ArrayFunction`` and ``ArrayExpression``,
/// and combine them with the operator methods:
///
/// ```swift
/// let hotels = Expression.property("type").equalTo(Expression.string("hotel"))
///     .and(Expression.property("geo.alt").greaterThanOrEqualTo(Expression.int(300)))
/// ```
public protocol ExpressionProtocol: Sendable {
    /// The SQL++ tree this expression stands for.
    var sqlExpression: SQLExpression { get }
}

/// The concrete value behind the `any ExpressionProtocol` results of the builder methods.
struct BuiltExpression: ExpressionProtocol {
    let sqlExpression: SQLExpression
    init(_ sqlExpression: SQLExpression) { self.sqlExpression = sqlExpression }
}

extension ExpressionProtocol {
    private func binary(_ op: BinaryOperator, _ other: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.binary(op, sqlExpression, other.sqlExpression))
    }

    // Arithmetic

    /// `self * expression`
    public func multiply(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.multiply, expression) }
    /// `self / expression`
    public func divide(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.divide, expression) }
    /// `self % expression`
    public func modulo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.modulo, expression) }
    /// `self + expression`
    public func add(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.add, expression) }
    /// `self - expression`
    public func subtract(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.subtract, expression) }

    // Comparison

    /// `self < expression`
    public func lessThan(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.less, expression) }
    /// `self <= expression`
    public func lessThanOrEqualTo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(.lessOrEqual, expression)
    }
    /// `self > expression`
    public func greaterThan(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.greater, expression) }
    /// `self >= expression`
    public func greaterThanOrEqualTo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(.greaterOrEqual, expression)
    }
    /// `self = expression`
    public func equalTo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.equal, expression) }
    /// `self != expression`
    public func notEqualTo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.notEqual, expression) }

    // Matching

    /// `self LIKE pattern`: case-sensitive; `%` matches any run of characters, `_` exactly one.
    public func like(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.like(sqlExpression, pattern: expression.sqlExpression, negated: false))
    }
    /// `REGEXP_LIKE(self, pattern)`: whether the string matches the regular expression (case-sensitive).
    public func regex(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.function("REGEXP_LIKE", [sqlExpression, expression.sqlExpression], distinct: false))
    }

    // Identity

    /// `self IS expression`: like `equalTo`, but `NULL IS NULL` and `MISSING IS MISSING` are true.
    public func `is`(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.is, expression) }
    /// `self IS NOT expression`
    public func isNot(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.isNot, expression) }

    // Null / missing

    /// `self IS VALUED`: true when the value is neither null nor missing.
    public func isValued() -> any ExpressionProtocol {
        BuiltExpression(.check(sqlExpression, .valued, negated: false))
    }
    /// `self IS NOT VALUED`: true when the value is null or missing.
    public func isNotValued() -> any ExpressionProtocol {
        BuiltExpression(.check(sqlExpression, .valued, negated: true))
    }
    /// `self IS NOT VALUED` (Couchbase Lite's deprecated spelling).
    @available(*, deprecated, renamed: "isNotValued()")
    public func isNullOrMissing() -> any ExpressionProtocol { isNotValued() }
    /// `self IS VALUED` (Couchbase Lite's deprecated spelling).
    @available(*, deprecated, renamed: "isValued()")
    public func notNullOrMissing() -> any ExpressionProtocol { isValued() }

    // Logic

    /// `self AND expression`
    public func and(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.and, expression) }
    /// `self OR expression`
    public func or(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { binary(.or, expression) }

    // Ranges and lists

    /// `self BETWEEN expression1 AND expression2` (both ends inclusive).
    public func between(_ expression1: any ExpressionProtocol,
                        and expression2: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.between(sqlExpression, low: expression1.sqlExpression, high: expression2.sqlExpression,
                                 negated: false))
    }
    /// `self IN (e1, e2, …)`: whether the value equals one of the expressions.
    public func `in`(_ expressions: [any ExpressionProtocol]) -> any ExpressionProtocol {
        BuiltExpression(.in(sqlExpression, expressions.map(\.sqlExpression), negated: false))
    }
}

// MARK: - Property and meta expressions

/// A property expression that can be qualified by a data-source alias (Couchbase Lite's `PropertyExpressionProtocol`).
public protocol PropertyExpressionProtocol: ExpressionProtocol {
    /// The same property, read from the data source with the given alias (`DataSource.….as(alias)`); nil reads
    /// it unqualified.
    func from(_ alias: String?) -> any ExpressionProtocol
}

/// A `META()` field that can be qualified by a data-source alias (Couchbase Lite's `MetaExpressionProtocol`).
public protocol MetaExpressionProtocol: ExpressionProtocol {
    /// The same metadata field, of the document from the data source with the given alias.
    func from(_ alias: String) -> any ExpressionProtocol
}

/// `Expression.property(path)`.
struct PropertyExpression: PropertyExpressionProtocol {
    let path: [PathComponent]
    var sqlExpression: SQLExpression { .property(source: nil, path: path) }
    func from(_ alias: String?) -> any ExpressionProtocol {
        BuiltExpression(.property(source: alias, path: path))
    }
}

/// `Expression.all()`: `*` (as in `COUNT(*)`); `.from(alias)` is the whole document of that source.
struct AllExpression: PropertyExpressionProtocol {
    var sqlExpression: SQLExpression { .star }
    func from(_ alias: String?) -> any ExpressionProtocol {
        guard let alias else { return self }
        return BuiltExpression(.property(source: alias, path: []))
    }
}

/// `Meta.id`, `Meta.sequence`, ….
struct MetaExpression: MetaExpressionProtocol {
    let field: MetaField
    var sqlExpression: SQLExpression { .meta(source: nil, field: field) }
    func from(_ alias: String) -> any ExpressionProtocol {
        BuiltExpression(.meta(source: alias, field: field))
    }
}

// MARK: - Expression

/// Factories for property, literal and parameter expressions (Couchbase Lite's `Expression`).
///
/// ```swift
/// Expression.property("geo.alt").greaterThanOrEqualTo(Expression.int(300))
/// Expression.property("name").from("airline")
/// Expression.string("Armani").in([Expression.property("first"), Expression.property("last")])
/// ```
public enum Expression {
    /// A document property by path: `"name"`, `"geo.alt"`, `"tags[0]"` (`\.` escapes a dot inside a name).
    public static func property(_ property: String) -> any PropertyExpressionProtocol {
        PropertyExpression(path: PathParser.components(property))
    }

    /// All properties: `*`, as in `Function.count(Expression.all())` (`COUNT(*)`).
    ///
    /// `Expression.all().from(alias)` is the whole document of the source `alias`.
    public static func all() -> any PropertyExpressionProtocol {
        AllExpression()
    }

    /// A constant from a Swift value: `String`, any integer or floating-point type, `Bool`, `nil`, `Date`
    /// (as an ISO-8601 UTC string), arrays and `[String: Any]` dictionaries of these (which may also hold
    /// expressions), ``JSON``, ``JSONObject`` or an expression.
    ///
    /// - Precondition: the value is of one of the types above.
    public static func value(_ value: Any?) -> any ExpressionProtocol {
        BuiltExpression(QueryBuilderValue.expression(from: value))
    }

    /// A string constant; `nil` is `NULL`.
    public static func string(_ value: String?) -> any ExpressionProtocol {
        BuiltExpression(.literal(value.map(JSON.string) ?? .null))
    }

    /// An integer constant (one outside `Int64` becomes a double); `nil` is `NULL`.
    public static func number<N: BinaryInteger>(_ value: N?) -> any ExpressionProtocol {
        guard let value else { return BuiltExpression(.literal(.null)) }
        return BuiltExpression(.literal(QueryBuilderValue.json(integer: value)))
    }

    /// A floating-point constant; `nil` is `NULL`.
    public static func number<F: BinaryFloatingPoint>(_ value: F?) -> any ExpressionProtocol {
        guard let value else { return BuiltExpression(.literal(.null)) }
        return BuiltExpression(.literal(.double(Double(value))))
    }

    /// An integer constant.
    public static func int(_ value: Int) -> any ExpressionProtocol {
        BuiltExpression(.literal(.int(Int64(value))))
    }

    /// A 64-bit integer constant.
    public static func int64(_ value: Int64) -> any ExpressionProtocol {
        BuiltExpression(.literal(.int(value)))
    }

    /// A `Float` constant (stored as a double).
    public static func float(_ value: Float) -> any ExpressionProtocol {
        BuiltExpression(.literal(.double(Double(value))))
    }

    /// A double constant.
    public static func double(_ value: Double) -> any ExpressionProtocol {
        BuiltExpression(.literal(.double(value)))
    }

    /// A boolean constant.
    public static func boolean(_ value: Bool) -> any ExpressionProtocol {
        BuiltExpression(.literal(.bool(value)))
    }

    /// A date constant: the ISO-8601 UTC string `yyyy-MM-ddTHH:mm:ss.SSSZ`; `nil` is `NULL`.
    public static func date(_ value: Date?) -> any ExpressionProtocol {
        BuiltExpression(.literal(value.map { JSON.string(QueryBuilderValue.iso8601(millisSince1970: $0.millis)) } ?? .null))
    }

    /// An object `{"key": value, …}`; values are converted as by ``value(_:)`` and may be expressions.
    /// Keys are sorted so equal dictionaries give equal trees. `nil` is `NULL`.
    public static func dictionary(_ value: [String: Any?]?) -> any ExpressionProtocol {
        guard let value else { return BuiltExpression(.literal(.null)) }
        return BuiltExpression(QueryBuilderValue.object(value))
    }

    /// An array `[value, …]`; elements are converted as by ``value(_:)`` and may be expressions. `nil` is `NULL`.
    public static func array(_ value: [Any?]?) -> any ExpressionProtocol {
        guard let value else { return BuiltExpression(.literal(.null)) }
        return BuiltExpression(.array(value.map(QueryBuilderValue.expression(from:))))
    }

    /// The query parameter `$name`, set through the query's ``Parameters``.
    public static func parameter(_ name: String) -> any ExpressionProtocol {
        BuiltExpression(.parameter(name))
    }

    /// `NOT expression` (the same as ``not(_:)``).
    public static func negated(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.not(expression.sqlExpression))
    }

    /// `NOT expression`.
    public static func not(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.not(expression.sqlExpression))
    }
}

extension Date {
    /// Milliseconds since 1970, rounded down.
    fileprivate var millis: Int64 {
        Int64((timeIntervalSince1970 * 1000).rounded(.down))
    }
}

/// Conversion of Swift values to constant expressions.
enum QueryBuilderValue {
    static func json<N: BinaryInteger>(integer value: N) -> JSON {
        if let exact = Int64(exactly: value) { return .int(exact) }
        return .double(Double(value))
    }

    static func object(_ dictionary: [String: Any?]) -> SQLExpression {
        .object(dictionary.keys.sorted().map { key in
            ObjectMember(key: key, value: expression(from: dictionary[key] ?? nil))
        })
    }

    static func expression(from value: Any?) -> SQLExpression {
        guard let value else { return .literal(.null) }
        if let optional = value as? any OptionalValue { return expression(from: optional.wrappedAny) }
        switch value {
        case let e as any ExpressionProtocol: return e.sqlExpression
        case let e as SQLExpression: return e
        case let j as JSON: return .literal(j)
        case let o as JSONObject: return .literal(.object(o))
        case let s as String: return .literal(.string(s))
        case let s as Substring: return .literal(.string(String(s)))
        case let b as Bool: return .literal(.bool(b))
        case let i as any BinaryInteger: return .literal(json(integer: i))
        case let d as any BinaryFloatingPoint: return .literal(.double(Double(d)))
        case let d as Date: return .literal(.string(iso8601(millisSince1970: d.millis)))
        case let dict as [String: Any?]: return object(dict)
        case let dict as [String: Any]: return object(dict.mapValues { Optional($0) })
        case let array as [Any?]: return .array(array.map(expression(from:)))
        case let array as [Any]: return .array(array.map { expression(from: $0) })
        default:
            preconditionFailure("Expression.value: unsupported value of type \(type(of: value))")
        }
    }

    /// `yyyy-MM-ddTHH:mm:ss.SSSZ` in UTC (proleptic Gregorian calendar).
    static func iso8601(millisSince1970 ms: Int64) -> String {
        let msPerDay: Int64 = 86_400_000
        var days = ms / msPerDay
        var msOfDay = ms % msPerDay
        if msOfDay < 0 { msOfDay += msPerDay; days -= 1 }
        let (year, month, day) = FunctionLibrary.civilFromDays(days)
        let hour = msOfDay / 3_600_000, minute = msOfDay / 60_000 % 60
        let second = msOfDay / 1000 % 60, milli = msOfDay % 1000
        func pad(_ n: Int64, _ width: Int) -> String {
            let digits = String(n.magnitude)
            let sign = n < 0 ? "-" : ""
            return sign + String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2))"
            + ".\(pad(milli, 3))Z"
    }
}

/// Lets ``QueryBuilderValue`` see through optionals boxed in `Any`.
protocol OptionalValue {
    var wrappedAny: Any? { get }
}

extension Optional: OptionalValue {
    var wrappedAny: Any? { map { $0 as Any } }
}

// MARK: - Meta

/// Document metadata (`META()`) fields (Couchbase Lite's `Meta`).
///
/// ```swift
/// SelectResult.expression(Meta.id)
/// Meta.id.from("airline").equalTo(Expression.property("airlineid").from("route"))
/// ```
public enum Meta {
    /// The document ID: `META().id`.
    public static var id: any MetaExpressionProtocol { MetaExpression(field: .id) }
    /// The document's sequence number: `META().sequence`.
    public static var sequence: any MetaExpressionProtocol { MetaExpression(field: .sequence) }
    /// The current revision ID: `META().revisionID`.
    public static var revisionID: any MetaExpressionProtocol { MetaExpression(field: .revisionID) }
    /// Whether the document is deleted: `META().deleted`. Using it makes the query see tombstones.
    public static var isDeleted: any MetaExpressionProtocol { MetaExpression(field: .deleted) }
    /// The document's expiration time (milliseconds since 1970), or null: `META().expiration`.
    public static var expiration: any MetaExpressionProtocol { MetaExpression(field: .expiration) }
}

// MARK: - Function

/// Aggregate, math, string and date functions (Couchbase Lite's `Function`).
///
/// ```swift
/// Function.count(Expression.all())                  // COUNT(*)
/// Function.lower(Expression.property("name"))       // LOWER(name)
/// Function.round(Expression.property("price"), digits: Expression.int(2))
/// ```
public enum Function {
    private static func call(_ name: String, _ args: any ExpressionProtocol...) -> any ExpressionProtocol {
        BuiltExpression(.function(name, args.map(\.sqlExpression), distinct: false))
    }

    // Aggregates

    /// `AVG(expression)`: the average of the group's numbers.
    public static func avg(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("AVG", expression) }
    /// `COUNT(expression)`: the number of the group's values that are not null or missing;
    /// `count()` and `count(Expression.all())` are `COUNT(*)`, the number of rows.
    public static func count(_ expression: (any ExpressionProtocol)? = nil) -> any ExpressionProtocol {
        call("COUNT", expression ?? Expression.all())
    }
    /// `MIN(expression)`: the group's smallest value.
    public static func min(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("MIN", expression) }
    /// `MAX(expression)`: the group's largest value.
    public static func max(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("MAX", expression) }
    /// `SUM(expression)`: the sum of the group's numbers.
    public static func sum(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("SUM", expression) }

    // Math

    /// `ABS(expression)`
    public static func abs(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("ABS", expression) }
    /// `ACOS(expression)`, in radians.
    public static func acos(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("ACOS", expression) }
    /// `ASIN(expression)`, in radians.
    public static func asin(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("ASIN", expression) }
    /// `ATAN(expression)`, in radians.
    public static func atan(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("ATAN", expression) }
    /// The angle of the point (x, y), in radians (C's `atan2(y, x)`).
    ///
    /// Builds SQL++ `ATAN2(x, y)`: as in N1QL and Couchbase Lite, SQL++'s `ATAN2(a, b)` is the arctangent of b/a.
    public static func atan2(y: any ExpressionProtocol, x: any ExpressionProtocol) -> any ExpressionProtocol {
        call("ATAN2", x, y)
    }
    /// `CEIL(expression)`
    public static func ceil(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("CEIL", expression) }
    /// `COS(expression)` of radians.
    public static func cos(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("COS", expression) }
    /// `DEGREES(expression)`: radians to degrees.
    public static func degrees(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        call("DEGREES", expression)
    }
    /// `E()`: Euler's number.
    public static func e() -> any ExpressionProtocol { call("E") }
    /// `EXP(expression)`: e raised to the power.
    public static func exp(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("EXP", expression) }
    /// `FLOOR(expression)`
    public static func floor(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("FLOOR", expression) }
    /// `LN(expression)`: natural logarithm.
    public static func ln(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("LN", expression) }
    /// `LOG(expression)`: base-10 logarithm.
    public static func log(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("LOG", expression) }
    /// `PI()`
    public static func pi() -> any ExpressionProtocol { call("PI") }
    /// `POWER(base, exponent)`
    public static func power(base: any ExpressionProtocol, exponent: any ExpressionProtocol) -> any ExpressionProtocol {
        call("POWER", base, exponent)
    }
    /// `RADIANS(expression)`: degrees to radians.
    public static func radians(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        call("RADIANS", expression)
    }
    /// `ROUND(expression)` or `ROUND(expression, digits)`: rounded to `digits` decimal places (default 0).
    public static func round(_ expression: any ExpressionProtocol,
                             digits: (any ExpressionProtocol)? = nil) -> any ExpressionProtocol {
        if let digits { return call("ROUND", expression, digits) }
        return call("ROUND", expression)
    }
    /// `SIGN(expression)`: -1, 0 or 1.
    public static func sign(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("SIGN", expression) }
    /// `SIN(expression)` of radians.
    public static func sin(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("SIN", expression) }
    /// `SQRT(expression)`
    public static func sqrt(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("SQRT", expression) }
    /// `TAN(expression)` of radians.
    public static func tan(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("TAN", expression) }
    /// `TRUNC(expression)` or `TRUNC(expression, digits)`: truncated to `digits` decimal places (default 0).
    public static func trunc(_ expression: any ExpressionProtocol,
                             digits: (any ExpressionProtocol)? = nil) -> any ExpressionProtocol {
        if let digits { return call("TRUNC", expression, digits) }
        return call("TRUNC", expression)
    }

    // Strings

    /// `CONTAINS(expression, substring)`: whether the string contains the substring (case-sensitive).
    public static func contains(_ expression: any ExpressionProtocol,
                                substring: any ExpressionProtocol) -> any ExpressionProtocol {
        call("CONTAINS", expression, substring)
    }
    /// `LENGTH(expression)`: the string's length.
    public static func length(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        call("LENGTH", expression)
    }
    /// `LOWER(expression)`
    public static func lower(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("LOWER", expression) }
    /// `LTRIM(expression)`: without leading whitespace.
    public static func ltrim(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("LTRIM", expression) }
    /// `RTRIM(expression)`: without trailing whitespace.
    public static func rtrim(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("RTRIM", expression) }
    /// `TRIM(expression)`: without leading and trailing whitespace.
    public static func trim(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("TRIM", expression) }
    /// `UPPER(expression)`
    public static func upper(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call("UPPER", expression) }

    // Dates

    /// `STR_TO_MILLIS(expression)`: an ISO-8601 date string to milliseconds since 1970.
    public static func stringToMillis(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        call("STR_TO_MILLIS", expression)
    }
    /// `STR_TO_UTC(expression)`: an ISO-8601 date string to the same instant as a UTC ISO-8601 string.
    public static func stringToUTC(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        call("STR_TO_UTC", expression)
    }
    /// `MILLIS_TO_STR(expression)`: milliseconds since 1970 to an ISO-8601 string in local time.
    public static func millisToString(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        call("MILLIS_TO_STR", expression)
    }
    /// `MILLIS_TO_UTC(expression)`: milliseconds since 1970 to a UTC ISO-8601 string.
    public static func millisToUTC(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        call("MILLIS_TO_UTC", expression)
    }
}

// MARK: - ArrayFunction

/// Functions over arrays (Couchbase Lite's `ArrayFunction`).
public enum ArrayFunction {
    /// `ARRAY_CONTAINS(expression, value)`: whether the array has an element equal to `value`.
    public static func contains(_ expression: any ExpressionProtocol,
                                value: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.function("ARRAY_CONTAINS", [expression.sqlExpression, value.sqlExpression], distinct: false))
    }

    /// `ARRAY_LENGTH(expression)`: the number of elements.
    public static func length(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.function("ARRAY_LENGTH", [expression.sqlExpression], distinct: false))
    }
}

// MARK: - ArrayExpression

/// A variable bound by `ANY` / `EVERY` (Couchbase Lite's `VariableExpressionProtocol`).
public protocol VariableExpressionProtocol: ExpressionProtocol {
    /// The name as given to ``ArrayExpression/variable(_:)``: `"like"`, or a path into it such as `"like.name"`.
    var name: String { get }
}

/// `ArrayExpression.variable(name)`: reads as a property path whose first component is the variable.
struct VariableExpression: VariableExpressionProtocol {
    let name: String
    var sqlExpression: SQLExpression { .property(source: nil, path: PathParser.components(name)) }
}

/// Quantified expressions over arrays: `ANY`, `EVERY`, `ANY AND EVERY` … `SATISFIES` (Couchbase Lite's `ArrayExpression`).
///
/// ```swift
/// let like = ArrayExpression.variable("like")
/// ArrayExpression.any(like).in(Expression.property("public_likes"))
///     .satisfies(like.equalTo(Expression.string("Armani Langworth")))
/// ```
public enum ArrayExpression {
    /// `ANY variable IN … SATISFIES …`: true when at least one element satisfies the condition.
    public static func any(_ variable: any VariableExpressionProtocol) -> ArrayExpressionIn {
        ArrayExpressionIn(quantifier: .any, variable: variable)
    }

    /// `EVERY variable IN … SATISFIES …`: true when every element satisfies the condition (also when the array is empty).
    public static func every(_ variable: any VariableExpressionProtocol) -> ArrayExpressionIn {
        ArrayExpressionIn(quantifier: .every, variable: variable)
    }

    /// `ANY AND EVERY variable IN … SATISFIES …`: true when the array is not empty and every element satisfies the condition.
    public static func anyAndEvery(_ variable: any VariableExpressionProtocol) -> ArrayExpressionIn {
        ArrayExpressionIn(quantifier: .anyAndEvery, variable: variable)
    }

    /// A variable for ``any(_:)``, ``every(_:)`` and ``anyAndEvery(_:)``; `"v.name"` reads the member `name` of the element `v`.
    public static func variable(_ name: String) -> any VariableExpressionProtocol {
        VariableExpression(name: name)
    }
}

/// The `IN` step of a quantified expression (Couchbase Lite's `ArrayExpressionIn`).
public struct ArrayExpressionIn: Sendable {
    let quantifier: Quantifier
    let variable: String

    init(quantifier: Quantifier, variable: any VariableExpressionProtocol) {
        self.quantifier = quantifier
        // The bound name is the variable's first path component.
        if case .key(let first)? = PathParser.components(variable.name).first {
            self.variable = first
        } else {
            self.variable = variable.name
        }
    }

    /// The array whose elements the variable ranges over.
    public func `in`(_ expression: any ExpressionProtocol) -> ArrayExpressionSatisfies {
        ArrayExpressionSatisfies(quantifier: quantifier, variable: variable, array: expression.sqlExpression)
    }
}

/// The `SATISFIES` step of a quantified expression (Couchbase Lite's `ArrayExpressionSatisfies`).
public struct ArrayExpressionSatisfies: Sendable {
    let quantifier: Quantifier
    let variable: String
    let array: SQLExpression

    /// The condition each element is tested with; it refers to the element through the variable.
    public func satisfies(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(.quantified(quantifier, variable: variable, in: array, satisfies: expression.sqlExpression))
    }
}

// MARK: - SelectResult

/// An item of a query's SELECT list (Couchbase Lite's `SelectResultProtocol`).
public protocol SelectResultProtocol: Sendable {
    /// The SELECT-list item.
    var item: SelectItem { get }
}

/// A SELECT-list item that can be given a result key (Couchbase Lite's `SelectResultAs`).
public protocol SelectResultAs: SelectResultProtocol {
    /// The same item under the result key `alias`.
    func `as`(_ alias: String?) -> any SelectResultProtocol
}

/// The `*` SELECT-list item, which can be narrowed to one source (Couchbase Lite's `SelectResultFrom`).
public protocol SelectResultFrom: SelectResultProtocol {
    /// The whole document of the data source with the given alias (`alias.*`).
    func from(_ alias: String?) -> any SelectResultProtocol
}

/// A SELECT-list item (Couchbase Lite's `SelectResult`).
///
/// ```swift
/// SelectResult.all()                          // the whole document, under the source's name
/// SelectResult.property("name")               // key "name"
/// SelectResult.expression(Meta.id).as("metaId")
/// SelectResult.expression(Function.count(Expression.all())).as("mycount")
/// ```
///
/// Without ``as(_:)``, a property's result key is the last component of its path (`"geo.alt"` → `"alt"`),
/// and another expression's is `$1`, `$2`, … by position; the executor assigns these.
public struct SelectResult: SelectResultAs, SelectResultFrom {
    /// The SELECT-list item.
    public var item: SelectItem

    /// Wraps a SELECT-list item.
    public init(_ item: SelectItem) { self.item = item }

    /// All properties of the document (`*`), as one dictionary under the data source's alias or collection name.
    public static func all() -> SelectResult {
        SelectResult(SelectItem(.all(source: nil)))
    }

    /// A property by path (see ``Expression/property(_:)``).
    public static func property(_ property: String) -> SelectResult {
        SelectResult(SelectItem(.expression(.property(source: nil, path: PathParser.components(property)))))
    }

    /// Any expression. `Expression.all()` is the same as ``all()``, and `Expression.all().from(alias)`
    /// the same as `all().from(alias)`.
    public static func expression(_ expression: any ExpressionProtocol) -> SelectResult {
        switch expression.sqlExpression {
        case .star: return SelectResult(SelectItem(.all(source: nil)))
        case .property(let source?, let path) where path.isEmpty: return SelectResult(SelectItem(.all(source: source)))
        case let e: return SelectResult(SelectItem(.expression(e)))
        }
    }

    /// The same item under the result key `alias` (`AS alias`).
    public func `as`(_ alias: String?) -> any SelectResultProtocol {
        var copy = self
        copy.item.alias = alias
        return copy
    }

    /// For ``all()``: all properties of the data source with the given alias only (`alias.*`).
    /// Other items are returned unchanged.
    public func from(_ alias: String?) -> any SelectResultProtocol {
        guard case .all = item.kind else { return self }
        var copy = self
        copy.item.kind = .all(source: alias)
        return copy
    }
}

// MARK: - Ordering

/// An ORDER BY item (Couchbase Lite's `OrderingProtocol`).
public protocol OrderingProtocol: Sendable {
    /// The ORDER BY item.
    var item: OrderItem { get }
}

/// An ORDER BY item whose direction can be chosen (Couchbase Lite's `QuerySortOrder`).
public protocol QuerySortOrder: OrderingProtocol {
    /// Smallest first (the default).
    func ascending() -> any OrderingProtocol
    /// Largest first.
    func descending() -> any OrderingProtocol
}

/// An ORDER BY item (Couchbase Lite's `Ordering`); ascending unless ``descending()`` is called.
///
/// ```swift
/// .orderBy(Ordering.property("title").ascending(), Ordering.expression(Meta.sequence).descending())
/// ```
public struct Ordering: QuerySortOrder {
    /// The ORDER BY item.
    public var item: OrderItem

    /// Wraps an ORDER BY item.
    public init(_ item: OrderItem) { self.item = item }

    /// Orders by a property path (see ``Expression/property(_:)``).
    public static func property(_ property: String) -> Ordering {
        Ordering(OrderItem(.property(source: nil, path: PathParser.components(property))))
    }

    /// Orders by an expression.
    public static func expression(_ expression: any ExpressionProtocol) -> Ordering {
        Ordering(OrderItem(expression.sqlExpression))
    }

    /// Smallest first.
    public func ascending() -> any OrderingProtocol {
        var copy = self
        copy.item.descending = false
        return copy
    }

    /// Largest first.
    public func descending() -> any OrderingProtocol {
        var copy = self
        copy.item.descending = true
        return copy
    }
}

// MARK: - ValueIndexItem

/// A key of a value index (Couchbase Lite's `ValueIndexItem`).
public struct ValueIndexItem: Sendable, Hashable {
    /// The indexed expression.
    public let expression: SQLExpression

    /// Wraps an indexed expression.
    public init(_ expression: SQLExpression) { self.expression = expression }

    /// Indexes a property path (see ``Expression/property(_:)``).
    public static func property(_ property: String) -> ValueIndexItem {
        ValueIndexItem(.property(source: nil, path: PathParser.components(property)))
    }

    /// Indexes an expression.
    public static func expression(_ expression: any ExpressionProtocol) -> ValueIndexItem {
        ValueIndexItem(expression.sqlExpression)
    }
}

/// An index named in a query function (Couchbase Lite's `IndexExpressionProtocol`).
public protocol IndexExpressionProtocol: Sendable {
    /// The index's name.
    var name: String { get }
}

/// A full-text index named in `MATCH` / `RANK` (Couchbase Lite's `FullTextIndexExpressionProtocol`).
public protocol FullTextIndexExpressionProtocol: IndexExpressionProtocol {
    /// The same index read through the data source `alias`.
    func from(_ alias: String) -> any IndexExpressionProtocol
}

/// A full-text index named in `MATCH` / `RANK` (what ``Expression/fullTextIndex(_:)`` returns).
public struct FullTextIndexExpression: FullTextIndexExpressionProtocol {
    public let name: String
    /// `alias.index` when the query joins several sources.
    public let source: String?
    /// The same index read through the data source `alias`.
    public func from(_ alias: String) -> any IndexExpressionProtocol { FullTextIndexExpression(name: name, source: alias) }
}

extension IndexExpressionProtocol {
    var argument: SQLExpression { .literal(.string(name)) }
}

extension Expression {
    /// Names a full-text index for `FullTextFunction.match` / `rank`.
    public static func fullTextIndex(_ name: String) -> FullTextIndexExpression {
        FullTextIndexExpression(name: name, source: nil)
    }
}

/// Full-text functions (Couchbase Lite's `FullTextFunction`): `MATCH(index, query)` and `RANK(index)`.
///
/// ```swift
/// .where(FullTextFunction.match(Expression.fullTextIndex("desc"), query: "pool NOT spa"))
/// .orderBy(Ordering.expression(FullTextFunction.rank(Expression.fullTextIndex("desc"))).descending())
/// ```
/// `RANK` is FTS5's bm25 score negated, so higher is more relevant: order by it descending for best first.
public enum FullTextFunction {
    /// True for documents the full-text index matches with `query` (FTS5 syntax: terms, "phrases", prefix*,
    /// AND/OR/NOT, NEAR, parentheses).
    public static func match(_ index: any IndexExpressionProtocol, query: String) -> any ExpressionProtocol {
        BuiltExpression( .function("MATCH", [index.argument, .literal(.string(query))], distinct: false))
    }
    /// `match` with the index given by name.
    public static func match(withIndex indexName: String, query: String) -> any ExpressionProtocol {
        match(Expression.fullTextIndex(indexName), query: query)
    }
    /// `match` with the query given as an expression (a parameter).
    public static func match(_ index: any IndexExpressionProtocol, query: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression( .function("MATCH", [index.argument, query.sqlExpression], distinct: false))
    }
    /// The relevance of the match (higher is better).
    public static func rank(_ index: any IndexExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression( .function("RANK", [index.argument], distinct: false))
    }
    /// `rank` with the index given by name.
    public static func rank(withIndex indexName: String) -> any ExpressionProtocol {
        rank(Expression.fullTextIndex(indexName))
    }
    /// Couchbase Lite's deprecated `rank(_:)` by index name.
    @available(*, deprecated, message: "Use FullTextFunction.rank(_ index: IndexExpressionProtocol)")
    public static func rank(_ indexName: String) -> any ExpressionProtocol {
        rank(Expression.fullTextIndex(indexName))
    }
    /// Couchbase Lite's deprecated `match(indexName:query:)`.
    @available(*, deprecated, message: "Use FullTextFunction.match(_ index: IndexExpressionProtocol, query:)")
    public static func match(indexName: String, query: String) -> any ExpressionProtocol {
        match(Expression.fullTextIndex(indexName), query: query)
    }
}

/// A full-text index waiting for its query (Couchbase Lite's deprecated `FullTextExpressionProtocol`).
public protocol FullTextExpressionProtocol {
    /// `MATCH(index, query)`.
    func match(_ query: String) -> any ExpressionProtocol
}

/// Couchbase Lite's deprecated full-text expression: `FullTextExpression.index("desc").match("pool")`.
public enum FullTextExpression {
    @available(*, deprecated, message: "Use FullTextFunction.match(_:query:)")
    public static func index(_ name: String) -> any FullTextExpressionProtocol { NamedFullTextIndex(name: name) }

    struct NamedFullTextIndex: FullTextExpressionProtocol {
        let name: String
        func match(_ query: String) -> any ExpressionProtocol {
            FullTextFunction.match(Expression.fullTextIndex(name), query: query)
        }
    }
}
