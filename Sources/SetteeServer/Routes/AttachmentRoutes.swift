import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeCore
import SetteeStore

/// `/{db}/{docid}/{attachment}`: read, add or replace, and remove one attachment (each change is a new revision).
enum AttachmentRoutes {
    static func handle(_ call: inout Call, _ target: Keyspace, id: String, name: String) async throws -> Response {
        let (db, c) = try target.open(call.node)
        switch call.method {
        case .get, .head:
            let rev = try call.query["rev"].map { s in
                guard let r = RevID(s) else { throw CouchError.badRequest("Invalid rev format") }
                return r
            }
            let (meta, data): (JSONObject, [UInt8]) = try await blocking {
                guard let record = try c.record(id: id, withTree: rev != nil) else { throw CouchError.notFound("missing") }
                if rev == nil && record.deleted { throw CouchError.notFound("deleted") }
                guard let revision = record.revision(rev ?? record.revID),
                      case .object(let body) = try JSON.parse(revision.body),
                      case .object(let meta)? = body["_attachments"]?[name],
                      let digest = meta["digest"]?.stringValue, let data = try db.blob(digest: digest)
                else { throw CouchError.notFound("Document is missing attachment") }
                return (meta, data)
            }
            let contentType = meta["content_type"]?.stringValue ?? "application/octet-stream"
            var headers: HTTPFields = [.contentType: contentType, .eTag: "\"\(meta["digest"]?.stringValue ?? "")\"",
                                       .acceptRanges: "none", .cacheControl: "must-revalidate",
                                       // As CouchDB's [csp] attachments_header_value: an HTML attachment opened in a
                                       // browser runs no script on the node's origin.
                                       HTTPField.Name("Content-Security-Policy")!: "sandbox",
                                       HTTPField.Name("X-Content-Type-Options")!: "nosniff"]
            if call.method == .head {
                headers[.contentLength] = String(data.count)
                return Response(status: .ok, headers: headers)
            }
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        case .put:
            try DocumentInput.validateAttachmentName(name)
            let data = try await call.bodyBytes()
            if data.count > call.node.configuration.maxAttachmentSize {
                throw CouchError(.contentTooLarge, "attachment_too_large", name)
            }
            let contentType = call.header(.contentType) ?? "application/octet-stream"
            let rev = try (call.query["rev"] ?? DocumentRoutes.ifMatch(call)).map { s in
                guard let r = RevID(s) else { throw CouchError.badRequest("Invalid rev format") }
                return r
            }
            let newRev: RevID = try await blocking {
                var body = JSONObject()
                if let rev {
                    guard let record = try c.record(id: id, withTree: true) else { throw CouchError.conflict }
                    guard let revision = record.revision(rev), case .object(let b) = try JSON.parse(revision.body) else {
                        throw CouchError.conflict
                    }
                    body = b
                } else if let existing = try c.record(id: id), !existing.deleted {
                    throw CouchError.conflict
                }
                let digest = Database.attachmentDigest(data)
                var atts = body["_attachments"]?.objectValue ?? [:]
                atts[name] = ["content_type": .string(contentType), "revpos": .int(Int64((rev?.generation ?? 0) + 1)),
                              "digest": .string(digest), "length": .int(Int64(data.count)), "stub": true]
                body["_attachments"] = .object(atts)
                return try c.write([RevisionWrite(id: id, body: body, mode: .edit(parent: rev),
                                                  blobs: [(digest, data)])])[0].get()
            }
            return Reply.json(.created, ["ok": true, "id": .string(id), "rev": .string(newRev.description)],
                              headers: [.eTag: "\"\(newRev)\""])
        case .delete:
            guard let revText = call.query["rev"] ?? DocumentRoutes.ifMatch(call) else { throw CouchError.conflict }
            guard let rev = RevID(revText) else { throw CouchError.badRequest("Invalid rev format") }
            let newRev: RevID = try await blocking {
                guard let record = try c.record(id: id, withTree: true) else { throw CouchError.notFound("missing") }
                guard let revision = record.revision(rev), case .object(var body) = try JSON.parse(revision.body) else {
                    throw CouchError.conflict
                }
                guard var atts = body["_attachments"]?.objectValue, atts[name] != nil else {
                    throw CouchError.notFound("Document is missing attachment")
                }
                atts.removeValue(forKey: name)
                if atts.isEmpty { body.removeValue(forKey: "_attachments") } else { body["_attachments"] = .object(atts) }
                return try c.write([RevisionWrite(id: id, body: body, mode: .edit(parent: rev))])[0].get()
            }
            return Reply.json(.ok, ["ok": true, "id": .string(id), "rev": .string(newRev.description)])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }
}
