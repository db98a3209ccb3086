import SetteeCore
import SetteeSQLPP

/// The rows a query returned (Couchbase Lite's `ResultSet`). Iterate it, or take ``allResults()``.
public final class ResultSet: Sequence, @unchecked Sendable {
    /// The column names, in SELECT order.
    public let columnNames: [String]
    let rows: [QueryResult]

    init(columns: [String], rows: [QueryResult]) {
        self.columnNames = columns
        self.rows = rows
    }

    /// Every row.
    public func allResults() -> [QueryResult] { rows }

    public func makeIterator() -> IndexingIterator<[QueryResult]> { rows.makeIterator() }
}

/// One result row (Couchbase Lite's `Result`, named so it does not shadow `Swift.Result`): values by column name (alias, property name, `$1`…) or by position.
///
/// A MISSING value has no key: ``toDictionary()`` and ``toJSON()`` leave it out, getters return nil / zero.
public struct QueryResult: Sendable {
    /// Column names, in SELECT order.
    public let keys: [String]
    let values: [JSON?]

    init(keys: [String], values: [JSON?]) {
        self.keys = keys
        self.values = values
    }

    /// Number of columns.
    public var count: Int { keys.count }

    /// The value of the column `key` (nil for MISSING or an unknown key).
    public func value(forKey key: String) -> JSON? {
        guard let i = keys.firstIndex(of: key) else { return nil }
        return values[i]
    }

    /// The value at `index` (nil for MISSING or out of range).
    public func value(at index: Int) -> JSON? {
        values.indices.contains(index) ? values[index] : nil
    }

    public func contains(key: String) -> Bool { value(forKey: key) != nil }

    public func string(forKey key: String) -> String? { value(forKey: key)?.stringValue }
    public func int(forKey key: String) -> Int { Int(value(forKey: key)?.intValue ?? 0) }
    public func int64(forKey key: String) -> Int64 { value(forKey: key)?.intValue ?? 0 }
    public func double(forKey key: String) -> Double { value(forKey: key)?.doubleValue ?? 0 }
    public func float(forKey key: String) -> Float { Float(double(forKey: key)) }
    public func number(forKey key: String) -> Double? { value(forKey: key)?.doubleValue }
    public func boolean(forKey key: String) -> Bool { Collation.isTruthy(value(forKey: key)) }
    public func array(forKey key: String) -> [JSON]? { value(forKey: key)?.arrayValue }
    public func dictionary(forKey key: String) -> JSONObject? { value(forKey: key)?.objectValue }

    public func string(at index: Int) -> String? { value(at: index)?.stringValue }
    public func int(at index: Int) -> Int { Int(value(at: index)?.intValue ?? 0) }
    public func int64(at index: Int) -> Int64 { value(at: index)?.intValue ?? 0 }
    public func double(at index: Int) -> Double { value(at: index)?.doubleValue ?? 0 }
    public func boolean(at index: Int) -> Bool { Collation.isTruthy(value(at: index)) }
    public func array(at index: Int) -> [JSON]? { value(at: index)?.arrayValue }
    public func dictionary(at index: Int) -> JSONObject? { value(at: index)?.objectValue }

    public subscript(key: String) -> JSON? { value(forKey: key) }
    public subscript(index: Int) -> JSON? { value(at: index) }

    /// The row as an object, keys in SELECT order; MISSING values are left out.
    public func toDictionary() -> JSONObject {
        var pairs: [(String, JSON)] = []
        for (k, v) in zip(keys, values) { if let v { pairs.append((k, v)) } }
        return JSONObject(pairs)
    }

    /// The row as JSON text (`SELECT *` gives `{"collection": {…}}`).
    public func toJSON() -> String { JSON.object(toDictionary()).jsonString }
}

extension JSONObject {
    /// The member `key` as a string (Couchbase Lite's `DictionaryObject.string(forKey:)`).
    public func string(forKey key: String) -> String? { self[key]?.stringValue }
    public func int(forKey key: String) -> Int { Int(self[key]?.intValue ?? 0) }
    public func int64(forKey key: String) -> Int64 { self[key]?.intValue ?? 0 }
    public func double(forKey key: String) -> Double { self[key]?.doubleValue ?? 0 }
    public func boolean(forKey key: String) -> Bool { Collation.isTruthy(self[key]) }
    public func array(forKey key: String) -> [JSON]? { self[key]?.arrayValue }
    public func dictionary(forKey key: String) -> JSONObject? { self[key]?.objectValue }
    public func value(forKey key: String) -> JSON? { self[key] }
}

extension Array where Element == JSON {
    /// The elements (Couchbase Lite's `ArrayObject.toArray()`).
    public func toArray() -> [JSON] { self }
}
