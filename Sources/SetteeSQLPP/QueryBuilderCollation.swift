/// A collation for ``ExpressionProtocol/collate(_:)`` (Couchbase Lite's `CollationProtocol`): ``Collation/ASCII``
/// or ``Collation/Unicode``.
public protocol CollationProtocol {}

/// What Settee's collations are: their SQL++ `COLLATE` options (Settee's own, not API).
package protocol StringCollationCarrying: CollationProtocol {
    var collationOptions: StringCollation { get }
}

extension CollationProtocol {
    /// The collation as the SQL++ tree's `COLLATE` options.
    package var stringCollation: StringCollation {
        builderConformance(of: self, as: (any StringCollationCarrying).self, "CollationProtocol",
                           use: "Collation.ascii() or Collation.unicode()").collationOptions
    }
}

/// Collations (Couchbase Lite's `Collation`): how a comparison or an ORDER BY key compares strings.
///
/// ```swift
/// .where(Expression.property("name").collate(Collation.unicode().ignoreCase(true).ignoreAccents(true))
///     .equalTo(Expression.string("cafe")))
/// .orderBy(Ordering.expression(Expression.property("name").collate(Collation.unicode().locale("sv"))))
/// ```
public final class Collation {
    /// Code-point order, case counting unless ``ASCII/ignoreCase(_:)`` (which folds `A`–`Z` only).
    public static func ascii() -> ASCII { ASCII() }

    /// The Unicode Collation Algorithm (`"a" < "B" < "c"`), for a locale or the root locale.
    public static func unicode() -> Unicode { Unicode() }

    /// Couchbase Lite's ASCII collation.
    public final class ASCII: CollationProtocol, StringCollationCarrying {
        private var ignoresCase = false

        /// Whether `A`–`Z` compare equal to `a`–`z`.
        @discardableResult
        public func ignoreCase(_ ignoreCase: Bool) -> Self {
            ignoresCase = ignoreCase
            return self
        }

        package var collationOptions: StringCollation { StringCollation(unicode: false, ignoreCase: ignoresCase) }
    }

    /// Couchbase Lite's Unicode collation.
    public final class Unicode: CollationProtocol, StringCollationCarrying {
        private var ignoresCase = false
        private var ignoresAccents = false
        private var localeIdentifier: String?

        /// Whether case is ignored.
        @discardableResult
        public func ignoreCase(_ ignoreCase: Bool) -> Self {
            ignoresCase = ignoreCase
            return self
        }

        /// Whether accents (diacritics) are ignored.
        @discardableResult
        public func ignoreAccents(_ ignoreAccents: Bool) -> Self {
            ignoresAccents = ignoreAccents
            return self
        }

        /// The locale whose order applies (`"sv"` puts `ä` after `z`); nil for the root locale.
        @discardableResult
        public func locale(_ locale: String?) -> Self {
            localeIdentifier = locale
            return self
        }

        package var collationOptions: StringCollation {
            StringCollation(unicode: true, ignoreCase: ignoresCase, ignoreAccents: ignoresAccents, locale: localeIdentifier)
        }
    }
}

extension ExpressionProtocol {
    /// `self COLLATE …`: this expression compared (as an operand of a comparison, or as an ORDER BY key) by
    /// `collation`.
    public func collate(_ collation: any CollationProtocol) -> any ExpressionProtocol {
        BuiltExpression(.collate(sqlExpression, collation.stringCollation))
    }
}
