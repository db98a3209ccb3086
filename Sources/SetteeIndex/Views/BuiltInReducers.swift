import Foundation
import SetteeCore

/// CouchDB's built-in reduce functions, in Swift.
enum BuiltInReducers {
    static func reduce(_ kind: BuiltInReduce, keys: [JSON] = [], values: [JSON], rereduce: Bool) throws -> JSON {
        switch kind {
        case .count:
            if !rereduce { return .int(Int64(values.count)) }
            return try sum(values)
        case .sum:
            return try sum(values)
        case .stats:
            return try stats(values)
        case .approxCountDistinct:
            var sketch = HyperLogLog()
            if rereduce {
                for v in values { sketch.merge(HyperLogLog(v)) }
            } else {
                for key in keys { sketch.add(key.canonicalBytes) }
            }
            return sketch.json
        case .top(let n), .bottom(let n):
            var all: [JSON] = []
            if rereduce { for v in values { all += v.arrayValue ?? [v] } } else { all = values }
            let collator = try ViewCollator()
            let descending: Bool = { if case .top = kind { return true }; return false }()
            // Distinct values (as CouchDB's: a value emitted twice counts once), in collation order.
            var seen = Set<[UInt8]>()
            let sorted = all.map { ($0, collator.encode($0)) }.filter { seen.insert($0.1).inserted }
                .sorted { a, b in descending ? b.1.lexicographicallyPrecedes(a.1) : a.1.lexicographicallyPrecedes(b.1) }
            return .array(sorted.prefix(n).map(\.0))
        case .first:
            return values.first ?? .null
        case .last:
            return values.last ?? .null
        }
    }

    /// The distinct-count estimate of an `_approx_count_distinct` sketch.
    static func estimate(_ value: JSON) -> JSON {
        if case .int = value { return value }
        return .int(Int64(HyperLogLog(value).estimate.rounded()))
    }

    /// `_sum`: numbers add; arrays of numbers add element-wise (the shorter padded with zeros); objects add member-wise.
    static func sum(_ values: [JSON]) throws -> JSON {
        var total: JSON = .int(0)
        for value in values { total = try add(total, value) }
        return total
    }

    private static func add(_ a: JSON, _ b: JSON) throws -> JSON {
        switch (a, b) {
        case (.int(let x), .int(let y)):
            let (r, overflow) = x.addingReportingOverflow(y)
            return overflow ? .double(Double(x) + Double(y)) : .int(r)
        case (.int, .double), (.double, .int), (.double, .double):
            return .double(a.doubleValue! + b.doubleValue!)
        case (.int(0), .array), (.int(0), .object):
            return try add(b, .int(0))
        case (.array(let x), .int(0)):
            return .array(x)
        case (.object(let x), .int(0)):
            return .object(x)
        case (.array(let x), .array(let y)):
            var out: [JSON] = []
            for i in 0..<max(x.count, y.count) {
                out.append(try add(i < x.count ? x[i] : .int(0), i < y.count ? y[i] : .int(0)))
            }
            return .array(out)
        case (.object(var x), .object(let y)):
            for (k, v) in y { x[k] = try add(x[k] ?? .int(0), v) }
            return .object(x)
        default:
            throw SetteeError(.badRequest, "builtin_reduce_error: _sum values must be numbers, arrays of numbers or objects of numbers, got \(b.jsonString)")
        }
    }

    /// `_stats`: numbers, or earlier `{"sum","count","min","max","sumsqr"}` results, combined.
    static func stats(_ values: [JSON]) throws -> JSON {
        var sum = 0.0, count = 0.0, sumsqr = 0.0
        var minimum = Double.infinity, maximum = -Double.infinity
        for value in values {
            switch value {
            case .int, .double:
                let x = value.doubleValue!
                sum += x; count += 1; sumsqr += x * x
                minimum = min(minimum, x); maximum = max(maximum, x)
            case .object(let o):
                guard let s = o["sum"]?.doubleValue, let c = o["count"]?.doubleValue, let mn = o["min"]?.doubleValue,
                      let mx = o["max"]?.doubleValue, let sq = o["sumsqr"]?.doubleValue else {
                    throw SetteeError(.badRequest, "builtin_reduce_error: _stats values must be numbers, got \(value.jsonString)")
                }
                sum += s; count += c; sumsqr += sq
                minimum = min(minimum, mn); maximum = max(maximum, mx)
            default:
                throw SetteeError(.badRequest, "builtin_reduce_error: _stats values must be numbers, got \(value.jsonString)")
            }
        }
        func number(_ d: Double) -> JSON {
            if d.isFinite, d == d.rounded(), abs(d) < 9.0e15 { return .int(Int64(d)) }
            return .double(d)
        }
        if count == 0 { return ["sum": 0, "count": 0, "min": 0, "max": 0, "sumsqr": 0] }
        return ["sum": number(sum), "count": number(count), "min": number(minimum), "max": number(maximum),
                "sumsqr": number(sumsqr)]
    }
}

/// A HyperLogLog sketch with 2¹¹ registers (CouchDB's `_approx_count_distinct` precision: about 2.3 % error),
/// kept in partial reductions as `{"hll": base64 registers}` and merged register by register.
struct HyperLogLog {
    static let precision = 11
    static let count = 1 << precision
    var registers: [UInt8]

    init() { registers = [UInt8](repeating: 0, count: Self.count) }

    /// A sketch from its JSON form (an empty one for anything else).
    init(_ json: JSON) {
        self.init()
        if case .string(let b64)? = json["hll"], let data = Base64.decode(b64), data.count == Self.count {
            registers = data
        }
    }

    var json: JSON { ["hll": .string(Base64.encode(registers))] }

    mutating func add(_ bytes: [UInt8]) {
        let h = Self.hash(bytes)
        let index = Int(h >> UInt64(64 - Self.precision))
        let rest = (h << UInt64(Self.precision)) | (1 << UInt64(Self.precision - 1))
        let rank = UInt8(rest.leadingZeroBitCount + 1)
        if rank > registers[index] { registers[index] = rank }
    }

    mutating func merge(_ other: HyperLogLog) {
        for i in 0..<Self.count where other.registers[i] > registers[i] { registers[i] = other.registers[i] }
    }

    var estimate: Double {
        let m = Double(Self.count)
        var sum = 0.0
        var zeros = 0
        for r in registers {
            sum += 1.0 / Double(UInt64(1) << UInt64(r))
            if r == 0 { zeros += 1 }
        }
        let alpha = 0.7213 / (1 + 1.079 / m)
        let raw = alpha * m * m / sum
        // Linear counting while many registers are empty (small cardinalities: nearly exact).
        if raw <= 2.5 * m, zeros > 0 { return m * log(m / Double(zeros)) }
        return raw
    }

    /// FNV-1a over the bytes, then a SplitMix64 finalizer so every bit depends on every byte (stable across
    /// processes: sketches are stored).
    static func hash(_ bytes: [UInt8]) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        h ^= h >> 30; h = h &* 0xbf58_476d_1ce4_e5b9
        h ^= h >> 27; h = h &* 0x94d0_49bb_1331_11eb
        h ^= h >> 31
        return h
    }
}
