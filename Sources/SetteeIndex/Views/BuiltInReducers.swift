import SetteeCore

/// CouchDB's built-in reduce functions, in Swift.
enum BuiltInReducers {
    static func reduce(_ kind: BuiltInReduce, values: [JSON], rereduce: Bool) throws -> JSON {
        switch kind {
        case .count:
            if !rereduce { return .int(Int64(values.count)) }
            return try sum(values)
        case .sum:
            return try sum(values)
        case .stats:
            return try stats(values)
        }
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
