package import SetteeCore

/// One step of a property path: a member name or an array index (`a.b[2].c`).
package enum PathComponent: Sendable, Hashable {
    case key(String)
    case index(Int)
}

/// The fields of `META()`.
package enum MetaField: String, Sendable, Hashable, CaseIterable {
    case id
    case sequence
    case revisionID
    case deleted
    case expiration
}

/// Binary operators, in SQL++ spelling.
package enum BinaryOperator: String, Sendable, Hashable {
    case add = "+", subtract = "-", multiply = "*", divide = "/", modulo = "%"
    case concat = "||"
    case equal = "=", notEqual = "!="
    case less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    case and = "AND", or = "OR"
    /// `IS` / `IS NOT` between two values (SQL++ `IS` compares like `=` but `MISSING IS MISSING` and `NULL IS NULL` are true).
    case `is` = "IS", isNot = "IS NOT"
}

/// `IS [NOT] NULL`, `IS [NOT] MISSING`, `IS [NOT] VALUED`.
package enum NullCheck: String, Sendable, Hashable {
    case null = "NULL", missing = "MISSING", valued = "VALUED"
}

/// `ANY`, `EVERY`, `ANY AND EVERY` … `SATISFIES`.
package enum Quantifier: String, Sendable, Hashable {
    case any = "ANY", every = "EVERY", anyAndEvery = "ANY AND EVERY"
}

/// A `WHEN … THEN …` arm of a `CASE` expression.
package struct CaseArm: Sendable, Hashable {
    public var when: SQLExpression
    public var then: SQLExpression
    public init(when: SQLExpression, then: SQLExpression) {
        self.when = when
        self.then = then
    }
}

/// A member of an object literal `{"a": expr}`.
package struct ObjectMember: Sendable, Hashable {
    public var key: String
    public var value: SQLExpression
    public init(key: String, value: SQLExpression) {
        self.key = key
        self.value = value
    }
}

/// An expression of SQL++ for Mobile: what the parser produces and what the QueryBuilder API builds.
///
/// Properties are written as paths; which data source a path starts from is decided when the query is
/// bound (a first component equal to a source alias or a bound `ANY` variable names that source or variable).
package indirect enum SQLExpression: Sendable, Hashable {
    /// A constant: null, a boolean, a number or a string.
    case literal(JSON)
    /// The `MISSING` literal.
    case missing
    /// `[e1, e2, …]`
    case array([SQLExpression])
    /// `{"k": e, …}`
    case object([ObjectMember])
    /// A property path; `source` is set when the path was qualified by a data-source alias (QueryBuilder's `.from(alias)`).
    case property(source: String?, path: [PathComponent])
    /// `META([source]).field`
    case meta(source: String?, field: MetaField)
    /// `$name`
    case parameter(String)
    /// `NOT e`
    case not(SQLExpression)
    /// `-e`
    case negate(SQLExpression)
    case binary(BinaryOperator, SQLExpression, SQLExpression)
    /// `e IS [NOT] NULL|MISSING|VALUED`
    case check(SQLExpression, NullCheck, negated: Bool)
    /// `e [NOT] BETWEEN low AND high`
    case between(SQLExpression, low: SQLExpression, high: SQLExpression, negated: Bool)
    /// `e [NOT] IN (list)` or `e [NOT] IN [list]`
    case `in`(SQLExpression, [SQLExpression], negated: Bool)
    /// `e [NOT] IN arrayExpression` where the right side is computed (a property, a parameter …).
    case inArray(SQLExpression, SQLExpression, negated: Bool)
    /// A path into a computed value: `(expr).a[0]`.
    case path(SQLExpression, [PathComponent])
    /// `e [NOT] LIKE pattern` (case-sensitive; `%` any run, `_` one character, `\` escapes).
    case like(SQLExpression, pattern: SQLExpression, negated: Bool)
    /// A function call; `name` is upper-case. `COUNT(*)` has the single argument ``star``.
    case function(String, [SQLExpression], distinct: Bool)
    /// `*` inside `COUNT(*)`.
    case star
    /// `ANY|EVERY var IN array SATISFIES condition END`
    case quantified(Quantifier, variable: String, in: SQLExpression, satisfies: SQLExpression)
    /// `CASE [subject] WHEN … THEN … [ELSE …] END`
    case caseWhen(subject: SQLExpression?, arms: [CaseArm], otherwise: SQLExpression?)
    /// `e COLLATE NOCASE`, `e COLLATE (UNICODE NOCASE NODIAC)`: how strings compare when `e` is an operand of a
    /// comparison or an ORDER BY key. Elsewhere it is `e`'s value. (`(e)` keeps no node.)
    case collate(SQLExpression, StringCollation)
}

/// How a `COLLATE` clause compares strings (Couchbase Lite's collations). Without it, strings compare by code
/// point and case and accents count.
package struct StringCollation: Sendable, Hashable {
    /// The Unicode Collation Algorithm (`UNICODE`, for `locale` or the root locale: `"a" < "B" < "c"`); false
    /// compares code points (`NOUNICODE`, Couchbase Lite's ASCII collation: `"B" < "a"`).
    public var unicode = false
    /// Case is ignored (`NOCASE`; `CASE` keeps it).
    public var ignoreCase = false
    /// Accents are ignored (`NODIAC`, Unicode collation only; `DIAC` keeps them).
    public var ignoreAccents = false
    /// The locale of a Unicode collation (`"en"`, `"sv"`), nil for the root locale. QueryBuilder only: SQL++ text
    /// has no way to name one.
    public var locale: String?

    public init(unicode: Bool = false, ignoreCase: Bool = false, ignoreAccents: Bool = false, locale: String? = nil) {
        self.unicode = unicode
        self.ignoreCase = ignoreCase
        self.ignoreAccents = ignoreAccents
        self.locale = locale
    }

    /// Compares two strings under this collation with the evaluator's ``Evaluator/stringCollator`` when it has
    /// one (ICU's, set by the query executor), else code points with ASCII-only case folding.
    func compare(_ a: String, _ b: String, collator: StringCollator?) -> Int {
        if let collator { return collator(self, a, b) }
        guard ignoreCase else { return ValueCollation.compareStrings(a, b) }
        return ValueCollation.compareStrings(StringCollation.asciiLowercased(a), StringCollation.asciiLowercased(b))
    }

    /// `s` with `A`–`Z` lowered (Couchbase Lite's ASCII collation folds no other letters).
    public static func asciiLowercased(_ s: String) -> String {
        guard s.utf8.contains(where: { (65...90).contains($0) }) else { return s }
        return String(decoding: s.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    }
}

/// Compares two strings under a collation: negative, zero or positive.
package typealias StringCollator = @Sendable (StringCollation, String, String) -> Int

extension SQLExpression {
    /// An unqualified property from a dotted path string, as QueryBuilder's `Expression.property("geo.alt")`.
    public static func property(_ path: String, from source: String? = nil) -> SQLExpression {
        .property(source: source, path: PathParser.components(path))
    }

    /// A literal string.
    public static func string(_ s: String) -> SQLExpression { .literal(.string(s)) }
}

/// One item of the SELECT list.
package struct SelectItem: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// `*` or `alias.*`: the whole document under its source's name.
        case all(source: String?)
        case expression(SQLExpression)
    }
    public var kind: Kind
    /// `AS alias`
    public var alias: String?
    public init(_ kind: Kind, alias: String? = nil) {
        self.kind = kind
        self.alias = alias
    }
}

/// A collection in FROM or JOIN: `[scope.]collection [AS alias]`.
package struct SourceRef: Sendable, Hashable {
    /// Scope name, or nil for the default scope.
    public var scope: String?
    /// Collection name as written (`_` and `_default` mean the default collection).
    public var collection: String
    public var alias: String?
    public init(scope: String? = nil, collection: String, alias: String? = nil) {
        self.scope = scope
        self.collection = collection
        self.alias = alias
    }
    /// The name rows and property paths use for this source: the alias, else the collection name.
    public var name: String { alias ?? collection }
}

package enum JoinKind: String, Sendable, Hashable {
    case inner = "JOIN", leftOuter = "LEFT OUTER JOIN", cross = "CROSS JOIN"
}

package struct JoinClause: Sendable, Hashable {
    public var kind: JoinKind
    public var source: SourceRef
    public var on: SQLExpression?
    public init(kind: JoinKind, source: SourceRef, on: SQLExpression?) {
        self.kind = kind
        self.source = source
        self.on = on
    }
}

/// `UNNEST path AS alias` after FROM.
package struct UnnestClause: Sendable, Hashable {
    public var expression: SQLExpression
    public var alias: String
    public init(expression: SQLExpression, alias: String) {
        self.expression = expression
        self.alias = alias
    }
}

package struct OrderItem: Sendable, Hashable {
    public var expression: SQLExpression
    public var descending: Bool
    public init(_ expression: SQLExpression, descending: Bool = false) {
        self.expression = expression
        self.descending = descending
    }
}

/// A whole `SELECT` statement.
package struct SelectStatement: Sendable, Hashable {
    public var distinct = false
    public var results: [SelectItem] = []
    public var from: SourceRef?
    public var joins: [JoinClause] = []
    public var unnests: [UnnestClause] = []
    public var whereClause: SQLExpression?
    public var groupBy: [SQLExpression] = []
    public var having: SQLExpression?
    public var orderBy: [OrderItem] = []
    public var limit: SQLExpression?
    public var offset: SQLExpression?
    public init() {}
}

/// Splits `a.b[2].c` into path components (`\.` escapes a dot inside a name).
package enum PathParser {
    public static func components(_ path: String) -> [PathComponent] {
        var out: [PathComponent] = []
        var current = ""
        var chars = Array(path)
        var i = 0
        var pendingKey = false
        func flush() {
            if pendingKey || !current.isEmpty { out.append(.key(current)) }
            current = ""
            pendingKey = false
        }
        if chars.first == "$" { chars.removeFirst() }  // tolerate "$.a.b"
        while i < chars.count {
            let c = chars[i]
            if c == "\\" && i + 1 < chars.count {
                current.append(chars[i + 1])
                pendingKey = true
                i += 2
                continue
            }
            if c == "." {
                flush()
                i += 1
                continue
            }
            if c == "[" {
                flush()
                var j = i + 1
                var digits = ""
                while j < chars.count && chars[j] != "]" { digits.append(chars[j]); j += 1 }
                if let n = Int(digits) { out.append(.index(n)) } else if !digits.isEmpty { out.append(.key(digits)) }
                i = j + 1
                continue
            }
            current.append(c)
            pendingKey = true
            i += 1
        }
        flush()
        return out
    }
}
