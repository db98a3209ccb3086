package import SetteeCore

/// `MATCH(indexName, query)` and `RANK(indexName)`: the full-text functions.
///
/// The evaluator stays pure: the executor runs each MATCH against its FTS5 index once, before rows are evaluated,
/// and hands the evaluator the matched documents and their ranks. That is what lets MATCH appear anywhere in a
/// WHERE clause — inside OR and NOT too.
package enum FullTextSearch {
    /// One MATCH of a statement: the index and the query text.
    package struct Key: Hashable, Sendable {
        package let index: String
        package let query: String
        package init(index: String, query: String) {
            self.index = index
            self.query = query
        }
    }

    static let arity: [String: ClosedRange<Int>] = ["MATCH": 2...2, "RANK": 1...1, "FTS_SNIPPET": 1...4, "FTS_MATCHES": 1...1]

    /// What a row's full-text details are asked for.
    package enum Detail: Sendable {
        /// `FTS_SNIPPET(index[, start, end, tokens])`: a short excerpt with each matched term between the markers.
        case snippet(start: String, end: String, tokens: Int)
        /// `FTS_MATCHES(index)`: each match as `{"term", "column", "offset", "length"}` (UTF-8 bytes of the text).
        case matches
    }

    /// Looks up a row's full-text details (set by the executor, which can read the index).
    package typealias DetailProvider = @Sendable (_ key: Key, _ rowid: Int64, _ detail: Detail) throws -> JSON?

    /// The index a MATCH/RANK names: an identifier (`MATCH(descIndex, …)`) or a string (`MATCH('descIndex', …)`).
    package static func indexName(_ e: SQLExpression) throws(SetteeError) -> String {
        guard let name = e.nameArgument else {
            throw SetteeError(.queryParseError, "The first argument of MATCH/RANK must name a full-text index, got \(e)")
        }
        return name
    }

    /// The key of a MATCH call: its index and its (evaluated) query text.
    package static func key(_ args: [SQLExpression], evaluator: Evaluator, in row: Row) throws(SetteeError) -> Key {
        let index = try indexName(args[0])
        guard case .string(let query)? = try evaluator.evaluate(args[1], in: row) else {
            throw SetteeError(.queryParseError, "The query of MATCH(\(index), …) must be a string")
        }
        return Key(index: index, query: query)
    }

    /// Every MATCH call in an expression.
    package static func matchCalls(in e: SQLExpression?) -> [[SQLExpression]] {
        var out: [[SQLExpression]] = []
        e?.visit { node in
            if case .function("MATCH", let args, _) = node { out.append(args) }
        }
        return out
    }
}
