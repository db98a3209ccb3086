// What a query planner needs from a selector, after CouchDB's `mango_selector:has_required_fields/2`,
// `is_constant_field/2` and `mango_idx_view:range/5`: which fields every match has, and the range of values a
// field is restricted to by the top-level conjunction.

extension MangoSelector {
    /// A field's path: its components, with escaped dots (`a\.b`) resolved.
    public typealias FieldPath = [String]

    /// The components of a field name as Mango reads it (`"a.b"` is `a` then `b`; `"a\\.b"` is the key `a.b`).
    /// - Throws: `.badRequest` `Invalid field name: …` for an empty segment.
    public static func fieldPath(_ name: String) throws(SetteeError) -> FieldPath {
        try parseFieldName(name).map(\.key)
    }

    /// The value at `path` in `document`, as Mango looks fields up (array elements by index); nil when missing.
    public static func value(at path: FieldPath, in document: JSON) -> JSON? {
        if case .found(let value) = lookup(path.map(PathComponent.init), in: document) { return value }
        return nil
    }

    /// A field path prepared for many lookups (a json index's column, read from every document).
    public struct CompiledPath: Sendable {
        let components: [PathComponent]
        public init(_ path: FieldPath) { components = path.map(PathComponent.init) }
        /// The value at the path in `document`; nil when missing.
        public func value(in document: JSON) -> JSON? {
            if case .found(let value) = MangoSelector.lookup(components, in: document) { return value }
            return nil
        }
    }

    /// One end of a field's range.
    public struct Bound: Sendable, Equatable {
        public let value: JSON
        public let inclusive: Bool
    }

    /// The values a field is restricted to by the selector's top-level conjunction (`$eq`, `$gt`, `$gte`, `$lt`,
    /// `$lte`, `$beginsWith`); nil ends are open.
    public struct FieldRange: Sendable, Equatable {
        public var lower: Bound?
        public var upper: Bound?
        /// The field equals one value (`$eq`): the range is that point.
        public var isPoint: Bool {
            guard let lower, let upper, lower.inclusive, upper.inclusive else { return false }
            return MangoCollation.equal(lower.value, upper.value)
        }
    }

    /// Whether every document the selector matches has `path` (CouchDB's `has_required_fields`): a condition on
    /// it in the top-level conjunction other than `{"$exists": false}`, or in every branch of an `$or` there.
    public func requires(_ path: FieldPath) -> Bool {
        Self.requires(root, path.map(PathComponent.init))
    }

    private static func requires(_ node: Node, _ path: [PathComponent]) -> Bool {
        switch node {
        case .and(let items): return items.contains { requires($0, path) }
        case .or(let items): return items.allSatisfy { requires($0, path) }  // (`"$or": []` covers every field)
        case .field(let p, let test): return p == path && !test.matchesMissing
        }
    }

    /// Whether the top-level conjunction fixes `path` to one value (`$eq`) — CouchDB's `is_constant_field`.
    public func isConstant(_ path: FieldPath) -> Bool {
        range(of: path)?.isPoint ?? false
    }

    /// The range the top-level conjunction restricts `path` to; nil when no condition there bounds it.
    public func range(of path: FieldPath) -> FieldRange? {
        let components = path.map(PathComponent.init)
        var range = FieldRange()
        var bounded = false
        func tighten(lower: Bound?, upper: Bound?) {
            if let lower {
                bounded = true
                if let current = range.lower {
                    let c = MangoCollation.compare(lower.value, current.value)
                    if c > 0 || (c == 0 && !lower.inclusive) { range.lower = lower }
                } else {
                    range.lower = lower
                }
            }
            if let upper {
                bounded = true
                if let current = range.upper {
                    let c = MangoCollation.compare(upper.value, current.value)
                    if c < 0 || (c == 0 && !upper.inclusive) { range.upper = upper }
                } else {
                    range.upper = upper
                }
            }
        }
        func visit(_ node: Node) {
            switch node {
            case .and(let items): items.forEach(visit)
            case .or: return
            case .field(let p, let test):
                guard p == components, case .plain(let condition) = test else { return }
                switch condition {
                case .eq(let v): tighten(lower: Bound(value: v, inclusive: true), upper: Bound(value: v, inclusive: true))
                case .gt(let v): tighten(lower: Bound(value: v, inclusive: false), upper: nil)
                case .gte(let v): tighten(lower: Bound(value: v, inclusive: true), upper: nil)
                case .lt(let v): tighten(lower: nil, upper: Bound(value: v, inclusive: false))
                case .lte(let v): tighten(lower: nil, upper: Bound(value: v, inclusive: true))
                case .beginsWith(let prefix):
                    // Strings starting with the prefix sort from it up to it followed by U+FFFF (CouchDB's bound).
                    tighten(lower: Bound(value: .string(prefix), inclusive: true),
                            upper: Bound(value: .string(prefix + "\u{FFFF}"), inclusive: true))
                default: return
                }
            }
        }
        visit(root)
        return bounded ? range : nil
    }

    /// The fields an index range can use (CouchDB's `indexable_fields`): those with a `$lt`, `$lte`, `$eq`, `$gt`,
    /// `$gte`, `$beginsWith` or `$exists` condition in the top-level conjunction, in order of appearance.
    public var indexableFields: [FieldPath] {
        var out: [FieldPath] = []
        func visit(_ node: Node) {
            switch node {
            case .and(let items): items.forEach(visit)
            case .or: return
            case .field(let p, .plain(let condition)):
                switch condition {
                case .lt, .lte, .eq, .gt, .gte, .beginsWith, .exists:
                    let path = p.map(\.key)
                    if !out.contains(path) { out.append(path) }
                default: return
                }
            case .field: return
            }
        }
        visit(root)
        return out
    }

    /// Whether the top-level conjunction's conditions on `path` contradict each other (`$gt 5` and `$lt 3`): no
    /// document can match.
    public func isEmptyRange(_ path: FieldPath) -> Bool {
        guard let range = range(of: path), let lower = range.lower, let upper = range.upper else { return false }
        let c = MangoCollation.compare(lower.value, upper.value)
        return c > 0 || (c == 0 && !(lower.inclusive && upper.inclusive))
    }

    /// The fields the selector names (top level and under `$and`/`$or`/`$nor`/`$not`, not inside `$elemMatch` and
    /// its kind), in order of appearance, once each.
    public var fields: [FieldPath] {
        var out: [FieldPath] = []
        func visit(_ node: Node) {
            switch node {
            case .and(let items), .or(let items): items.forEach(visit)
            case .field(let p, _):
                let path = p.map(\.key)
                if !out.contains(path) { out.append(path) }
            }
        }
        visit(root)
        return out
    }

    /// The normalized selector as CouchDB's `_explain` shows it: `$and`/`$or` of `{"field": {"$op": arg}}`.
    public var normalizedJSON: JSON {
        Self.json(root)
    }

    private static func json(_ node: Node) -> JSON {
        switch node {
        case .and(let items): return ["$and": .array(items.map(json))]
        case .or(let items): return ["$or": .array(items.map(json))]
        case .field(let path, let test):
            var name = path.map { $0.key.split(separator: ".", omittingEmptySubsequences: false).joined(separator: "\\.") }.joined(separator: ".")
            // A field named like an operator was written escaped (`"\\$or"`): keep it escaped, or it reads back as one.
            if name.hasPrefix("$") { name = "\\" + name }
            let condition: JSON
            switch test {
            case .plain(let c): condition = json(c)
            case .negated(let c): condition = ["$not": json(c)]
            }
            return name.isEmpty ? condition : .object(JSONObject([(name, condition)]))
        }
    }

    private static func json(_ condition: Condition) -> JSON {
        switch condition {
        case .lt(let v): return ["$lt": v]
        case .lte(let v): return ["$lte": v]
        case .eq(let v): return ["$eq": v]
        case .ne(let v): return ["$ne": v]
        case .gte(let v): return ["$gte": v]
        case .gt(let v): return ["$gt": v]
        case .exists(let b): return ["$exists": .bool(b)]
        case .type(let t): return ["$type": .string(t)]
        case .in(let v): return ["$in": .array(v)]
        case .nin(let v): return ["$nin": .array(v)]
        case .size(let n): return ["$size": .int(Int64(n))]
        case .mod(let d, let r): return ["$mod": [.int(d), .int(r)]]
        case .regex(let r): return ["$regex": .string(r.pattern)]
        case .beginsWith(let p): return ["$beginsWith": .string(p)]
        case .all(let v): return ["$all": .array(v)]
        case .elemMatch(let n): return ["$elemMatch": json(n)]
        case .allMatch(let n): return ["$allMatch": json(n)]
        case .keyMapMatch(let n): return ["$keyMapMatch": json(n)]
        }
    }
}
