// Parsing and normalization, after CouchDB's `mango_selector:normalize/1` (norm_ops, norm_fields,
// norm_negations) and `mango_util:parse_field/1`.

extension MangoSelector {
    /// The selector before negations are pushed down: field paths are already absolute.
    indirect enum Expr {
        case and([Expr])
        case or([Expr])
        case nor([Expr])
        case not(Expr)
        case field([PathComponent], Condition)
    }

    static func compile(_ selector: JSON) throws(SetteeError) -> Node {
        guard case .object(let object) = selector else {
            throw SetteeError(.badRequest, "Selector must be a JSON object, not: \(selector.jsonString)")
        }
        // Only the top-level empty selector matches everything; a nested `{}` means "equals {}".
        if object.isEmpty { return .and([]) }
        let node = normalize(try parse(object, path: []))
        // CouchDB rejects a top-level condition that names no field, e.g. {"$gt": 1}.
        if case .field(let path, _) = node, path.isEmpty {
            throw SetteeError(.badRequest, "One or more conditions is missing a field name.")
        }
        return node
    }

    /// A sub-selector that is not an object is an implicit `$eq`.
    static func parse(_ value: JSON, path: [PathComponent]) throws(SetteeError) -> Expr {
        if case .object(let object) = value { return try parse(object, path: path) }
        return .field(path, .eq(value))
    }

    /// Each member is an operator or a field; several members are an implicit `$and`.
    static func parse(_ object: JSONObject, path: [PathComponent]) throws(SetteeError) -> Expr {
        if object.isEmpty { return .field(path, .eq(.object(object))) }
        if object.count == 1 {
            let (key, value) = object[0]
            return try parseMember(key, value, path: path)
        }
        var parts: [Expr] = []
        parts.reserveCapacity(object.count)
        for (key, value) in object {
            parts.append(try parseMember(key, value, path: path))
        }
        return .and(parts)
    }

    static func parseMember(_ key: String, _ value: JSON, path: [PathComponent]) throws(SetteeError) -> Expr {
        guard key.hasPrefix("$") else {
            return try parse(value, path: path + parseFieldName(key))
        }
        switch key {
        case "$and", "$or", "$nor":
            guard case .array(let items) = value else { throw badArgument(key, value) }
            var parts: [Expr] = []
            parts.reserveCapacity(items.count)
            for item in items {
                parts.append(try parse(item, path: path))
            }
            switch key {
            case "$and": return .and(parts)
            case "$or": return .or(parts)
            default: return .nor(parts)
            }
        case "$not":
            guard case .object = value else { throw badArgument(key, value) }
            return .not(try parse(value, path: path))
        default:
            return .field(path, try parseCondition(key, value))
        }
    }

    static func parseCondition(_ op: String, _ value: JSON) throws(SetteeError) -> Condition {
        switch op {
        case "$lt": return .lt(value)
        case "$lte": return .lte(value)
        case "$eq": return .eq(value)
        case "$ne": return .ne(value)
        case "$gte": return .gte(value)
        case "$gt": return .gt(value)
        case "$exists":
            guard case .bool(let flag) = value else { throw badArgument(op, value) }
            return .exists(flag)
        case "$type":
            // Any string is accepted, as in CouchDB; one that names no JSON type matches nothing.
            guard case .string(let name) = value else { throw badArgument(op, value) }
            return .type(name)
        case "$in", "$nin", "$all":
            guard case .array(let items) = value else { throw badArgument(op, value) }
            switch op {
            case "$in": return .in(items)
            case "$nin": return .nin(items)
            default: return .all(items)
            }
        case "$size":
            guard case .int(let size) = value, size >= 0, let count = Int(exactly: size) else {
                throw badArgument(op, value)
            }
            return .size(count)
        case "$mod":
            // Divisor 0 would crash CouchDB's `rem` at match time; reject it up front instead.
            guard case .array(let pair) = value, pair.count == 2,
                  case .int(let divisor) = pair[0], case .int(let remainder) = pair[1], divisor != 0
            else { throw badArgument(op, value) }
            return .mod(divisor: divisor, remainder: remainder)
        case "$regex":
            // A non-string operand is no `$regex` at all for CouchDB (`Invalid operator`); a pattern that doesn't
            // compile is a bad argument.
            guard case .string(let pattern) = value else { throw SetteeError(.badRequest, "Invalid operator: \(op)") }
            guard let regex = MangoRegex(pattern) else { throw badArgument(op, value) }
            return .regex(regex)
        case "$beginsWith":
            guard case .string(let prefix) = value else { throw SetteeError(.badRequest, "Invalid operator: \(op)") }
            return .beginsWith(prefix)
        case "$elemMatch", "$allMatch", "$keyMapMatch":
            // The argument is a selector relative to each element (or key), normalized on its own.
            guard case .object(let object) = value else { throw badArgument(op, value) }
            let sub = normalize(try parse(object, path: []))
            switch op {
            case "$elemMatch": return .elemMatch(sub)
            case "$allMatch": return .allMatch(sub)
            default: return .keyMapMatch(sub)
            }
        case "$text", "$where", "$geoWithin", "$geoIntersects", "$near", "$nearSphere":
            throw SetteeError(.badRequest, "Unsupported operator: \(op)")
        default:
            throw SetteeError(.badRequest, "Invalid operator: \(op)")
        }
    }

    static func badArgument(_ op: String, _ value: JSON) -> SetteeError {
        SetteeError(.badRequest, "Bad argument for operator \(op): \(value.jsonString)")
    }

    /// Splits a field name on dots not preceded by a backslash, then drops the backslashes
    /// (`"a\\.b"` is the single key `a.b`). Empty segments are an error.
    static func parseFieldName(_ name: String) throws(SetteeError) -> [PathComponent] {
        var components: [PathComponent] = []
        var current = String.UnicodeScalarView()
        var previousWasBackslash = false
        func finish() throws(SetteeError) {
            guard !current.isEmpty else { throw SetteeError(.badRequest, "Invalid field name: \(name)") }
            components.append(PathComponent(String(current)))
            current = String.UnicodeScalarView()
        }
        for scalar in name.unicodeScalars {
            if scalar == "." && !previousWasBackslash {
                try finish()
            } else if scalar != "\\" {
                current.append(scalar)
            }
            previousWasBackslash = scalar == "\\"
        }
        try finish()
        return components
    }

    // MARK: Negations

    /// Removes `$not` and `$nor`, pushing negation down to the leaves (CouchDB's norm_negations).
    static func normalize(_ expr: Expr) -> Node {
        switch expr {
        case .not(let inner): return negate(inner)
        case .nor(let items): return .and(items.map(negate))
        case .and(let items): return .and(items.map(normalize))
        case .or(let items): return .or(items.map(normalize))
        case .field(let path, let condition): return .field(path, .plain(condition))
        }
    }

    /// The normalized negation of `expr` (CouchDB's negate).
    static func negate(_ expr: Expr) -> Node {
        switch expr {
        case .not(let inner): return normalize(inner)
        case .nor(let items): return .or(items.map(normalize))
        case .and(let items): return .or(items.map(negate))
        case .or(let items): return .and(items.map(negate))
        case .field(let path, let condition): return .field(path, negate(condition))
        }
    }

    static func negate(_ condition: Condition) -> Test {
        switch condition {
        case .lt(let value): return .plain(.gte(value))
        case .lte(let value): return .plain(.gt(value))
        case .eq(let value): return .plain(.ne(value))
        case .ne(let value): return .plain(.eq(value))
        case .gte(let value): return .plain(.lt(value))
        case .gt(let value): return .plain(.lte(value))
        case .in(let values): return .plain(.nin(values))
        case .nin(let values): return .plain(.in(values))
        case .exists(let flag): return .plain(.exists(!flag))
        default: return .negated(condition)
        }
    }
}
