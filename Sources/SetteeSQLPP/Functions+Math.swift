import Foundation  // the C math library (sin, log10, pow, …)
import SetteeCore

/// The conditional and math functions.
extension FunctionLibrary {
    // MARK: - Conditional functions

    /// The first non-MISSING argument, or null.
    static func ifMissing(_ args: [JSON?]) -> JSON? {
        for arg in args { if let arg { return arg } }
        return .null
    }

    /// The first argument that is neither MISSING nor null, or null.
    static func ifMissingOrNull(_ args: [JSON?]) -> JSON? {
        for arg in args { if let arg, !arg.isNull { return arg } }
        return .null
    }

    /// The first argument that is not null — which may be MISSING (as N1QL and Couchbase Lite do) — or null.
    static func ifNull(_ args: [JSON?]) -> JSON? {
        for arg in args where arg?.isNull != true { return arg }
        return .null
    }

    static func missingIf(_ args: [JSON?]) -> JSON? {
        strict(args) { v in ValueCollation.equal(v[0], v[1]) ? JSON?.none : v[0] }
    }

    static func nullIf(_ args: [JSON?]) -> JSON? {
        strict(args) { v in ValueCollation.equal(v[0], v[1]) ? .null : v[0] }
    }

    // MARK: - Math functions

    static func unary(_ args: [JSON?], _ fn: (Double) -> Double) -> JSON? {
        strict(args) { v in
            guard let x = v[0].doubleValue else { return .null }
            return number(fn(x))
        }
    }

    /// Two arrays of numbers of the same length, or nil.
    static func vectors(_ a: JSON, _ b: JSON) -> ([Double], [Double])? {
        guard case .array(let x) = a, case .array(let y) = b, x.count == y.count else { return nil }
        var u: [Double] = [], v: [Double] = []
        u.reserveCapacity(x.count)
        v.reserveCapacity(y.count)
        for (p, q) in zip(x, y) {
            guard let p = p.doubleValue, let q = q.doubleValue else { return nil }
            u.append(p)
            v.append(q)
        }
        return (u, v)
    }

    /// `EUCLIDEAN_DISTANCE(a, b)` and `SQUARED_EUCLIDEAN_DISTANCE(a, b)` of two vectors (null for anything else).
    static func vectorDistance(_ args: [JSON?], _ finish: (Double) -> Double) -> JSON? {
        strict(args) { v in
            guard let (a, b) = vectors(v[0], v[1]) else { return .null }
            var sum = 0.0
            for (p, q) in zip(a, b) { sum += (p - q) * (p - q) }
            return number(finish(sum))
        }
    }

    /// `COSINE_DISTANCE(a, b)`: 1 − the cosine similarity (null for anything but two non-zero vectors).
    static func cosineDistance(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let (a, b) = vectors(v[0], v[1]) else { return .null }
            var dot = 0.0, na = 0.0, nb = 0.0
            for (p, q) in zip(a, b) {
                dot += p * q
                na += p * p
                nb += q * q
            }
            guard na > 0, nb > 0 else { return .null }
            return number(1 - dot / (na.squareRoot() * nb.squareRoot()))
        }
    }

    static func absolute(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            switch v[0] {
            case .int(let i): return i == .min ? number(-Double(i)) : .int(Swift.abs(i))
            case .double(let d): return number(Swift.abs(d))
            default: return .null
            }
        }
    }

    /// CEIL and FLOOR: ints are already integral.
    static func integralRounding(_ args: [JSON?], _ rule: FloatingPointRoundingRule) -> JSON? {
        strict(args) { v in
            switch v[0] {
            case .int: return v[0]
            case .double(let d): return number(d.rounded(rule))
            default: return .null
            }
        }
    }

    /// `ATAN2(a, b)` is the arctangent of b/a, as in N1QL and Couchbase Lite (`atan2(b, a)` in C).
    static func arcTangent2(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let a = v[0].doubleValue, let b = v[1].doubleValue else { return .null }
            return number(atan2(b, a))
        }
    }

    static func power(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            if case .int(let base) = v[0], case .int(let exponent) = v[1], exponent >= 0,
               let exact = integerPower(base, exponent) {
                return .int(exact)
            }
            guard let a = v[0].doubleValue, let b = v[1].doubleValue else { return .null }
            return number(pow(a, b))
        }
    }

    /// `base^exponent` in Int64, or nil on overflow.
    static func integerPower(_ base: Int64, _ exponent: Int64) -> Int64? {
        var result: Int64 = 1
        var b = base
        var e = exponent
        while e > 0 {
            if e & 1 == 1 {
                let (r, overflow) = result.multipliedReportingOverflow(by: b)
                if overflow { return nil }
                result = r
            }
            e >>= 1
            if e > 0 {
                let (sq, overflow) = b.multipliedReportingOverflow(by: b)
                if overflow { return nil }
                b = sq
            }
        }
        return result
    }

    /// ROUND (half away from zero), ROUND_EVEN (half to even) and TRUNC, with optional decimal digits
    /// (negative digits round to tens, hundreds, …).
    static func roundTo(_ args: [JSON?], _ rule: FloatingPointRoundingRule) -> JSON? {
        strict(args) { v in
            guard let x = v[0].doubleValue else { return .null }
            var digits = 0
            if v.count > 1 {
                guard let d = v[1].doubleValue, d.isFinite else { return .null }
                digits = Int(Swift.max(-400, Swift.min(400, d.rounded(.towardZero))))
            }
            if case .int(let i) = v[0] {
                if digits >= 0 { return .int(i) }
                if let exact = roundInteger(i, toPowerOfTen: -digits, rule) { return .int(exact) }
            }
            return number(roundDouble(x, digits: digits, rule))
        }
    }

    static func roundDouble(_ x: Double, digits: Int, _ rule: FloatingPointRoundingRule) -> Double {
        guard x.isFinite else { return x }
        if digits == 0 { return x.rounded(rule) }
        if digits > 0 {
            let scale = pow(10.0, Double(digits))
            let scaled = x * scale
            // Past 2^52 every double is integral at this scale: nothing to round.
            guard scale.isFinite, scaled.isFinite, Swift.abs(scaled) < 4_503_599_627_370_496 else { return x }
            return scaled.rounded(rule) / scale
        }
        let unit = pow(10.0, Double(-digits))
        guard unit.isFinite else { return 0 }
        return (x / unit).rounded(rule) * unit
    }

    /// Rounds an integer to a multiple of 10^power exactly, or nil when that does not fit in Int64.
    static func roundInteger(_ i: Int64, toPowerOfTen power: Int, _ rule: FloatingPointRoundingRule) -> Int64? {
        guard power >= 1, power <= 18 else { return nil }
        var unit: Int64 = 1
        for _ in 0..<power { unit *= 10 }
        var quotient = i / unit
        let remainder = i % unit
        let twice = Swift.abs(remainder) * 2
        let away: Int64 = i < 0 ? -1 : 1
        switch rule {
        case .towardZero: break
        case .toNearestOrEven:
            if twice > unit || (twice == unit && quotient % 2 != 0) { quotient += away }
        default:
            if twice >= unit { quotient += away }
        }
        let (result, overflow) = quotient.multipliedReportingOverflow(by: unit)
        return overflow ? nil : result
    }

    static func signum(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let x = v[0].doubleValue else { return .null }
            return .int(x > 0 ? 1 : (x < 0 ? -1 : 0))
        }
    }

    /// `DIV(a, b)`: a / b as a number; division by zero → null.
    static func div(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard let a = v[0].doubleValue, let b = v[1].doubleValue, b != 0 else { return .null }
            return number(a / b)
        }
    }

    /// `IDIV(a, b)`: both operands truncated to integers, then divided truncating; division by zero → null.
    static func idiv(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            if case .int(let a) = v[0], case .int(let b) = v[1] {
                guard b != 0 else { return .null }
                if a == .min && b == -1 { return number(-Double(a)) }
                return .int(a / b)
            }
            guard let a = v[0].doubleValue, let b = v[1].doubleValue else { return .null }
            let ta = a.rounded(.towardZero), tb = b.rounded(.towardZero)
            guard tb != 0 else { return .null }
            return number((ta / tb).rounded(.towardZero))
        }
    }
}
