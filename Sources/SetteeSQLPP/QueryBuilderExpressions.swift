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
public protocol ExpressionProtocol: Sendable {}

/// What every expression the builder makes is: the SQL++ tree it stands for (Settee's own, not API).
package protocol SQLTreeExpression: ExpressionProtocol {
    var tree: SQLExpression { get }
}

/// The builder's own conformance behind a value of one of its public protocols (`as: (any SQLTreeExpression).self`
/// for an `ExpressionProtocol`, …). Only Settee's values conform to those protocols, as only Couchbase Lite's do
/// to its own; an app's type is a programming error, stopped with a message naming what to use instead.
package func builderConformance<Carrier>(of value: Any, as _: Carrier.Type, _ publicProtocol: String, use: String) -> Carrier {
    guard let carrier = value as? Carrier else {
        preconditionFailure("\(publicProtocol) is implemented by Settee's query builder only (as in Couchbase Lite, an app uses its values rather than conforming); use \(use), not \(type(of: value))")
    }
    return carrier
}

extension ExpressionProtocol {
    /// The SQL++ tree this expression stands for.
    package var sqlExpression: SQLExpression {
        builderConformance(of: self, as: (any SQLTreeExpression).self, "ExpressionProtocol", use: "Expression, Function or Meta").tree
    }
}

/// The concrete value behind the `any ExpressionProtocol` results of the builder methods.
struct BuiltExpression: SQLTreeExpression {
    let tree: SQLExpression
    init(_ sqlExpression: SQLExpression) { tree = sqlExpression }
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
struct PropertyExpression: PropertyExpressionProtocol, SQLTreeExpression {
    let path: [PathComponent]
    var tree: SQLExpression { .property(source: nil, path: path) }
    func from(_ alias: String?) -> any ExpressionProtocol {
        BuiltExpression(.property(source: alias, path: path))
    }
}

/// `Expression.all()`: `*` (as in `COUNT(*)`); `.from(alias)` is the whole document of that source.
struct AllExpression: PropertyExpressionProtocol, SQLTreeExpression {
    var tree: SQLExpression { .star }
    func from(_ alias: String?) -> any ExpressionProtocol {
        guard let alias else { return self }
        return BuiltExpression(.property(source: alias, path: []))
    }
}

/// `Meta.id`, `Meta.sequence`, ….
struct MetaExpression: MetaExpressionProtocol, SQLTreeExpression {
    let field: MetaField
    var tree: SQLExpression { .meta(source: nil, field: field) }
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
