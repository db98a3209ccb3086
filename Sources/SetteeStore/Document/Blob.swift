public import Foundation
package import SetteeCore

/// Binary content in a document (Couchbase Lite's `Blob`): an image, a file.
///
/// The document holds the blob's metadata — `{"@type": "blob", "content_type", "digest", "length"}` — and the
/// content is stored once per digest beside the documents, as a CouchDB attachment named `blob_/<key path>`,
/// so it replicates to CouchDB and PouchDB as one. The digest is CouchDB's (`md5-` + base64).
///
/// ```swift
/// let avatar = Blob(contentType: "image/png", data: pngData)
/// doc.setBlob(avatar, forKey: "avatar")
/// try collection.save(document: doc)
/// let back = try collection.document(id: doc.id)?.blob(forKey: "avatar")?.content
/// ```
///
/// A blob made from a stream or a file is read when its document (or ``Database/saveBlob(blob:)``) saves it.
public final class Blob: Equatable, Hashable, CustomStringConvertible {
    /// The key of a blob's type marker in its metadata, and its value (Couchbase Lite's constants).
    public static let typeProperty = "@type"
    public static let blobType = "blob"
    /// The metadata's members (Couchbase Lite's constants).
    public static let blobDigestProperty = "digest"
    public static let blobLengthProperty = "length"
    public static let blobContentType = "content_type"

    enum Source {
        case data(Data)
        case stream(InputStream)
        case file(URL)
        /// Saved: the content is read from the database by digest.
        case stored
    }

    private(set) var source: Source
    /// The database holding the content once saved or read.
    private(set) var database: Database?
    private var loadedContent: Data?
    /// The MIME type given when the blob was made (nil when the metadata has none).
    public let contentType: String?
    private var storedDigest: String?
    private var storedLength: UInt64
    /// Other members of the metadata a peer wrote (kept as they are).
    private let extra: JSONObject

    /// A blob holding `data`.
    public init(contentType: String, data: Data) {
        source = .data(data)
        self.contentType = contentType
        storedDigest = Database.attachmentDigest([UInt8](data))
        storedLength = UInt64(data.count)
        extra = JSONObject()
    }

    /// A blob whose content is read from `contentStream` when it is saved.
    public init(contentType: String, contentStream: InputStream) {
        source = .stream(contentStream)
        self.contentType = contentType
        storedLength = 0
        extra = JSONObject()
    }

    /// A blob whose content is the file at `fileURL`, read when it is saved.
    /// - Throws: ``SetteeError`` `.badRequest` when the URL is not a file URL.
    public init(contentType: String, fileURL: URL) throws {
        guard fileURL.isFileURL else { throw SetteeError(.badRequest, "\(fileURL) is not a file URL") }
        source = .file(fileURL)
        self.contentType = contentType
        storedLength = 0
        extra = JSONObject()
    }

    /// A blob described by stored metadata; its content is in `database`.
    init(stored metadata: JSONObject, database: Database?) {
        source = .stored
        self.database = database
        contentType = metadata["content_type"]?.stringValue
        storedDigest = metadata["digest"]?.stringValue
        storedLength = UInt64(clamping: metadata["length"]?.intValue ?? 0)
        var rest = metadata
        for key in [Self.typeProperty, "content_type", "digest", "length"] { rest.removeValue(forKey: key) }
        extra = rest
    }

    /// Whether stored metadata describes a blob: `@type` `blob` and a string `digest`.
    static func isBlob(_ object: JSONObject) -> Bool {
        object[typeProperty]?.stringValue == blobType && object["digest"]?.stringValue != nil
    }

    /// Whether a dictionary is blob metadata (Couchbase Lite's `Blob.isBlob(properties:)`).
    public static func isBlob(properties: [String: Any]) -> Bool {
        properties[typeProperty] as? String == blobType && properties["digest"] is String
    }

    /// The content, read from the database when the blob was saved (nil if it is not there: a peer sent the
    /// metadata without the attachment, or the blob was never saved and its stream was consumed).
    public var content: Data? {
        switch source {
        case .data(let data): return data
        case .file(let url): return try? Data(contentsOf: url)
        case .stream: return try? load()
        case .stored:
            if let loadedContent { return loadedContent }
            guard let database, let digest = storedDigest, let bytes = try? database.blob(digest: digest) else { return nil }
            loadedContent = Data(bytes)
            return loadedContent
        }
    }

    /// The content as a stream.
    public var contentStream: InputStream? {
        switch source {
        case .stream(let stream): return stream
        case .file(let url): return InputStream(url: url)
        default: return content.map { InputStream(data: $0) }
        }
    }

    /// The content's length in bytes (0 for a stream not yet saved).
    public var length: UInt64 { storedLength }

    /// The content's digest, `md5-<base64>` (nil for a stream or a file not yet saved).
    public var digest: String? { storedDigest }

    /// The metadata a document stores for this blob, as Swift values.
    public var properties: [String: Any] {
        var out: [String: Any] = [:]
        for (key, value) in jsonProperties { out[key] = DocumentValue.plain(value, database: nil) }
        return out
    }

    /// The metadata as JSON text.
    public func toJSON() -> String { JSON.object(jsonProperties).jsonString }

    /// The metadata as stored.
    var jsonProperties: JSONObject {
        var out: JSONObject = [Self.typeProperty: .string(Self.blobType)]
        if let contentType { out["content_type"] = .string(contentType) }
        if let storedDigest { out["digest"] = .string(storedDigest) }
        out["length"] = .int(Int64(clamping: storedLength))
        for (k, v) in extra { out[k] = v }
        return out
    }

    /// Reads a stream or file source whole (once), fixing the digest and length.
    func load() throws -> Data {
        switch source {
        case .data(let data): return data
        case .stored: return content ?? Data()
        case .file(let url):
            let data: Data
            do { data = try Data(contentsOf: url) } catch {
                throw SetteeError(.notFound, "Cannot read blob file \(url.path): \(error)", underlying: error)
            }
            settle(data)
            return data
        case .stream(let stream):
            var data = Data()
            stream.open()
            defer { stream.close() }
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let n = stream.read(&buffer, maxLength: buffer.count)
                if n < 0 { throw SetteeError(.badRequest, "Blob stream failed: \(stream.streamError.map { "\($0)" } ?? "read error")") }
                if n == 0 { break }
                data.append(buffer, count: n)
            }
            settle(data)
            return data
        }
    }

    private func settle(_ data: Data) {
        source = .data(data)
        storedDigest = Database.attachmentDigest([UInt8](data))
        storedLength = UInt64(data.count)
    }

    /// What saving this blob into `database` needs: its digest, length and, unless the database already has it,
    /// its content. Afterwards the blob reads its content from there.
    func prepareSave(into database: Database) throws -> (digest: String, length: Int, data: [UInt8]?) {
        if case .stored = source, let digest = storedDigest {
            if try self.database === database || database.blobInfo(digest: digest) != nil {
                return (digest, Int(storedLength), nil)
            }
            guard let data = content else {
                throw SetteeError(.notFound, "The content of blob \(digest) is not available")
            }
            return (digest, data.count, [UInt8](data))
        }
        let data = try load()
        return (storedDigest!, data.count, [UInt8](data))
    }

    /// Marks the blob saved in `database`.
    func didSave(in database: Database) {
        if case .data(let data) = source { loadedContent = data }
        source = .stored
        self.database = database
    }

    /// Blobs described in stored JSON, with their key paths (`/`-separated members and indexes).
    static func stored(in json: JSON, path: String, database: Database?) -> [(path: String, blob: Blob)] {
        metadata(in: json, path: path).map { ($0.path, Blob(stored: $0.metadata, database: database)) }
    }

    // MARK: The blob ↔ attachment mapping

    /// The CouchDB attachment a blob at key path `path` is stored as: `blob_/<path>` (`blob_/avatar`,
    /// `blob_/photos/0`), the name Couchbase Lite 2.1+ gives a blob in a document's legacy `_attachments`.
    ///
    /// This is the one mapping between blobs and attachments: the Swift API saves blobs through it, and a
    /// `_blipsync` push from Couchbase Lite is stored through it, so CouchDB and PouchDB clients see the same
    /// attachment whichever way the blob came.
    package static func attachmentName(path: String) -> String { "blob_" + path }

    /// The `_attachments` stub a blob's metadata maps to (a missing content type is `application/octet-stream`).
    package static func attachmentStub(contentType: String?, digest: String, length: Int, revpos: JSON) -> JSON {
        ["content_type": .string(contentType ?? "application/octet-stream"), "revpos": revpos,
         "digest": .string(digest), "length": .int(Int64(length)), "stub": true]
    }

    /// Every blob's metadata in a JSON value, with its key path (JSON-pointer segments: members escaped with
    /// ``escape(_:)``, array indexes), in document order. A blob's own members are not searched.
    ///
    /// ```swift
    /// Blob.metadata(in: ["a": ["@type": "blob", "digest": "md5-…"]])   // [("/a", ["@type": "blob", …])]
    /// ```
    package static func metadata(in json: JSON, path: String = "") -> [(path: String, metadata: JSONObject)] {
        switch json {
        case .object(let o):
            if isBlob(o) { return [(path, o)] }
            return o.flatMap { member in mayHold(member.value) ? metadata(in: member.value, path: memberPath(path, member.key)) : [] }
        case .array(let a):
            return a.enumerated().flatMap { item in mayHold(item.element) ? metadata(in: item.element, path: path + "/" + String(item.offset)) : [] }
        default: return []
        }
    }

    /// The key path of member `key` of the value at `path`.
    static func memberPath(_ path: String, _ key: String) -> String { path + "/" + escape(key) }

    /// `json` with each blob's metadata replaced by what `transform` makes of it (given its key path, as
    /// ``metadata(in:path:)`` names it); everything else, and the order of members, as it was.
    package static func replacingMetadata(in json: JSON, path: String = "",
                                          _ transform: (_ path: String, _ metadata: JSONObject) throws -> JSONObject) rethrows -> JSON {
        switch json {
        case .object(let o):
            if isBlob(o) { return .object(try transform(path, o)) }
            var out = o
            for member in o where mayHold(member.value) {
                out[member.key] = try replacingMetadata(in: member.value, path: memberPath(path, member.key), transform)
            }
            return .object(out)
        case .array(let a):
            var out = a
            for (i, item) in a.enumerated() where mayHold(item) {
                out[i] = try replacingMetadata(in: item, path: path + "/" + String(i), transform)
            }
            return .array(out)
        default: return json
        }
    }

    /// Whether a value can be or contain a blob (an object or an array); scalars can't, and need no path.
    static func mayHold(_ json: JSON) -> Bool {
        switch json {
        case .object, .array: return true
        default: return false
        }
    }

    /// A member name as a JSON-pointer segment (`~` → `~0`, `/` → `~1`), so `{"a/b": blob}` and
    /// `{"a": {"b": blob}}` get different attachment names.
    static func escape(_ key: String) -> String {
        guard key.utf8.contains(where: { $0 == UInt8(ascii: "~") || $0 == UInt8(ascii: "/") }) else { return key }
        return key.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }

    /// Equal when the digests are (the same content), or, unsaved streams, the same blob.
    public static func == (a: Blob, b: Blob) -> Bool {
        if let da = a.storedDigest, let db = b.storedDigest { return da == db }
        return a === b
    }

    public func hash(into hasher: inout Hasher) {
        if let storedDigest { hasher.combine(storedDigest) } else { hasher.combine(ObjectIdentifier(self)) }
    }

    public var description: String {
        "Blob[\(contentType ?? "?"); \(storedLength) bytes; \(storedDigest ?? "unsaved")]"
    }
}

/// A blob in a Codable model is its metadata; saving the model (`Collection.save(from:)`) stores its content.
extension Blob: Codable {
    private enum Keys: String, CodingKey {
        case type = "@type", contentType = "content_type", digest, length
    }

    public convenience init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        var metadata: JSONObject = [Blob.typeProperty: .string(Blob.blobType)]
        metadata["digest"] = .string(try container.decode(String.self, forKey: .digest))
        if let type = try container.decodeIfPresent(String.self, forKey: .contentType) { metadata["content_type"] = .string(type) }
        if let length = try container.decodeIfPresent(Int64.self, forKey: .length) { metadata["length"] = .int(length) }
        self.init(stored: metadata, database: DocumentCoding.decodingDatabase)
    }

    public func encode(to encoder: any Encoder) throws {
        switch source {
        case .stream, .file: _ = try load()  // the digest and length are known once the content is read
        default: break
        }
        DocumentCoding.encodedBlobs?.add(self)
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(Blob.blobType, forKey: .type)
        try container.encodeIfPresent(contentType, forKey: .contentType)
        try container.encodeIfPresent(digest, forKey: .digest)
        try container.encode(length, forKey: .length)
    }
}
