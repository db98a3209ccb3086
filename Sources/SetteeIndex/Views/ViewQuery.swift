public import SetteeCore
import SetteeStore

/// When a view query brings the index up to date (CouchDB's `update` / `stale`).
public enum ViewIndexUpdateMode: Sendable {
    /// Update the index before querying (the default; CouchDB `update=true`).
    case before
    /// Query the index as it is (CouchDB `update=false`, `stale=ok`).
    case never
    /// Query the index as it is, then update it in the background (CouchDB `update=lazy`, `stale=update_after`).
    case after
}

/// A query over a ``View`` (Couchbase Lite 1.x's `CBLQuery`): a key range or a set of keys, map rows or reduced rows.
///
/// ```swift
/// var query = view.createQuery()
/// query.startKey = ["Smith"]
/// query.endKey = ["Smith", [:]]   // every key that starts with "Smith"
/// query.limit = 100
/// for row in try query.run() { print(row.key, row.value ?? .null, row.documentID ?? "") }
/// ```
///
/// Rows come sorted by CouchDB's collation of their keys, ties by document id. A view with a reduce function
/// returns reduced rows unless ``mapOnly`` is set; ``groupLevel`` / ``group`` group them by key.
public struct ViewQuery: Sendable {
    /// The view queried.
    public let view: View

    /// Only rows with this key (JSON `null` is a key; nil means "not set").
    public var key: JSON?
    /// Only rows with these keys, in this order (each key's rows by document id).
    public var keys: [JSON]?
    /// The first key (the last one with ``descending``).
    public var startKey: JSON?
    /// The last key (the first one with ``descending``).
    public var endKey: JSON?
    /// Among rows of ``startKey``, start at this document id.
    public var startKeyDocID: String?
    /// Among rows of ``endKey``, stop at this document id.
    public var endKeyDocID: String?
    /// Whether rows equal to ``endKey`` (and ``endKeyDocID``) are included. Default true.
    public var inclusiveEnd = true
    /// Reverse order: from ``startKey`` down to ``endKey``.
    public var descending = false
    /// At most this many rows.
    public var limit: Int?
    /// Rows to skip first.
    public var skip = 0
    /// Load each row's document (the one its value's `_id` redirects to, if any) into ``ViewQueryRow/document``.
    public var includeDocs = false
    /// With ``includeDocs``: each document's `_conflicts` (its live losing revisions), as CouchDB's `conflicts=true`.
    public var conflicts = false
    /// Ignore the reduce function: return map rows.
    public var mapOnly = false
    /// Group reduced rows by the first `groupLevel` elements of array keys (0: one row for the whole range).
    public var groupLevel = 0
    /// Group reduced rows by their exact key (CouchDB's `group=true`; wins over ``groupLevel``).
    public var group = false
    /// When the index is brought up to date.
    public var indexUpdateMode: ViewIndexUpdateMode = .before
    /// A full-text query (SQLite FTS5 syntax: words, `"phrases"`, `prefix*`, AND/OR/NOT/NEAR, parentheses) over a
    /// full-text view. Key ranges, keys and reduce don't apply to full-text queries.
    public var fullTextQuery: String?
    /// The partition to read, for a partitioned view (CouchDB's `/{db}/_partition/{p}/_design/…/_view/…`): keys,
    /// ranges and reductions are those of the partition's rows (`total_rows` and `offset` the whole view's, as
    /// CouchDB's are its shard's).
    public var partition: String?
    /// Compute a snippet for each full-text row (``ViewQueryRow/snippet(wordStart:wordEnd:)``).
    public var fullTextSnippets = false
    /// Order full-text rows by relevance (bm25), best first. Default true; false is a little faster.
    public var fullTextRanking = true
    /// Only rows emitted by documents this accepts (by id: a reader's channels on a database with a sync
    /// function); ``skip`` and ``limit`` count the rows it accepts, and an included document it refuses is null.
    /// Reduced and full-text queries are refused with it (a reduction mixes documents): `.forbidden`.
    package var documentFilter: (@Sendable (String) -> Bool)?

    init(view: View) { self.view = view }

    /// Runs the query.
    /// - Throws: ``SetteeError`` `.queryParseError` for invalid options (a reversed key range, grouping without a
    ///   reduce function, reduce or key ranges on a full-text query), `.notFound` when no map function is registered.
    public func run() throws -> ViewQueryResult {
        try ViewManager.shared(for: view.collection.database).query(self)
    }
}

/// The rows of a view query, with CouchDB's `total_rows` and `offset`.
public struct ViewQueryResult: Sendable, RandomAccessCollection {
    public let rows: [ViewQueryRow]
    /// Rows in the whole index.
    public let totalRows: Int
    /// Rows before the first one returned (in the query's direction), skipped ones included.
    public let offset: Int
    /// The database sequence the index had absorbed when it was read.
    public let sequenceNumber: UInt64

    public var startIndex: Int { rows.startIndex }
    public var endIndex: Int { rows.endIndex }
    public subscript(position: Int) -> ViewQueryRow { rows[position] }
}

/// One row of a view query: an emitted pair, a reduced group, or a full-text match.
public struct ViewQueryRow: Sendable {
    /// The emitted key; a reduced row's group key (null when not grouped); a full-text row's key is its text.
    public let key: JSON
    /// The emitted value (nil when none was emitted), or a reduced row's reduction.
    public let value: JSON?
    /// The document that emitted the row (nil for reduced rows).
    public let sourceDocumentID: String?
    /// The document the row refers to: the value's `_id` when the value is an object with one, else the source.
    public let documentID: String?
    /// The document (``documentID``'s current revision, with `_id` and `_rev`) when ``ViewQuery/includeDocs`` was
    /// set; null when it does not exist or is deleted.
    public let document: JSON?
    /// A full-text row's indexed text.
    public let fullText: String?
    /// A full-text row's matches: the query term matched and the UTF-8 byte range in ``fullText``.
    package let matches: [FullTextDetails.Match]
    /// A full-text row's relevance (bm25; lower is better), when ranking.
    public let rank: Double?
    let markedSnippet: String?

    /// Whether this is a reduced row.
    public var isReduced: Bool { sourceDocumentID == nil && fullText == nil }

    /// The number of matches in a full-text row.
    public var matchCount: Int { matches.count }

    /// The UTF-8 byte range in ``fullText`` of match `i`.
    public func textRange(ofMatch i: Int) -> Range<Int> {
        matches[i].offset..<(matches[i].offset + matches[i].length)
    }

    /// Which query term match `i` matched (terms numbered from 0, left to right; terms under NOT don't count).
    public func termIndex(ofMatch i: Int) -> Int { matches[i].term }

    /// A short excerpt of ``fullText`` around the matches, with `wordStart`/`wordEnd` around each matched term (nil
    /// unless ``ViewQuery/fullTextSnippets`` was set).
    public func snippet(wordStart: String, wordEnd: String) -> String? {
        markedSnippet.map {
            $0.replacingAll("\u{1}", with: wordStart).replacingAll("\u{2}", with: wordEnd)
        }
    }
}

extension String {
    fileprivate func replacingAll(_ target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
