public import Foundation
public import SetteeCore
import SetteeSQLPP
public import SetteeStore
import Synchronization

/// The rows a query returned (Couchbase Lite's `ResultSet`): iterate it, call ``next()``, or take
/// ``allResults()``. Like Couchbase Lite's, it is read once: each row is handed out one time.
public final class ResultSet: Sequence, IteratorProtocol, Sendable {
    /// The column names, in SELECT order.
    public let columnNames: [String]
    let rows: [QueryResult]
    /// The read position: each row is handed out once, whichever thread reads.
    private let position = Atomic<Int>(0)

    init(columns: [String], rows: [QueryResult]) {
        self.columnNames = columns
        self.rows = rows
    }

    /// The next row, or nil after the last.
    public func next() -> QueryResult? {
        let i = position.add(1, ordering: .relaxed).oldValue
        return i < rows.count ? rows[i] : nil
    }

    /// The rows not yet read (every row of a fresh result set).
    public func allResults() -> [QueryResult] {
        let from = position.exchange(Int.max / 2, ordering: .relaxed)
        return from < rows.count ? Array(rows[from...]) : []
    }
}

/// One result row (Couchbase Lite's `Result`; `import Settee` names it `Result` too): values by column name
/// (alias, property name, `$1`…) or by position.
///
/// A MISSING value has no key: ``toDictionary()`` and ``toJSON()`` leave it out, getters return nil or 0.
public struct QueryResult: DictionaryProtocol, ArrayProtocol, Sequence, Sendable {
    /// Column names, in SELECT order.
    public let keys: [String]
    let values: [JSON?]
    /// The database a blob in the row reads its content from.
    var database: Database?

    init(keys: [String], values: [JSON?], database: Database? = nil) {
        self.keys = keys
        self.values = values
        self.database = database
    }

    /// Number of columns.
    public var count: Int { keys.count }

    /// The column `key` as stored JSON (Settee's): nil for MISSING or an unknown key.
    public func json(forKey key: String) -> JSON? {
        guard let i = keys.firstIndex(of: key) else { return nil }
        return values[i]
    }

    /// The column at `index` as stored JSON (Settee's): nil for MISSING or out of range.
    public func json(at index: Int) -> JSON? { values.indices.contains(index) ? values[index] : nil }

    /// Whether the row has the column `key` with a value (MISSING has none).
    public func contains(key: String) -> Bool { json(forKey: key) != nil }

    /// The column as Couchbase Lite returns it (`String`, `Int`, `Double`, `Bool`, ``Blob``, ``ArrayObject``,
    /// ``DictionaryObject``); nil for null, MISSING or an unknown key.
    public func value(forKey key: String) -> Any? { json(forKey: key).flatMap(read) }
    public func string(forKey key: String) -> String? { json(forKey: key)?.stringValue }
    public func number(forKey key: String) -> NSNumber? { DocumentValue.number(json(forKey: key)) }
    public func int(forKey key: String) -> Int { Int(truncatingIfNeeded: int64(forKey: key)) }
    public func int64(forKey key: String) -> Int64 { self[key].int64 }
    public func float(forKey key: String) -> Float { self[key].float }
    public func double(forKey key: String) -> Double { self[key].double }
    public func boolean(forKey key: String) -> Bool { self[key].boolean }
    public func date(forKey key: String) -> Date? { self[key].date }
    public func blob(forKey key: String) -> Blob? { value(forKey: key) as? Blob }
    public func array(forKey key: String) -> ArrayObject? { value(forKey: key) as? ArrayObject }
    public func dictionary(forKey key: String) -> DictionaryObject? { value(forKey: key) as? DictionaryObject }

    public func value(at index: Int) -> Any? { json(at: index).flatMap(read) }
    public func string(at index: Int) -> String? { json(at: index)?.stringValue }
    public func number(at index: Int) -> NSNumber? { DocumentValue.number(json(at: index)) }
    public func int(at index: Int) -> Int { Int(truncatingIfNeeded: int64(at: index)) }
    public func int64(at index: Int) -> Int64 { self[index].int64 }
    public func float(at index: Int) -> Float { self[index].float }
    public func double(at index: Int) -> Double { self[index].double }
    public func boolean(at index: Int) -> Bool { self[index].boolean }
    public func date(at index: Int) -> Date? { self[index].date }
    public func blob(at index: Int) -> Blob? { value(at: index) as? Blob }
    public func array(at index: Int) -> ArrayObject? { value(at: index) as? ArrayObject }
    public func dictionary(at index: Int) -> DictionaryObject? { value(at: index) as? DictionaryObject }

    public subscript(key: String) -> Fragment { Fragment(json(forKey: key), database: database) }
    public subscript(index: Int) -> Fragment { Fragment(json(at: index), database: database) }

    /// The row as Swift values keyed by column name (MISSING values left out).
    public func toDictionary() -> [String: Any] {
        var out: [String: Any] = [:]
        for (k, v) in zip(keys, values) { if let v { out[k] = DocumentValue.plain(v, database: database) } }
        return out
    }

    /// The row's values in column order (MISSING as `NSNull`).
    public func toArray() -> [Any] { values.map { $0.map { DocumentValue.plain($0, database: database) } ?? NSNull() } }

    /// The row as JSON (Settee's), keys in SELECT order; MISSING values are left out.
    public var jsonObject: JSONObject {
        var pairs: [(String, JSON)] = []
        for (k, v) in zip(keys, values) { if let v { pairs.append((k, v)) } }
        return JSONObject(pairs)
    }

    /// The row as JSON text (`SELECT *` gives `{"collection": {…}}`).
    public func toJSON() -> String { JSON.object(jsonObject).jsonString }

    /// The column names.
    public func makeIterator() -> IndexingIterator<[String]> { keys.makeIterator() }

    private func read(_ json: JSON) -> Any? { DocumentValue.read(json, database: database) }
}

extension QueryResult {
    /// The row decoded as `T` (Couchbase Lite's `Result.data(as:dataKey:)`): the whole row, or the column
    /// `dataKey` (`SELECT *` rows hold the document under the collection's name). A model's `@DocumentID` reads
    /// the `id` column when the query selected `META().id AS id`.
    /// - Throws: ``SetteeError`` `.badRequest` when the row does not decode as `T`.
    public func data<T: Decodable>(as type: T.Type, dataKey: String? = nil) throws -> T {
        var json = JSON.object(jsonObject)
        if let dataKey {
            guard let member = self.json(forKey: dataKey) else {
                throw SetteeError(.badRequest, "The result has no column \(dataKey)")
            }
            json = member
        }
        return try DocumentCoding.$decodingDatabase.withValue(database) {
            try DocumentCoding.decode(T.self, from: json, id: nil, revision: nil)
        }
    }
}

extension ResultSet {
    /// The rows not yet read, each decoded as `T` (Couchbase Lite's `ResultSet.data(as:dataKey:)`).
    public func data<T: Decodable>(as type: T.Type, dataKey: String? = nil) throws -> [T] {
        try allResults().map { try $0.data(as: T.self, dataKey: dataKey) }
    }
}
