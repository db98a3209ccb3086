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
            let reader = call.reader
            let (meta, digest, found): (JSONObject, String, Found) = try await blocking {
                // An older revision's attachments are readable until compaction drops its body.
                guard let record = try c.record(id: id, withTree: rev != nil, archived: rev.map { .revisions([$0]) }) else {
                    throw CouchError.notFound("missing")
                }
                if rev == nil && record.deleted { throw CouchError.notFound("deleted") }
                try SyncGate.checkRevision(reader, id: id, rev: rev ?? record.revID, in: c)
                guard let revision = record.revision(rev ?? record.revID),
                      case .object(let body) = try JSON.parse(revision.body),
                      case .object(let meta)? = body["_attachments"]?[name],
                      let digest = meta["digest"]?.stringValue, let info = try db.blobInfo(digest: digest)
                else { throw CouchError.notFound("Document is missing attachment") }
                if info.length > AttachmentStreaming.threshold { return (meta, digest, .large(info.length, info.encoding)) }
                guard let stored = try db.storedBlob(digest: digest) else { throw CouchError.notFound("Document is missing attachment") }
                return (meta, digest, .small(stored))
            }
            switch found {
            case .small(let stored):
                return try read(call, meta: meta, stored: stored)
            case .large(let length, let encoding):
                if let response = try AttachmentStreaming.read(call, db: db, meta: meta, digest: digest, storedLength: length,
                                                               encoding: encoding) {
                    return response
                }
                // A compressed body of unknown decoded length, sent decoded: served from the whole body.
                guard let stored = try await blocking({ try db.storedBlob(digest: digest) }) else {
                    throw CouchError.notFound("Document is missing attachment")
                }
                return try read(call, meta: meta, stored: stored)
            }
        case .put:
            try DocumentInput.validateAttachmentName(name)
            let contentType = call.header(.contentType) ?? "application/octet-stream"
            let rev = try (call.query["rev"] ?? DocumentRoutes.ifMatch(call)).map { s in
                guard let r = RevID(s) else { throw CouchError.badRequest("Invalid rev format") }
                return r
            }
            // The body: staged to a file as it arrives when large, else read whole.
            let upload: AttachmentStreaming.Upload?
            let stored: StoredAttachment?
            if AttachmentStreaming.streams(call) {
                if let length = call.header(.contentLength).flatMap(Int.init), length > call.node.configuration.maxRequestSize {
                    throw CouchError.tooLarge
                }
                upload = try await AttachmentStreaming.stage(call.request.body, name: name, contentType: contentType,
                                                             node: call.node)
                stored = nil
            } else {
                let data = try await call.bodyBytes()
                if data.count > call.node.configuration.maxAttachmentSize {
                    throw CouchError(.contentTooLarge, "attachment_too_large", name)
                }
                upload = nil
                stored = try StoredAttachment(data, contentType: contentType, compression: call.node.configuration.attachments)
            }
            defer { upload?.discard() }
            let digest = upload?.blob.digest ?? stored!.digest
            let length = upload?.length ?? stored!.length
            let writer = call.writer
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
                // As CouchDB (chttpd_db): the new attachment first, then the others in their order. The order is
                // part of the revision id's hash.
                var atts: JSONObject = [name: ["content_type": .string(contentType),
                                               "revpos": .int(Int64((rev?.generation ?? 0) + 1)),
                                               "digest": .string(digest), "length": .int(Int64(length)),
                                               "stub": true]]
                for (other, stub) in body["_attachments"]?.objectValue ?? [:] where other != name { atts[other] = stub }
                body["_attachments"] = .object(atts)
                var write = RevisionWrite(id: id, body: body, mode: .edit(parent: rev))
                if let upload { write.stagedBlobs = [upload.blob] }
                if let stored {
                    write.blobs = [(stored.digest, stored.bytes)]
                    if let encoding = stored.encoding { write.blobEncodings[stored.digest] = encoding }
                }
                return try c.write([write], as: writer)[0].get()
            }
            let location = call.absoluteURL("/" + call.segments[0] + "/" + Call.escapePathSegment(id) + "/"
                                            + name.split(separator: "/", omittingEmptySubsequences: false)
                                                .map { Call.escapePathSegment(String($0)) }.joined(separator: "/"))
            return Reply.json(call.quorumStatus(.created), ["ok": true, "id": .string(id), "rev": .string(newRev.description)],
                              headers: [.eTag: "\"\(newRev)\"", .location: location])
        case .delete:
            guard let revText = call.query["rev"] ?? DocumentRoutes.ifMatch(call) else { throw CouchError.conflict }
            guard let rev = RevID(revText) else { throw CouchError.badRequest("Invalid rev format") }
            let writer = call.writer
            let newRev: RevID = try await blocking {
                guard let record = try c.record(id: id, withTree: true) else { throw CouchError.notFound("missing") }
                guard let revision = record.revision(rev), case .object(var body) = try JSON.parse(revision.body) else {
                    // CouchDB's answer for a revision the document doesn't have.
                    throw CouchError(.conflict, "not_found", "missing_rev")
                }
                guard var atts = body["_attachments"]?.objectValue, atts[name] != nil else {
                    throw CouchError.notFound("Document is missing attachment")
                }
                atts.removeValue(forKey: name)
                if atts.isEmpty { body.removeValue(forKey: "_attachments") } else { body["_attachments"] = .object(atts) }
                return try c.write([RevisionWrite(id: id, body: body, mode: .edit(parent: rev))], as: writer)[0].get()
            }
            // CouchDB answers an attachment delete with 200 whatever `w` asked for.
            return Reply.json(.ok, ["ok": true, "id": .string(id), "rev": .string(newRev.description)])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    /// Answers a GET or HEAD of an attachment as CouchDB does: the ETag is the digest (`If-None-Match` → 304); a
    /// gzip-stored attachment goes out compressed (`Content-Encoding: gzip`) to clients that accept gzip and
    /// decoded to others; `Range` asks for byte ranges of an attachment stored as it is (206, `multipart/byteranges`
    /// for several, 416 when none can be served) and is ignored for a compressed one, as in CouchDB.
    static func read(_ call: Call, meta: JSONObject, stored: Database.StoredBlob) throws -> Response {
        let (etag, common) = Self.headers(meta)
        var headers = common
        if let match = call.header(.ifNoneMatch), ETags.matches(match, etag) {
            return Response(status: .notModified, headers: [.eTag: etag, .contentLength: "0"])
        }
        let acceptsGzip = acceptsGzip(call.header(.acceptEncoding))
        // Ranges are of attachments stored as they are: a compressed one is always sent whole (CouchDB's
        // `Accept-Ranges: none`, the `Range` ignored).
        let compressed = stored.encoding == "gzip"
        let range = compressed ? nil : call.header(.range)
        var data: [UInt8]
        if compressed { headers[.acceptRanges] = "none" }
        if compressed && acceptsGzip {
            headers[.contentEncoding] = "gzip"
            data = stored.data
        } else {
            data = try stored.identity()
        }
        if let range, let ranges = ByteRanges.parse(range, length: data.count) {
            guard !ranges.isEmpty else {
                return Response(status: .rangeNotSatisfiable, headers: [.contentRange: "bytes */\(data.count)"])
            }
            if ranges.count == 1 {
                let r = ranges[0]
                headers[.contentRange] = "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(data.count)"
                data = Array(data[r])
                if call.method == .head {
                    headers[.contentLength] = String(data.count)
                    return Response(status: .partialContent, headers: headers)
                }
                return Response(status: .partialContent, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
            }
            return byteRanges(ranges, of: data.count, call: call, meta: meta, headers: headers, database: nil) {
                .bytes(Array(data[$0]))
            }
        }
        if call.method == .head {
            headers[.contentLength] = String(data.count)
            return Response(status: .ok, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension AttachmentRoutes {
    /// Where an attachment's body is: small enough to answer from memory, or to be read a piece at a time.
    enum Found: Sendable {
        case small(Database.StoredBlob)
        case large(Int, String?)
    }

    /// Whether an `Accept-Encoding` header takes gzip: named (or `*`) with a quality above 0 (`gzip;q=0` refuses it).
    static func acceptsGzip(_ header: String?) -> Bool {
        guard let header else { return false }
        var star = false
        for item in header.lowercased().split(separator: ",") {
            let fields = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let coding = fields.first else { continue }
            let quality = fields.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            if coding == "gzip" || coding == "x-gzip" { return quality > 0 }
            if coding == "*" { star = quality > 0 }
        }
        return star
    }

    /// An attachment's ETag and the headers every answer with its body carries.
    static func headers(_ meta: JSONObject) -> (etag: String, headers: HTTPFields) {
        let contentType = meta["content_type"]?.stringValue ?? "application/octet-stream"
        // CouchDB's attachment ETag: the digest's base64 MD5, without its `md5-` prefix.
        let digest = meta["digest"]?.stringValue ?? ""
        let etag = "\"\(digest.hasPrefix("md5-") ? String(digest.dropFirst(4)) : digest)\""
        let headers: HTTPFields = [.contentType: contentType, .eTag: etag,
                                   .acceptRanges: "bytes", .cacheControl: "must-revalidate",
                                   // As CouchDB's [csp] attachments_header_value: an HTML attachment opened in a
                                   // browser runs no script on the node's origin.
                                   HTTPField.Name("Content-Security-Policy")!: "sandbox",
                                   HTTPField.Name("X-Content-Type-Options")!: "nosniff"]
        return (etag, headers)
    }
}

extension AttachmentRoutes {
    /// Several ranges of an attachment stored as it is, `length` bytes long: 206 with a `multipart/byteranges`
    /// body, a part per range with its `Content-Type` and `Content-Range` (as CouchDB's). `part` gives a range's
    /// bytes: in memory, or (a large attachment) a payload read from `database` as the body is written.
    static func byteRanges(_ ranges: [Range<Int>], of length: Int, call: Call, meta: JSONObject, headers: HTTPFields,
                           database: Database?, part: (Range<Int>) -> MultipartBody.Segment) -> Response {
        let contentType = meta["content_type"]?.stringValue ?? "application/octet-stream"
        var body = MultipartBody()
        for r in ranges {
            body.appendPart(headers: [("Content-Type", contentType),
                                      ("Content-Range", "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(length)")], part(r))
        }
        body.close()
        var headers = headers
        headers[.contentType] = "multipart/byteranges; boundary=\(body.boundary)"
        if call.method == .head {
            headers[.contentLength] = String(body.length)
            return Response(status: .partialContent, headers: headers)
        }
        return Response(status: .partialContent, headers: headers, body: body.responseBody(database))
    }
}

/// HTTP byte ranges (`Range: bytes=0-9, 20-, -5`), resolved against a length.
enum ByteRanges {
    /// The half-open ranges asked for; nil when the header isn't a `bytes=` range (then it is ignored, and the
    /// whole body sent); empty when no range overlaps the body (416). A range covering the whole body is served
    /// as one range.
    ///
    /// As CouchDB's `parse_ranges`: a set with an open `0-` range, or of 10 ranges or more, is the whole body (nil);
    /// an inverted range (`5-3`) can't be served (empty).
    static func parse(_ header: String, length: Int) -> [Range<Int>]? {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes=") else { return nil }
        let specs = text.dropFirst(6).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if specs.count >= 10 || specs.contains("0-") { return nil }
        var ranges: [Range<Int>] = []
        for spec in specs {
            let part = spec.trimmingCharacters(in: .whitespaces)
            guard let dash = part.firstIndex(of: "-") else { return nil }
            let first = part[..<dash], last = part[part.index(after: dash)...]
            if first.isEmpty {
                guard let suffix = Int(last), suffix > 0 else { return nil }
                if length > 0 { ranges.append(max(0, length - suffix)..<length) }
            } else {
                guard let start = Int(first) else { return nil }
                let end = last.isEmpty ? length - 1 : (Int(last) ?? -1)
                guard end >= start else { return [] }
                if start < length { ranges.append(start..<(min(end, length - 1) + 1)) }
            }
        }
        return ranges
    }
}
