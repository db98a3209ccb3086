import Foundation
import SetteeCore
import SetteeStore

/// Documents with their attachments as `multipart/related`, as CouchDB sends them to clients that accept it
/// (`GET /{db}/{docid}?attachments=true` with `Accept: multipart/related`, and each revision of an
/// `open_revs` answer in `multipart/mixed`, which CouchDB's replicator reads): the JSON document first, each
/// attachment sent marked `"follows": true`, then one part per attachment with its bytes, in the document's order.
enum MultipartDocuments {
    /// The parts of one document. `rendered` is the document as ``DocumentOutput/render`` made it: attachments to
    /// send carry inline `data` (identity bytes); the others are stubs and stay so. With `sendEncoded`, a
    /// gzip-stored attachment goes as stored, with `"encoding": "gzip"` and `encoded_length`.
    static func related(_ rendered: JSONObject, database: Database, sendEncoded: Bool) throws -> (boundary: String, bytes: [UInt8]) {
        var doc = rendered
        var attachmentParts: [MultipartPart] = []
        if case .object(var atts)? = doc["_attachments"] {
            for (name, meta) in atts {
                guard case .object(var m) = meta, let data = m["data"]?.stringValue, let identity = Base64.decode(data) else { continue }
                var bytes = identity
                m.removeValue(forKey: "data")
                m["follows"] = true
                m["length"] = .int(Int64(identity.count))
                if sendEncoded, let digest = m["digest"]?.stringValue, let stored = try database.storedBlob(digest: digest),
                   let encoding = stored.encoding {
                    bytes = stored.data
                    m["encoding"] = .string(encoding)
                    m["encoded_length"] = .int(Int64(stored.data.count))
                }
                atts[name] = .object(m)
                var headers: [(name: String, value: String)] = [
                    ("Content-Disposition", Multipart.contentDisposition(attachmentFilename: name)),
                    ("Content-Type", m["content_type"]?.stringValue ?? "application/octet-stream"),
                    ("Content-Length", String(bytes.count)),
                ]
                if let encoding = m["encoding"]?.stringValue { headers.append(("Content-Encoding", encoding)) }
                attachmentParts.append(MultipartPart(headers: headers, body: bytes))
            }
            doc["_attachments"] = .object(atts)
        }
        let boundary = Multipart.makeBoundary()
        let parts = [MultipartPart(headers: [("Content-Type", "application/json")], body: JSON.object(doc).serializedBytes)]
            + attachmentParts
        return (boundary, Multipart.write(parts, boundary: boundary))
    }

    /// Whether a rendered document sends any attachment bytes (else it goes as plain JSON).
    static func sendsAttachments(_ rendered: JSONObject) -> Bool {
        guard case .object(let atts)? = rendered["_attachments"] else { return false }
        for (_, meta) in atts where meta["data"] != nil { return true }
        return false
    }
}
