import Foundation
import Hummingbird
import NIOCore
import SetteeCore
import SetteeStore

/// Documents with their attachments as `multipart/related`, as CouchDB sends them to clients that accept it
/// (`GET /{db}/{docid}?attachments=true` with `Accept: multipart/related`, and each revision of an
/// `open_revs` answer in `multipart/mixed`, which CouchDB's replicator reads): the JSON document first, each
/// attachment sent marked `"follows": true`, then one part per attachment with its bytes, in the document's order.
///
/// Attachment bodies larger than ``AttachmentStreaming/threshold`` are not read while the answer is built: the
/// body is a ``MultipartBody`` whose segments name them, read from SQLite a megabyte at a time as the response is
/// written (so a replicator pulling a 50 MB attachment costs the source a megabyte, not the attachment thrice).
enum MultipartDocuments {
    /// The parts of one document. `rendered` is the document as ``DocumentOutput/render`` made it with
    /// `attachmentsFollow`: attachments to send carry `"follows": true` (their bytes not read); the others are
    /// stubs and stay so. With `sendEncoded`, a gzip-stored attachment goes as stored, with `"encoding": "gzip"` and
    /// `encoded_length`; otherwise it goes decoded.
    static func related(_ rendered: JSONObject, database: Database, sendEncoded: Bool) throws -> MultipartBody {
        var doc = rendered
        var attachments: [(headers: [(name: String, value: String)], body: MultipartBody.Segment)] = []
        if case .object(var atts)? = doc["_attachments"] {
            for (name, meta) in atts {
                guard case .object(var m) = meta, m["follows"]?.boolValue == true else { continue }
                guard let digest = m["digest"]?.stringValue, let info = try database.blobInfo(digest: digest) else {
                    // No body stored (compacted away meanwhile): it stays a stub.
                    m.removeValue(forKey: "follows")
                    m["stub"] = true
                    atts[name] = .object(m)
                    continue
                }
                let gzipped = info.encoding == "gzip"
                let identityLength = Int(m["length"]?.intValue ?? Int64(info.length))
                let sendsStored = !gzipped || sendEncoded
                let length = sendsStored ? info.length : identityLength
                if gzipped && sendEncoded {
                    m["encoding"] = "gzip"
                    m["encoded_length"] = .int(Int64(info.length))
                }
                atts[name] = .object(m)
                var headers: [(name: String, value: String)] = [
                    ("Content-Disposition", Multipart.contentDisposition(attachmentFilename: name)),
                    ("Content-Type", m["content_type"]?.stringValue ?? "application/octet-stream"),
                    ("Content-Length", String(length)),
                ]
                if gzipped && sendEncoded { headers.append(("Content-Encoding", "gzip")) }
                let segment: MultipartBody.Segment
                if info.length > AttachmentStreaming.threshold {
                    segment = .payload(StoredAttachmentPayload(digest: digest, storedLength: info.length,
                                                                 inflate: !sendsStored, length: length))
                } else {
                    guard let stored = try database.storedBlob(digest: digest) else { throw CouchError.notFound("missing") }
                    segment = .bytes(sendsStored ? stored.data : try stored.identity())
                }
                attachments.append((headers, segment))
            }
            doc["_attachments"] = .object(atts)
        }
        var body = MultipartBody()
        body.appendPart(headers: [("Content-Type", "application/json")], .bytes(JSON.object(doc).serializedBytes))
        for attachment in attachments { body.appendPart(headers: attachment.headers, attachment.body) }
        body.close()
        return body
    }

    /// Whether a rendered document sends any attachment bytes (else it goes as plain JSON).
    static func sendsAttachments(_ rendered: JSONObject) -> Bool {
        guard case .object(let atts)? = rendered["_attachments"] else { return false }
        for (_, meta) in atts where meta["follows"]?.boolValue == true { return true }
        return false
    }
}

/// An attachment body read from the database a piece at a time as a multipart body is written: `span` of the
/// bytes as stored, `length` bytes sent (decoded on the way when `inflate`: then `span` is the whole body).
struct StoredAttachmentPayload: MultipartPayload {
    let digest: String
    let span: Range<Int>
    let inflate: Bool
    let length: Int

    /// The whole body: `storedLength` bytes as stored, `length` sent.
    init(digest: String, storedLength: Int, inflate: Bool, length: Int) {
        (self.digest, span, self.inflate, self.length) = (digest, 0..<storedLength, inflate, length)
    }

    /// A byte range of a body stored as it is.
    init(digest: String, range: Range<Int>) {
        (self.digest, span, inflate, length) = (digest, range, false, range.count)
    }
}

/// A multipart body as segments: bytes, and attachment bodies read from the database as the body is written.
typealias MultipartBody = SegmentedMultipartBody<StoredAttachmentPayload>

extension SegmentedMultipartBody where Payload == StoredAttachmentPayload {
    /// The body for a response: in one buffer when it names no large attachment, else written a piece at a time
    /// from `database` (which a body naming one needs).
    func responseBody(_ database: Database?) -> ResponseBody {
        if isInMemory {
            var buffer = ByteBuffer()
            buffer.reserveCapacity(length)
            for case .bytes(let b) in segments { buffer.writeBytes(b) }
            return ResponseBody(byteBuffer: buffer)
        }
        guard let database else { preconditionFailure("a body naming stored attachments is written from their database") }
        let segments = self.segments
        return ResponseBody(contentLength: length) { writer in
            for segment in segments {
                switch segment {
                case .bytes(let b):
                    try await writer.write(ByteBuffer(bytes: b))
                case .payload(let blob):
                    try await AttachmentStreaming.writeBlob(digest: blob.digest, span: blob.span,
                                                            inflate: blob.inflate, database: database, to: &writer)
                }
            }
            try await writer.finish(nil)
        }
    }
}
