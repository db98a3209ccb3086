import SetteeCore
import SetteeSQLPP
package import SetteeStore

/// Snippets and match ranges of one FTS5 row, shared by full-text indexes (`FTS_SNIPPET`, `FTS_MATCHES`) and
/// full-text views.
package enum FullTextDetails {
    /// A match: which query term (numbered from 0, terms under NOT left out), in which column, at which UTF-8 byte
    /// offset and length of the indexed text.
    public struct Match: Sendable, Hashable {
        public let term: Int
        public let column: Int
        public let offset: Int
        public let length: Int
    }

    /// FTS5's `snippet()` of a matched row, with `start`/`end` around each matched term; nil when the row doesn't match.
    package static func snippet(_ db: Connection, table: String, query: String, rowid: Int64, start: String, end: String,
                                tokens: Int) throws -> String? {
        let stmt = try db.prepare("SELECT snippet(\(table), -1, ?, ?, '…', ?) FROM \(table) WHERE \(table) MATCH ? AND rowid = ?")
        defer { stmt.reset() }
        stmt.bind(start, at: 1)
        stmt.bind(end, at: 2)
        stmt.bind(tokens, at: 3)
        stmt.bind(try FullTextQuery.translate(query), at: 4)
        stmt.bind(rowid, at: 5)
        guard try stmt.step() else { return nil }
        return stmt.string(0)
    }

    /// The matches of each term of the query on its own, through FTS5's `highlight()` with private markers, whose
    /// positions give the UTF-8 offsets in the original text. Sorted by column, offset, term.
    package static func matches(_ db: Connection, table: String, columns: Int, query: String, rowid: Int64) throws -> [Match] {
        let open = "\u{1}", close = "\u{2}"
        var found: [Match] = []
        for (term, phrase) in try FullTextQuery.terms(query).enumerated() {
            for column in 0..<columns {
                let stmt = try db.prepare("SELECT highlight(\(table), ?, ?, ?) FROM \(table) WHERE \(table) MATCH ? AND rowid = ?")
                defer { stmt.reset() }
                stmt.bind(column, at: 1)
                stmt.bind(open, at: 2)
                stmt.bind(close, at: 3)
                stmt.bind(phrase, at: 4)
                stmt.bind(rowid, at: 5)
                guard try stmt.step(), let marked = stmt.string(0) else { continue }
                var offset = 0, start = -1
                for byte in marked.utf8 {
                    if byte == 1 { start = offset; continue }
                    if byte == 2 {
                        if start >= 0 { found.append(Match(term: term, column: column, offset: start, length: offset - start)) }
                        start = -1
                        continue
                    }
                    offset += 1
                }
            }
        }
        found.sort { ($0.column, $0.offset, $0.term) < ($1.column, $1.offset, $1.term) }
        return found
    }
}
