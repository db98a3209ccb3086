import Foundation
package import SetteeCore

/// Model classes stored as documents (Couchbase Lite 3.2.3's Codable documents).
public typealias DocumentEncodable = Encodable & AnyObject
public typealias DocumentDecodable = Decodable & AnyObject
public typealias DocumentCodable = Codable & AnyObject

/// Marks the property of a model class that holds its document's id (Couchbase Lite's `@DocumentID`).
///
/// ```swift
/// final class User: Codable {
///     @DocumentID var id: String?
///     var name: String
///     var joined: Date
///     init(name: String, joined: Date) { self.name = name; self.joined = joined }
/// }
/// let user = User(name: "Ada", joined: Date())
/// try collection.save(from: user)                            // user.id is set (a random id)
/// let again = try collection.document(id: user.id!, as: User.self)
/// ```
/// The id is not a property of the document; the wrapper also remembers the revision read or saved, so a
/// save with `.failOnConflict` notices a change made since.
@propertyWrapper
public final class DocumentID: Codable {
    var documentID: String?
    var revisionID: String?

    public var wrappedValue: String? {
        get { documentID }
        set {
            precondition(revisionID == nil || newValue == documentID, "Cannot change the id of a saved document")
            documentID = newValue
        }
    }

    public init(wrappedValue: String?) { documentID = wrappedValue }

    /// Outside a document (plain JSON, a query result), the id is a string member like any other.
    public convenience init(from decoder: any Decoder) throws {
        self.init(wrappedValue: try String?(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(documentID)
    }
}

/// Encoding and decoding model objects as documents: JSON with Couchbase Lite's conventions (dates as ISO-8601
/// text with milliseconds), the `@DocumentID` property left out of the body and filled from the document.
package enum DocumentCoding {
    /// Set while a model object is encoded as a document body: its `@DocumentID` is not a member.
    @TaskLocal static var encodingBody = false
    /// The document a model object is being decoded from (its id and revision fill `@DocumentID`).
    @TaskLocal static var decodingDocument: (id: String, revision: String?)?
    /// The database a decoded blob reads its content from.
    @TaskLocal package static var decodingDatabase: Database?
    /// Collects the blobs a model encodes, whose content the save stores.
    @TaskLocal static var encodedBlobs: BlobCollector?

    // @unchecked: a task-local must be Sendable, but a collector is used by the one encode that made it, on its
    // thread (Blob, like Couchbase Lite's, is not Sendable).
    final class BlobCollector: @unchecked Sendable {
        var blobs: [Blob] = []
        func add(_ blob: Blob) { blobs.append(blob) }
    }

    static func body<T: Encodable>(of object: T) throws -> (body: JSONObject, blobs: [Blob]) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ISO8601.format(date))
        }
        let data: Data
        let collector = BlobCollector()
        do {
            data = try $encodingBody.withValue(true) {
                try $encodedBlobs.withValue(collector) { try encoder.encode(object) }
            }
        } catch {
            throw SetteeError(.badRequest, "Cannot encode \(T.self) as a document: \(error)", underlying: Database.sendable(error))
        }
        guard case .object(let body) = try JSON.parse(Array(data)) else {
            throw SetteeError(.badRequest, "\(T.self) does not encode as a JSON object")
        }
        return (body, collector.blobs)
    }

    package static func decode<T: Decodable>(_ type: T.Type, from json: JSON, id: String?, revision: String?) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self), let date = ISO8601.parse(text) { return date }
            return Date(timeIntervalSince1970: try container.decode(Double.self))
        }
        do {
            let data = Data(json.serializedBytes)
            if let id { return try $decodingDocument.withValue((id, revision)) { try decoder.decode(T.self, from: data) } }
            return try decoder.decode(T.self, from: data)
        } catch {
            throw SetteeError(.badRequest, "Cannot decode \(T.self): \(error)", underlying: Database.sendable(error))
        }
    }

    /// The `@DocumentID` of a model object.
    static func reference(of object: AnyObject) -> DocumentID? {
        var mirror: Mirror? = Mirror(reflecting: object)
        while let m = mirror {
            for child in m.children { if let ref = child.value as? DocumentID { return ref } }
            mirror = m.superclassMirror
        }
        return nil
    }
}

extension KeyedEncodingContainer {
    /// A model's `@DocumentID` is not encoded into its document's body.
    public mutating func encode(_ value: DocumentID, forKey key: Key) throws {
        if DocumentCoding.encodingBody { return }
        try encode(value.documentID, forKey: key)
    }
}

extension KeyedDecodingContainer {
    /// A model's `@DocumentID` comes from the document being decoded, or from the member when there is none (a
    /// query result with `META().id AS id`).
    public func decode(_ type: DocumentID.Type, forKey key: Key) throws -> DocumentID {
        if let document = DocumentCoding.decodingDocument {
            let ref = DocumentID(wrappedValue: document.id)
            ref.revisionID = document.revision
            return ref
        }
        return DocumentID(wrappedValue: try decodeIfPresent(String.self, forKey: key))
    }
}

extension Collection {
    /// The document `id` decoded as a model object (Couchbase Lite's `document(id:as:)`), nil when absent.
    /// - Throws: ``SetteeError`` `.badRequest` when the document does not decode as `T`, or `T` has no `@DocumentID`.
    public func document<T: DocumentDecodable>(id: String, as type: T.Type) throws -> T? {
        guard let document = try document(id: id) else { return nil }
        let object = try DocumentCoding.$decodingDatabase.withValue(database) {
            try DocumentCoding.decode(T.self, from: .object(document.content.jsonObject), id: id,
                                      revision: document.revisionID)
        }
        guard DocumentCoding.reference(of: object) != nil else {
            throw SetteeError(.badRequest, "Type \(T.self) has no @DocumentID property")
        }
        return object
    }

    /// Saves a model object as a document, last write winning (Couchbase Lite's `save(from:)`). A nil
    /// `@DocumentID` gets a random id.
    public func save<T: DocumentEncodable>(from object: T) throws {
        _ = try save(from: object, concurrencyControl: .lastWriteWins)
    }

    /// Saves a model object as a document; false when `.failOnConflict` found the document changed since the
    /// object was read or saved.
    @discardableResult
    public func save<T: DocumentEncodable>(from object: T, concurrencyControl: ConcurrencyControl) throws -> Bool {
        let (ref, document) = try prepare(object)
        guard try save(document: document, concurrencyControl: concurrencyControl) else { return false }
        ref.documentID = document.id
        ref.revisionID = document.revisionID
        return true
    }

    /// Saves a model object as a document, asking `conflictHandler` when the document changed since the object was
    /// read (Couchbase Lite's `save(from:conflictHandler:)`). The handler gets the object being saved and the
    /// current document decoded as `T` (nil when deleted); it may change the first and returns true to save it,
    /// false to give up (the save then returns false).
    @discardableResult
    public func save<T: DocumentCodable>(from object: T, conflictHandler: @escaping (T, T?) -> Bool) throws -> Bool {
        let (ref, document) = try prepare(object)
        let saved = try save(document: document) { newDocument, current in
            let existing = try current.map { current in
                try DocumentCoding.$decodingDatabase.withValue(database) {
                    try DocumentCoding.decode(T.self, from: .object(current.content.jsonObject), id: current.id,
                                              revision: current.revisionID)
                }
            }
            guard conflictHandler(object, existing) else { return false }
            // The handler may have changed the object: what is saved is the object as it is now.
            let (body, blobs) = try DocumentCoding.body(of: object)
            for blob in blobs { try database.saveBlob(blob: blob) }
            newDocument.setData(body)
            return true
        }
        guard saved else { return false }
        ref.documentID = document.id
        ref.revisionID = document.revisionID
        return true
    }

    /// Deletes a model object's document (Couchbase Lite's `delete(for:)`).
    public func delete<T: DocumentEncodable>(for object: T) throws {
        _ = try delete(for: object, concurrencyControl: .lastWriteWins)
    }

    /// Deletes a model object's document; false when `.failOnConflict` found it changed since it was read.
    @discardableResult
    public func delete<T: DocumentEncodable>(for object: T, concurrencyControl: ConcurrencyControl) throws -> Bool {
        let (ref, document) = try prepare(object)
        guard ref.documentID != nil else { throw SetteeError(.notFound, "The object was never saved") }
        guard try delete(document: document, concurrencyControl: concurrencyControl) else { return false }
        ref.revisionID = document.revisionID
        return true
    }

    /// Purges a model object's document (Couchbase Lite's `purge(for:)`).
    public func purge<T: DocumentEncodable>(for object: T) throws {
        guard let id = DocumentCoding.reference(of: object)?.documentID else {
            throw SetteeError(.notFound, "The object was never saved")
        }
        try purge(id: id)
    }

    private func prepare<T: DocumentEncodable>(_ object: T) throws -> (DocumentID, MutableDocument) {
        guard let ref = DocumentCoding.reference(of: object) else {
            throw SetteeError(.badRequest, "Type \(T.self) has no @DocumentID property")
        }
        let (body, blobs) = try DocumentCoding.body(of: object)
        // The blobs' content goes in first; the document's stubs then name content the database has.
        for blob in blobs { try database.saveBlob(blob: blob) }
        let document = MutableDocument(id: ref.documentID, data: body)
        // A model that was never read (an id set by hand) edits whatever revision is current, as in Couchbase Lite.
        if let revision = ref.revisionID {
            document.revisionID = revision
        } else if let id = ref.documentID {
            document.revisionID = try self.document(id: id)?.revisionID
        }
        return (ref, document)
    }
}
