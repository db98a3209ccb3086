/// A CouchDB Mango selector (the `selector` of `POST /db/_find`), compiled once and matched against
/// many documents.
///
/// ```swift
/// let selector = try MangoSelector(["year": ["$gte": 2000], "tags": ["$all": ["sf"]]])
/// selector.matches(["_id": "a", "year": 2001, "tags": ["sf", "space"]])   // true
/// ```
///
/// Parsing follows CouchDB's `mango_selector:normalize/1`: implicit `$eq` and `$and`, field names
/// pushed down through `$and`/`$or`/`$not`/`$nor` and joined with dots, then negations pushed to the
/// leaves (De Morgan, `$lt`↔`$gte`, `$eq`↔`$ne`, `$in`↔`$nin`, `$exists` flipped). A condition on a
/// field the document lacks is false, except `{"$exists": false}` — so `$ne`, `$nin` and negated
/// conditions never match a missing field, exactly as in CouchDB.
///
/// Values compare in CouchDB view collation order (null < false < true < numbers < strings <
/// arrays < objects), with strings in Unicode scalar order and objects equal regardless of key order.
package struct MangoSelector: Sendable {
    /// The normalized, negation-free matcher tree.
    let root: Node

    /// Parses and compiles `selector`.
    ///
    /// - Throws: ``SetteeError`` with code ``SetteeError/Code/badRequest`` when the selector is not an
    ///   object, uses an unknown or unsupported operator, gives an operator the wrong kind of
    ///   argument, or has an invalid field name. Reasons follow CouchDB's wording, e.g.
    ///   `Invalid operator: $foo` or `Bad argument for operator $in: 1`.
    public init(_ selector: JSON) throws(SetteeError) {
        root = try Self.compile(selector)
    }

    /// Whether `document` (the whole JSON object, including `_id`, `_rev`, …) matches, strings compared by
    /// Unicode scalar.
    public func matches(_ document: JSON) -> Bool {
        root.matches(document, nil)
    }

    /// Whether `document` matches, strings compared by `strings` (negative, zero or positive) — CouchDB compares
    /// them by ICU's collation, as its views order them.
    public func matches(_ document: JSON, strings: (String, String) -> Int) -> Bool {
        withoutActuallyEscaping(strings) { root.matches(document, $0) }
    }
}

// MARK: - Compiled tree

extension MangoSelector {
    /// A normalized selector node. `$not` and `$nor` have been pushed down into ``Test``.
    indirect enum Node: Sendable {
        /// All must match; an empty list matches everything.
        case and([Node])
        /// Any must match; an empty list matches everything (CouchDB treats `"$or": []` as true).
        case or([Node])
        /// Look `path` up in the current value (an empty path is the value itself) and test it.
        case field([PathComponent], Test)
    }

    /// A condition on one value, possibly negated (for operators with no direct opposite).
    enum Test: Sendable {
        case plain(Condition)
        case negated(Condition)

        /// `{"$exists": false}`: the one test a missing field satisfies.
        var matchesMissing: Bool {
            if case .plain(.exists(false)) = self { return true }
            return false
        }
    }

    /// One operator and its validated argument.
    enum Condition: Sendable {
        case lt(JSON)
        case lte(JSON)
        case eq(JSON)
        case ne(JSON)
        case gte(JSON)
        case gt(JSON)
        case exists(Bool)
        case type(String)
        case `in`([JSON])
        case nin([JSON])
        case size(Int)
        case mod(divisor: Int64, remainder: Int64)
        case regex(MangoRegex)
        case beginsWith(String)
        case all([JSON])
        case elemMatch(Node)
        case allMatch(Node)
        case keyMapMatch(Node)
    }

    /// One step of a field path: an object key, which is also an array index when it is an integer.
    struct PathComponent: Sendable, Equatable {
        let key: String
        let index: Int?

        init(_ key: String) {
            self.key = key
            index = Int(key)
        }
    }
}

/// A compiled `$regex` pattern. Matching is an unanchored search over Unicode scalars, like PCRE's.
// @unchecked: see below — a built `Regex` is immutable and safe to match from several threads.
struct MangoRegex: @unchecked Sendable {
    // `Regex` is not declared Sendable (its `AnyRegexOutput` is not), but a built regex is
    // immutable and the standard library lowers its program lazily with an atomic
    // initialize-once, so matching one instance from several threads is safe.
    let pattern: String
    let regex: Regex<AnyRegexOutput>

    init?(_ pattern: String) {
        guard let regex = try? Regex(pattern) else { return nil }
        self.pattern = pattern
        self.regex = regex.matchingSemantics(.unicodeScalar)
    }

    func matches(_ string: String) -> Bool {
        ((try? regex.firstMatch(in: string)) ?? nil) != nil
    }
}
