package import SetteeCore

/// SQL++ value semantics shared by the evaluator, the functions and the index key encoding.
///
/// A value is `JSON?`: `nil` is MISSING. Values of different types order by type:
/// MISSING < null < false < true < numbers < strings < arrays < objects. Numbers compare numerically
/// (`1 = 1.0`), strings by Unicode code point (UTF-8 bytes), arrays element by element then by length,
/// objects by member count, then sorted keys, then values.
package enum ValueCollation {
    /// The rank of a value's type in the collation order.
    @inlinable
    package static func typeRank(_ value: JSON?) -> Int {
        guard let value else { return 0 }
        switch value {
        case .null: return 1
        case .bool(false): return 2
        case .bool(true): return 3
        case .int, .double: return 4
        case .string: return 5
        case .array: return 6
        case .object: return 7
        }
    }

    /// Total order over values (MISSING first): negative, zero or positive.
    package static func compare(_ a: JSON?, _ b: JSON?) -> Int {
        let ra = typeRank(a), rb = typeRank(b)
        if ra != rb { return ra < rb ? -1 : 1 }
        guard let a, let b else { return 0 }
        switch (a, b) {
        case (.int(let x), .int(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.string(let x), .string(let y)): return compareStrings(x, y)
        case (.array(let x), .array(let y)):
            for (ex, ey) in zip(x, y) {
                let c = compare(ex, ey)
                if c != 0 { return c }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        case (.object(let x), .object(let y)):
            if x.count != y.count { return x.count < y.count ? -1 : 1 }
            let kx = x.keys.sorted(by: { compareStrings($0, $1) < 0 })
            let ky = y.keys.sorted(by: { compareStrings($0, $1) < 0 })
            for (a, b) in zip(kx, ky) {
                let c = compareStrings(a, b)
                if c != 0 { return c }
            }
            for k in kx {
                let c = compare(x[k], y[k])
                if c != 0 { return c }
            }
            return 0
        default:
            if let x = a.doubleValue, let y = b.doubleValue {
                return x == y ? 0 : (x < y ? -1 : 1)
            }
            return 0
        }
    }

    /// Code-point order (the order of UTF-8 bytes).
    @inlinable
    package static func compareStrings(_ a: String, _ b: String) -> Int {
        if a == b { return 0 }
        var ia = a.utf8.makeIterator(), ib = b.utf8.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let x?, let y?): if x != y { return x < y ? -1 : 1 }
            }
        }
    }

    /// SQL++ equality of two present values (numbers numerically, objects regardless of key order).
    package static func equal(_ a: JSON, _ b: JSON) -> Bool {
        switch (a, b) {
        case (.int(let x), .int(let y)): return x == y
        case (.string(let x), .string(let y)): return x == y
        case (.int, .double), (.double, .int), (.double, .double): return a.doubleValue == b.doubleValue
        case (.array(let x), .array(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { equal($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && x.allSatisfy { pair in y[pair.key].map { equal(pair.value, $0) } ?? false }
        default: return a == b
        }
    }

    /// Truthiness in WHERE/HAVING/ON and logical operators: MISSING and null are not true; false, 0, "" and
    /// empty arrays/objects are false; everything else is true.
    @inlinable
    package static func isTruthy(_ value: JSON?) -> Bool {
        guard let value else { return false }
        switch value {
        case .null: return false
        case .bool(let b): return b
        case .int(let i): return i != 0
        case .double(let d): return d != 0 && !d.isNaN
        case .string(let s): return !s.isEmpty
        case .array(let a): return !a.isEmpty
        case .object(let o): return !o.isEmpty
        }
    }

    /// A number result: an integral value that fits in `Int64` stays an int.
    @inlinable
    package static func number(_ d: Double) -> JSON {
        if d.isFinite, d.rounded() == d, let i = Int64(exactly: d) { return .int(i) }
        return .double(d)
    }
}
