import Foundation
import SetteeCore

/// A read-only snapshot of a document's winning revision (Couchbase Lite's `Document`).
///
/// ```swift
/// if let doc = try collection.document(id: "p1") {
///     let name = doc.string(forKey: "name")      // typed getters return nil when absent or of another type
///     let price = doc.double(forKey: "price")
/// }
/// ```
/// Use ``toMutable()`` to edit it and `Collection.save(document:)` to store the edit.
public class Document: @unchecked Sendable, CustomStringConvertible {
    /// The document id.
    public let id: String
    /// The revision this snapshot holds (nil for a new, unsaved document).
    public internal(set) var revisionID: String?
    /// The sequence of the document's latest change when read (0 for a new document).
    public internal(set) var sequence: UInt64
    /// Whether this revision is a tombstone.
    public internal(set) var isDeleted: Bool
    var properties: JSONObject
    /// The collection the document was read from or saved to.
    public internal(set) var collection: Collection?

    init(id: String, revisionID: String?, sequence: UInt64, deleted: Bool, properties: JSONObject,
         collection: Collection?) {
        self.id = id
        self.revisionID = revisionID
        self.sequence = sequence
        self.isDeleted = deleted
        self.properties = properties
        self.collection = collection
    }

    /// Number of top-level properties.
    public var count: Int { properties.count }
    /// Property names in document order.
    public var keys: [String] { properties.keys }
    /// Whether a property exists (a `null` value exists).
    public func contains(key: String) -> Bool { properties.contains(key: key) }

    /// The property as JSON, or nil when absent.
    public func value(forKey key: String) -> JSON? { properties[key] }
    /// The property when it is a string.
    public func string(forKey key: String) -> String? { properties[key]?.stringValue }
    /// The property as an integer (numbers only; 0 when absent, like Couchbase Lite).
    public func int(forKey key: String) -> Int { Int(properties[key]?.intValue ?? 0) }
    /// The property as a 64-bit integer (0 when absent).
    public func int64(forKey key: String) -> Int64 { properties[key]?.intValue ?? 0 }
    /// The property as a double (0 when absent).
    public func double(forKey key: String) -> Double { properties[key]?.doubleValue ?? 0 }
    /// The property as a float (0 when absent).
    public func float(forKey key: String) -> Float { Float(double(forKey: key)) }
    /// The property as a boolean: `false` when absent, null, `false` or 0.
    public func boolean(forKey key: String) -> Bool {
        switch properties[key] {
        case .bool(let b)?: return b
        case .int(let i)?: return i != 0
        case .double(let d)?: return d != 0
        case .none, .null?: return false
        default: return true
        }
    }
    /// The property as a number, if it is one.
    public func number(forKey key: String) -> Double? { properties[key]?.doubleValue }
    /// The property when it is an array.
    public func array(forKey key: String) -> [JSON]? { properties[key]?.arrayValue }
    /// The property when it is an object.
    public func dictionary(forKey key: String) -> JSONObject? { properties[key]?.objectValue }
    /// The property parsed as an ISO-8601 date when it is such a string.
    public func date(forKey key: String) -> Date? {
        guard let s = string(forKey: key) else { return nil }
        return ISO8601.parse(s)
    }

    /// All properties.
    public func toDictionary() -> JSONObject { properties }
    /// The properties as JSON text.
    public func toJSON() -> String { JSON.object(properties).jsonString }
    /// A mutable copy to edit and save.
    public func toMutable() -> MutableDocument {
        MutableDocument(copying: self)
    }

    public subscript(key: String) -> JSON? { properties[key] }

    public var description: String { "Document(\(id), \(revisionID ?? "new"))" }
}

/// Minimal ISO-8601 handling for date properties.
enum ISO8601 {
    static func parse(_ s: String) -> Date? {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: s) { return d }
        f.formatOptions = [.withInternetDateTime]
        return f.date(from: s)
    }

    static func format(_ d: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: d)
    }
}
