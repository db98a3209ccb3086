import Foundation
public import SetteeCore

/// A document you can edit and save (Couchbase Lite's `MutableDocument`).
///
/// ```swift
/// let doc = MutableDocument(id: "hotel::1")
///     .setString("Grand Hotel", forKey: "name")
///     .setInt(4, forKey: "stars")
///     .setValue(["pool", "spa"], forKey: "amenities")
/// doc["address"].dictionary = MutableDictionaryObject(data: ["city": "Paris"])
/// doc.dictionary(forKey: "address")?.setString("Lyon", forKey: "city")   // nested values are edited in place
/// try collection.save(document: doc)
/// ```
/// Property names starting with `_` are CouchDB's (`_id`, `_rev`, …): saving a document with one fails with
/// `.badRequest`. `_attachments` set here replaces the stored attachment stubs (see ``Document/attachments``).
///
/// Not `Sendable`, as in Couchbase Lite: it is edited by the thread (or task) that made it.
public final class MutableDocument: Document, MutableDictionaryProtocol {
    /// A new document with a random id.
    public convenience init() { self.init(id: nil) }

    /// A new document; `id` nil generates a random one.
    public init(id: String?) {
        super.init(id: id ?? Hex.random(bytes: 16), revisionID: nil, sequence: 0, deleted: false,
                   properties: JSONObject(), collection: nil, mutable: true)
    }

    /// A new document with a random id holding `data` (value types as ``setValue(_:forKey:)``).
    public convenience init(data: [String: Any]?) { self.init(id: nil, data: data) }

    /// A new document holding `data`.
    public convenience init(id: String?, data: [String: Any]?) {
        self.init(id: id)
        if let data { setData(data) }
    }

    /// A new document with Settee's JSON properties.
    public init(id: String? = nil, data: JSONObject) {
        super.init(id: id ?? Hex.random(bytes: 16), revisionID: nil, sequence: 0, deleted: false,
                   properties: data, collection: nil, mutable: true)
    }

    /// A new document from JSON object text.
    /// - Throws: ``SetteeError`` `.invalidJSON` for malformed text, `.badRequest` when it is not an object.
    public convenience init(id: String?, json: String) throws {
        self.init(id: id, data: try DocumentJSON.object(json))
    }

    /// A new document with a random id from JSON object text.
    public convenience init(json: String) throws { try self.init(id: nil, json: json) }

    init(copying doc: Document) { super.init(copying: doc, mutable: true) }

    private var root: MutableDictionaryObject { content as! MutableDictionaryObject }

    /// The property when it is an array: mutable, the document's own (edits reach the document).
    public override func array(forKey key: String) -> MutableArrayObject? { root.array(forKey: key) }
    /// The property when it is an object: mutable, the document's own.
    public override func dictionary(forKey key: String) -> MutableDictionaryObject? { root.dictionary(forKey: key) }
    /// The property `key` as a ``MutableFragment``: `doc["address"]["city"].string = "Lyon"`.
    public override subscript(key: String) -> MutableFragment { root[key] }

    /// Sets a property (value types as ``MutableDictionaryObject/setValue(_:forKey:)``; nil sets null).
    @discardableResult
    public func setValue(_ value: Any?, forKey key: String) -> Self {
        if key == "_attachments" {
            attachments = DocumentValue.json(value).objectValue
        } else {
            root.setValue(value, forKey: key)
        }
        return self
    }

    /// Removes a property.
    @discardableResult
    public func removeValue(forKey key: String) -> Self {
        if key == "_attachments" { attachments = nil } else { root.removeValue(forKey: key) }
        return self
    }

    /// Replaces every property.
    @discardableResult
    public func setData(_ data: [String: Any]) -> Self {
        var rest = data
        if let atts = rest.removeValue(forKey: "_attachments") { attachments = DocumentValue.json(atts).objectValue }
        root.setData(rest)
        return self
    }

    /// Replaces every property with Settee's JSON.
    @discardableResult
    public func setData(_ data: JSONObject) -> Self {
        var rest = data
        if case .object(let atts)? = rest.removeValue(forKey: "_attachments") { attachments = atts }
        root.object = rest
        root.live = [:]
        return self
    }

    /// Replaces every property from JSON object text.
    /// - Throws: ``SetteeError`` `.invalidJSON` for malformed text, `.badRequest` when it is not an object.
    @discardableResult
    public func setJSON(_ json: String) throws -> Self { setData(try DocumentJSON.object(json)) }

    /// A mutable copy.
    public override func toMutable() -> MutableDocument { MutableDocument(copying: self) }
}
