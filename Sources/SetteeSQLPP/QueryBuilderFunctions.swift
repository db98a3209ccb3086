import SetteeCore

// Couchbase Lite's `Function`, `ArrayFunction` and `ArrayExpression`: QueryBuilder's function calls and array
// predicates, each a wrapper around the SQL++ AST.

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
struct VariableExpression: VariableExpressionProtocol, SQLTreeExpression {
    let name: String
    var tree: SQLExpression { .property(source: nil, path: PathParser.components(name)) }
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
