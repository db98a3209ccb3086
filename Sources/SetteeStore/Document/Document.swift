public import Foundation
public import SetteeCore

/// A read-only snapshot of a document's revision (Couchbase Lite's `Document`).
///
/// ```swift
/// if let doc = try collection.document(id: "p1") {
///     let name = doc.string(forKey: "name")        // typed getters: nil or 0 when absent or of another type
///     let city = doc["address"]["city"].string     // fragments reach into nested values
///     let price = doc.double(forKey: "price")
/// }
/// ```
/// Use ``toMutable()`` to edit it and `Collection.save(document:)` to store the edit.
///
/// The document's CouchDB attachments (`_attachments`) are not among its properties: blobs (``Blob``) are
/// how the API reads and writes content, and ``attachments`` shows the stored stubs.
///
/// Not `Sendable`, as in Couchbase Lite: a document object belongs to the thread (or task) that read it. To use a
/// document elsewhere, pass its id and read it there.
public class Document: DictionaryProtocol, Equatable, Hashable, Sequence, CustomStringConvertible {
    /// The document id.
    public let id: String
    /// The revision this snapshot holds (nil for a new, unsaved document).
    public internal(set) var revisionID: String?
    /// The sequence of the document's latest change when read or saved (0 for a new document).
    public internal(set) var sequence: UInt64
    /// Whether this revision is a tombstone.
    public internal(set) var isDeleted: Bool
    /// The collection the document was read from or saved to.
    public internal(set) var collection: Collection?
    /// The properties, `_attachments` aside.
    var content: DictionaryObject
    /// The CouchDB attachment stubs stored with the revision (`_attachments`), blobs' ones included; nil when none.
    public internal(set) var attachments: JSONObject?

    package init(id: String, revisionID: String?, sequence: UInt64, deleted: Bool, properties: JSONObject,
         collection: Collection?, mutable: Bool = false) {
        self.id = id
        self.revisionID = revisionID
        self.sequence = sequence
        self.isDeleted = deleted
        self.collection = collection
        var body = properties
        if case .object(let atts)? = body.removeValue(forKey: "_attachments") { attachments = atts }
        let database = collection?.database
        content = mutable ? MutableDictionaryObject(body, database: database) : DictionaryObject(body, database: database)
    }

    /// A document over its stored body's bytes, read by ``Collection/document(id:)``: its properties are read from
    /// the bytes as they are asked for (see ``DictionaryObject``). A body with attachments (`hasAttachments`: the
    /// row's flag, which every write keeps) is parsed now, to take its `_attachments` apart.
    /// - Throws: ``SetteeError`` `.internalError` when such a body is not a JSON object.
    convenience init(id: String, revisionID: String, sequence: UInt64, storedBody: [UInt8], hasAttachments: Bool,
                     collection: Collection) throws {
        // (The store writes objects, starting with `{`; anything else is left to the parser, which says what is wrong.)
        if !hasAttachments, storedBody.first == UInt8(ascii: "{") {
            self.init(id: id, revisionID: revisionID, sequence: sequence,
                      content: DictionaryObject(storedBody: storedBody, database: collection.database), collection: collection)
        } else {
            self.init(id: id, revisionID: revisionID, sequence: sequence, deleted: false,
                      properties: storedBody.isEmpty ? JSONObject() : try DocumentRecord.parseBody(storedBody),
                      collection: collection)
        }
    }

    private init(id: String, revisionID: String, sequence: UInt64, content: DictionaryObject, collection: Collection) {
        self.id = id
        self.revisionID = revisionID
        self.sequence = sequence
        isDeleted = false
        self.collection = collection
        self.content = content
    }

    init(copying doc: Document, mutable: Bool) {
        id = doc.id
        revisionID = doc.revisionID
        sequence = doc.sequence
        isDeleted = doc.isDeleted
        collection = doc.collection
        attachments = doc.attachments
        content = mutable ? MutableDictionaryObject(copying: doc.content) : doc.content
    }

    /// The properties as JSON, `_attachments` included (Settee's).
    public var properties: JSONObject {
        var body = content.jsonObject
        if let attachments, !attachments.isEmpty { body["_attachments"] = .object(attachments) }
        return body
    }

    /// Number of properties.
    public var count: Int { content.count }
    /// Property names in document order.
    public var keys: [String] { content.keys }
    /// Whether a property exists (a null one does).
    public func contains(key: String) -> Bool { content.contains(key: key) }

    /// The property as Couchbase Lite returns it: `String`, `Int`, `Double`, `Bool`, ``Blob``, ``ArrayObject``,
    /// ``DictionaryObject``; nil when absent or null.
    public func value(forKey key: String) -> Any? { content.value(forKey: key) }
    /// The property as stored JSON (Settee's), or nil when absent.
    public func json(forKey key: String) -> JSON? { content.json(forKey: key) }
    /// The property when it is a string.
    public func string(forKey key: String) -> String? { content.string(forKey: key) }
    /// The property when it is a number (booleans too).
    public func number(forKey key: String) -> NSNumber? { content.number(forKey: key) }
    /// The property as an integer: numbers truncated, `true` 1; 0 when absent or not a number.
    public func int(forKey key: String) -> Int { content.int(forKey: key) }
    /// The property as a 64-bit integer (0 when absent or not a number).
    public func int64(forKey key: String) -> Int64 { content.int64(forKey: key) }
    /// The property as a float (0 when absent or not a number).
    public func float(forKey key: String) -> Float { content.float(forKey: key) }
    /// The property as a double (0 when absent or not a number).
    public func double(forKey key: String) -> Double { content.double(forKey: key) }
    /// The property as a boolean: false when absent, null, `false` or 0.
    public func boolean(forKey key: String) -> Bool { content.boolean(forKey: key) }
    /// The property parsed as an ISO-8601 date, when it is such a string.
    public func date(forKey key: String) -> Date? { content.date(forKey: key) }
    /// The property when it is a blob.
    public func blob(forKey key: String) -> Blob? { content.blob(forKey: key) }
    /// The property when it is an array.
    public func array(forKey key: String) -> ArrayObject? { content.array(forKey: key) }
    /// The property when it is an object.
    public func dictionary(forKey key: String) -> DictionaryObject? { content.dictionary(forKey: key) }

    /// The properties as Swift values (see ``DictionaryObject/toDictionary()``).
    public func toDictionary() -> [String: Any] { content.toDictionary() }
    /// The properties as JSON text.
    public func toJSON() -> String { content.toJSON() }
    /// A mutable copy to edit and save.
    public func toMutable() -> MutableDocument { MutableDocument(copying: self) }

    /// The property `key` as a ``Fragment``: `doc["address"]["city"].string`.
    public subscript(key: String) -> Fragment { content[key] }

    /// The property names.
    public func makeIterator() -> IndexingIterator<[String]> { keys.makeIterator() }

    /// Equal when the ids, the collections and the properties are.
    public static func == (a: Document, b: Document) -> Bool {
        a.id == b.id && a.collection == b.collection && a.content == b.content
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(content)
    }

    public var description: String { "Document(\(id), \(revisionID ?? "new"))" }

    /// The body to store: the properties, and `_attachments` with a `blob_/<path>` stub for every blob (the
    /// stubs of blobs no longer there dropped, other attachments kept), plus the blob contents the database
    /// lacks. `generation` is the new revision's, the `revpos` of new attachments.
    package func revisionBody(for database: Database, generation: Int) throws -> (body: JSONObject, blobs: [(digest: String, data: [UInt8])]) {
        var atts = JSONObject()
        for (name, stub) in attachments ?? JSONObject() where !name.hasPrefix(Blob.attachmentName(path: "/")) { atts[name] = stub }
        var contents: [(digest: String, data: [UInt8])] = []
        var saved: [Blob] = []
        for (path, blob) in content.blobs() {
            let prepared = try blob.prepareSave(into: database)
            if let data = prepared.data { contents.append((prepared.digest, data)) }
            let name = Blob.attachmentName(path: path)
            let previous = attachments?[name]
            let revpos = previous?["digest"]?.stringValue == prepared.digest
                ? (previous?["revpos"] ?? .int(Int64(generation))) : .int(Int64(generation))
            atts[name] = Blob.attachmentStub(contentType: blob.contentType, digest: prepared.digest,
                                             length: prepared.length, revpos: revpos)
            saved.append(blob)
        }
        // After the blobs are prepared: a stream's or a file's digest is known once it is read.
        var body = content.jsonObject
        if !atts.isEmpty { body["_attachments"] = .object(atts) }
        // The blobs are saved once the revision is; until then a failed save leaves them as they were.
        pendingBlobs = saved
        return (body, contents)
    }

    /// The blobs of the body last prepared, marked saved when the revision is stored.
    var pendingBlobs: [Blob] = []

    /// Records a stored revision. Inside `inBatch`, the blobs are marked saved once the batch commits, and the
    /// document goes back to what it was if the batch is rolled back.
    func didSave(revision: String, sequence: Int64?, deleted: Bool, collection: Collection, body: JSONObject) {
        let before = (revisionID, isDeleted, self.sequence, self.collection, attachments)
        revisionID = revision
        isDeleted = deleted
        if let sequence { self.sequence = UInt64(sequence) }
        self.collection = collection
        if case .object(let atts)? = body["_attachments"] { attachments = atts } else { attachments = nil }
        let blobs = pendingBlobs
        pendingBlobs = []
        let database = collection.database
        if let batch = Batch.current(of: database) {
            // (Weak: a document the app let go of needs no undoing, and a batch of many saves must not keep every
            // document it saved alive until it commits.)
            batch.onOutcome(commit: blobs.isEmpty ? nil : { for blob in blobs { blob.didSave(in: database) } }) { [weak self] in
                guard let self else { return }
                (revisionID, isDeleted, self.sequence, self.collection, attachments) = before
            }
        } else {
            for blob in blobs { blob.didSave(in: database) }
        }
    }
}
