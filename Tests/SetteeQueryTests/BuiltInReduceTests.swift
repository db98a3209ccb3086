import Testing
import SetteeCore
@testable import SetteeIndex

/// CouchDB 3.5's built-in reduces beyond _count/_sum/_stats, reduced and re-reduced as views do.
@Suite struct BuiltInReduceTests {
    @Test func namesRoundTrip() {
        for name in ["_count", "_sum", "_stats", "_approx_count_distinct", "_top_3", "_bottom_100", "_first", "_last"] {
            #expect(BuiltInReduce(rawValue: name)?.rawValue == name)
        }
        for bad in ["_top_0", "_top_101", "_bottom_", "_top_x", "_median", "_count "] {
            #expect(BuiltInReduce(rawValue: bad) == nil, "\(bad)")
        }
    }

    @Test func topBottomFirstLastReduceAndRereduce() throws {
        let values: [JSON] = (1...500).map { .int(Int64($0)) }
        let halves = [Array(values[..<250]), Array(values[250...])]
        for (kind, expected) in [(BuiltInReduce.top(3), JSON.array([500, 499, 498])), (.bottom(3), [1, 2, 3]),
                                 (.first, 1), (.last, 500)] {
            #expect(try BuiltInReducers.reduce(kind, values: values, rereduce: false) == expected)
            let partials = try halves.map { try BuiltInReducers.reduce(kind, values: $0, rereduce: false) }
            #expect(try BuiltInReducers.reduce(kind, values: partials, rereduce: true) == expected)
        }
    }

    @Test func approxCountDistinctIsWithinHyperLogLogError() throws {
        for n in [1, 10, 500, 20_000] {
            // Each key twice: only distinct keys count.
            let keys: [JSON] = (0..<(2 * n)).map { .int(Int64($0 % n)) }
            let reducer = Reducer.builtIn(.approxCountDistinct)
            let whole = reducer.finalize(try BuiltInReducers.reduce(.approxCountDistinct, keys: keys, values: [], rereduce: false))
            let parts = try [Array(keys[..<n]), Array(keys[n...])].map {
                try BuiltInReducers.reduce(.approxCountDistinct, keys: $0, values: [], rereduce: false)
            }
            let merged = reducer.finalize(try BuiltInReducers.reduce(.approxCountDistinct, values: parts, rereduce: true))
            for estimate in [whole, merged] {
                let e = Double(estimate.intValue ?? -1)
                #expect(abs(e - Double(n)) <= max(1, Double(n) * 0.05), "n=\(n) estimate=\(e)")
            }
        }
    }
}
