// Matching, after CouchDB's `mango_selector:match/3` and `mango_doc:get_field/2`, and the
// view-collation comparison it uses.

extension MangoSelector.Node {
    func matches(_ value: JSON, _ order: MangoStringOrder) -> Bool {
        switch self {
        case .and(let nodes):
            for node in nodes where !node.matches(value, order) { return false }
            return true
        case .or(let nodes):
            if nodes.isEmpty { return true }
            for node in nodes where node.matches(value, order) { return true }
            return false
        case .field(let path, let test):
            let found: JSON
            switch MangoSelector.lookup(path, in: value) {
            case .found(let subvalue): found = subvalue
            case .notFound: return test.matchesMissing
            case .badPath: return false
            }
            switch test {
            case .plain(let condition): return condition.matches(found, order)
            case .negated(let condition): return !condition.matches(found, order)
            }
        }
    }
}

extension MangoSelector {
    enum Lookup {
        case found(JSON)
        /// An object along the path lacks the key.
        case notFound
        /// The path runs into a scalar, or into an array with a non-index or out-of-range step.
        /// Unlike `notFound`, this does not satisfy `$exists: false` (as in CouchDB).
        case badPath
    }

    static func lookup(_ path: [PathComponent], in value: JSON) -> Lookup {
        var current = value
        for component in path {
            switch current {
            case .object(let object):
                guard let next = object[component.key] else { return .notFound }
                current = next
            case .array(let array):
                guard let index = component.index, array.indices.contains(index) else { return .badPath }
                current = array[index]
            default:
                return .badPath
            }
        }
        return .found(current)
    }
}

extension MangoSelector.Condition {
    func matches(_ value: JSON, _ order: MangoStringOrder) -> Bool {
        switch self {
        case .lt(let operand): return MangoCollation.compare(value, operand, order) < 0
        case .lte(let operand): return MangoCollation.compare(value, operand, order) <= 0
        case .eq(let operand): return MangoCollation.compare(value, operand, order) == 0
        case .ne(let operand): return MangoCollation.compare(value, operand, order) != 0
        case .gte(let operand): return MangoCollation.compare(value, operand, order) >= 0
        case .gt(let operand): return MangoCollation.compare(value, operand, order) > 0
        case .exists(let flag):
            // Reached only for a present value; a missing one is handled by `Test.matchesMissing`.
            return flag
        case .type(let name):
            return MangoCollation.typeName(value) == name
        case .in(let operands):
            // An array field matches when any of its elements equals any operand.
            if case .array(let elements) = value {
                return elements.contains { element in operands.contains { MangoCollation.equal(element, $0, order) } }
            }
            return operands.contains { MangoCollation.equal(value, $0, order) }
        case .nin(let operands):
            return !MangoSelector.Condition.in(operands).matches(value, order)
        case .size(let count):
            if case .array(let elements) = value { return elements.count == count }
            return false
        case .mod(let divisor, let remainder):
            guard case .int(let number) = value else { return false }
            // Truncating remainder, like Erlang's `rem`; Int64.min % -1 is 0.
            let (result, overflow) = number.remainderReportingOverflow(dividingBy: divisor)
            return (overflow ? 0 : result) == remainder
        case .regex(let regex):
            if case .string(let string) = value { return regex.matches(string) }
            return false
        case .beginsWith(let prefix):
            if case .string(let string) = value { return string.utf8.starts(with: prefix.utf8) }
            return false
        case .all(let operands):
            // `"$all": []` matches nothing. `"$all": [A]` with A an array also matches a field equal to A.
            if operands.isEmpty { return false }
            if operands.count == 1, case .array = operands[0], MangoCollation.equal(operands[0], value, order) {
                return true
            }
            guard case .array(let elements) = value else { return false }
            return operands.allSatisfy { operand in elements.contains { MangoCollation.equal($0, operand, order) } }
        case .elemMatch(let node):
            guard case .array(let elements) = value else { return false }
            return elements.contains { node.matches($0, order) }
        case .allMatch(let node):
            guard case .array(let elements) = value, !elements.isEmpty else { return false }
            return elements.allSatisfy { node.matches($0, order) }
        case .keyMapMatch(let node):
            guard case .object(let object) = value else { return false }
            return object.contains { node.matches(.string($0.key), order) }
        }
    }
}

// MARK: - Collation

/// How a selector orders strings: CouchDB compares them with ICU's collation (``MangoSelector/matches(_:strings:)``
/// takes one); without it, by Unicode scalar.
package typealias MangoStringOrder = ((String, String) -> Int)?

/// CouchDB view collation: strings in the given order (Unicode scalar by default), and objects with the same
/// members compare equal whatever their key order.
enum MangoCollation {
    /// -1, 0 or 1 as `a` sorts before, with or after `b`.
    static func compare(_ a: JSON, _ b: JSON, _ order: MangoStringOrder = nil) -> Int {
        let rankA = rank(a), rankB = rank(b)
        if rankA != rankB { return rankA < rankB ? -1 : 1 }
        switch (a, b) {
        case (.int(let x), .int(let y)): return x < y ? -1 : (x > y ? 1 : 0)
        case (.double(let x), .double(let y)): return x < y ? -1 : (x > y ? 1 : 0)
        case (.int(let x), .double(let y)): return compare(x, y)
        case (.double(let x), .int(let y)): return -compare(y, x)
        case (.string(let x), .string(let y)):
            if let order { return order(x, y).signum() }
            return compare(x, y)
        case (.array(let x), .array(let y)):
            for (left, right) in zip(x, y) {
                let c = compare(left, right, order)
                if c != 0 { return c }
            }
            return x.count < y.count ? -1 : (x.count > y.count ? 1 : 0)
        case (.object(let x), .object(let y)):
            return compare(x, y, order)
        default:
            return 0  // null/null, and booleans (already ordered by rank)
        }
    }

    static func equal(_ a: JSON, _ b: JSON, _ order: MangoStringOrder = nil) -> Bool {
        compare(a, b, order) == 0
    }

    /// null < false < true < numbers < strings < arrays < objects.
    static func rank(_ value: JSON) -> Int {
        switch value {
        case .null: return 0
        case .bool(let flag): return flag ? 2 : 1
        case .int, .double: return 3
        case .string: return 4
        case .array: return 5
        case .object: return 6
        }
    }

    /// The `$type` name of a value.
    static func typeName(_ value: JSON) -> String { value.typeName }

    /// Exact comparison of an integer with a double (no rounding of large integers).
    static func compare(_ x: Int64, _ y: Double) -> Int {
        if y.isNaN { return 0 }
        if y >= 9_223_372_036_854_775_808.0 { return -1 }
        if y < -9_223_372_036_854_775_808.0 { return 1 }
        let whole = y.rounded(.towardZero)
        let truncated = Int64(whole)
        if x != truncated { return x < truncated ? -1 : 1 }
        let fraction = y - whole
        return fraction > 0 ? -1 : (fraction < 0 ? 1 : 0)
    }

    /// Unicode scalar order, which is UTF-8 byte order.
    static func compare(_ x: String, _ y: String) -> Int {
        var left = x.utf8.makeIterator()
        var right = y.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let l?, let r?):
                if l != r { return l < r ? -1 : 1 }
            }
        }
    }

    /// Key/value pairs in order, then length; but objects with the same members are equal.
    static func compare(_ x: JSONObject, _ y: JSONObject, _ strings: MangoStringOrder = nil) -> Int {
        var order = 0
        for (left, right) in zip(x, y) {
            order = strings.map { $0(left.key, right.key).signum() } ?? compare(left.key, right.key)
            if order != 0 { break }
            order = compare(left.value, right.value, strings)
            if order != 0 { break }
        }
        if order == 0 { return x.count < y.count ? -1 : (x.count > y.count ? 1 : 0) }
        if x.count == y.count && sameMembers(x, y, strings) { return 0 }
        return order
    }

    static func sameMembers(_ x: JSONObject, _ y: JSONObject, _ strings: MangoStringOrder = nil) -> Bool {
        for (key, value) in x {
            guard let other = y[key], equal(value, other, strings) else { return false }
        }
        return true
    }
}
