import Foundation
import SetteeCore

/// A document you can edit and save (Couchbase Lite's `MutableDocument`).
///
/// ```swift
/// let doc = MutableDocument(id: "hotel::1")
/// doc.setString("Grand Hotel", forKey: "name")
/// doc.setInt(4, forKey: "stars")
/// doc.setValue(["pool", "spa"], forKey: "amenities")
/// try collection.save(document: doc)
/// ```
/// Keys starting with `_` are reserved for the store (`_id`, `_rev`, `_attachments`, …): setting one other
/// than `_attachments` makes the save fail with `.badRequest`.
public final class MutableDocument: Document, @unchecked Sendable {
    /// A new document; `id` nil generates a random id.
    public init(id: String? = nil) {
        super.init(id: id ?? Hex.random(bytes: 16), revisionID: nil, sequence: 0, deleted: false,
                   properties: JSONObject(), collection: nil)
    }

    /// A new document with initial properties.
    public init(id: String? = nil, data: JSONObject) {
        super.init(id: id ?? Hex.random(bytes: 16), revisionID: nil, sequence: 0, deleted: false,
                   properties: data, collection: nil)
    }

    /// A new document from JSON object text.
    /// - Throws: `.invalidJSON` for malformed text, `.badRequest` when it is not an object.
    public convenience init(id: String? = nil, json: String) throws {
        let parsed: JSON
        do {
            parsed = try JSON.parse(json)
        } catch {
            throw SetteeError(.invalidJSON, "\(error)", underlying: error)
        }
        guard case .object(let object) = parsed else {
            throw SetteeError(.badRequest, "Document body must be a JSON object")
        }
        self.init(id: id, data: object)
    }

    init(copying doc: Document) {
        super.init(id: doc.id, revisionID: doc.revisionID, sequence: doc.sequence, deleted: doc.isDeleted,
                   properties: doc.properties, collection: doc.collection)
    }

    /// Sets (or with nil removes) a property.
    public func setValue(_ value: JSON?, forKey key: String) { properties[key] = value }
    public func setString(_ value: String?, forKey key: String) { properties[key] = value.map(JSON.string) }
    public func setInt(_ value: Int, forKey key: String) { properties[key] = .int(Int64(value)) }
    public func setInt64(_ value: Int64, forKey key: String) { properties[key] = .int(value) }
    public func setDouble(_ value: Double, forKey key: String) { properties[key] = .double(value) }
    public func setFloat(_ value: Float, forKey key: String) { properties[key] = .double(Double(value)) }
    public func setBoolean(_ value: Bool, forKey key: String) { properties[key] = .bool(value) }
    public func setArray(_ value: [JSON]?, forKey key: String) { properties[key] = value.map(JSON.array) }
    public func setDictionary(_ value: JSONObject?, forKey key: String) { properties[key] = value.map(JSON.object) }
    /// Stores a date as an ISO-8601 string, as Couchbase Lite does.
    public func setDate(_ value: Date?, forKey key: String) { properties[key] = value.map { .string(ISO8601.format($0)) } }
    /// Removes a property.
    public func removeValue(forKey key: String) { properties.removeValue(forKey: key) }
    /// Replaces every property.
    public func setData(_ data: JSONObject) { properties = data }
    /// Replaces every property from JSON object text.
    public func setJSON(_ json: String) throws {
        let parsed: JSON
        do { parsed = try JSON.parse(json) } catch { throw SetteeError(.invalidJSON, "\(error)", underlying: error) }
        guard case .object(let object) = parsed else {
            throw SetteeError(.badRequest, "Document body must be a JSON object")
        }
        properties = object
    }

    public override subscript(key: String) -> JSON? {
        get { properties[key] }
        set { properties[key] = newValue }
    }
}
