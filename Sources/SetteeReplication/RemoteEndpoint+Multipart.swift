import Foundation
import NIOCore
import NIOHTTP1
import SetteeCore
import SetteeStore

/// Attachments through a remote peer as CouchDB's replicator moves them: read with `open_revs` as
/// `multipart/mixed` (each revision with attachment bodies a `multipart/related` part, bodies as the source stores
/// them: `att_encoding_info=true`), written with `PUT /{db}/{docid}?new_edits=false` as `multipart/related`. A
/// gzip-stored attachment stays gzip end to end, and no body is base64-encoded on the way.
extension RemoteEndpoint {
    /// Revisions read at most this many at a time, one request each.
    static let openRevsConcurrency = 8

    /// Whether a revision read without attachment bodies has attachments the target lacks: newer (`revpos`) than
    /// the newest of its ancestors the target has (`atts_since`).
    static func lacksAttachmentBodies(_ revision: ReplicatedRevision, attsSince: [RevID]) -> Bool {
        guard case .object(let atts)? = revision.body["_attachments"], !atts.isEmpty else { return false }
        let known = Set(revision.history)
        let knownGeneration = attsSince.filter { known.contains($0) }.map(\.generation).max() ?? 0
        return atts.contains { _, meta in (meta["revpos"]?.intValue).map { $0 > knownGeneration } ?? true }
    }

    /// Reads each request's revisions with their attachments, several requests at once.
    func openRevs(_ requests: [FetchRequest]) async throws -> [ReplicatedRevision] {
        try await concurrently(requests) { try await self.openRevs($0) }
    }

    /// `GET /{db}/{docid}?open_revs=[…]&revs=true&latest=true&attachments=true&att_encoding_info=true`, asking for
    /// `multipart/mixed` (a peer that answers JSON is read as JSON, its attachments inline).
    func openRevs(_ request: FetchRequest) async throws -> [ReplicatedRevision] {
        var query: [(String, String)] = [("revs", "true"), ("latest", "true"), ("attachments", "true"),
                                         ("att_encoding_info", "true"),
                                         ("open_revs", JSON.array(request.revs.map { .string($0.description) }).jsonString)]
        if !request.attsSince.isEmpty {
            query.append(("atts_since", JSON.array(request.attsSince.map { .string($0.description) }).jsonString))
        }
        var r = try await send(.GET, "/" + Self.escapeDocID(request.id), query: query,
                               accept: "multipart/mixed, application/json;q=0.5", stageMultipart: true)
        if r.status == 404 { return [] }
        guard (200..<300).contains(r.status) else { throw error(for: r, "GET \(request.id)?open_revs") }
        if let staged = r.staged {
            // A large answer: parsed where it lies, its large attachment bodies copied into files of their own.
            defer { unlink(staged.path) }
            guard staged.length > 0 else {
                throw ReplicationError(.transient, "malformed multipart open_revs answer for \(request.id): empty")
            }
            let contentType = r.contentType ?? "", id = request.id, directory = Self.stagingDirectory
            // (Off the async threads: the scan and the copies are file work, up to the answer's size.)
            return try await Database.offload {
                let file = try MappedFile(path: staged.path, length: staged.length)
                return try Self.revisions(fromMixed: file.bytes, contentType: contentType, id: id, staging: (file, directory))
            }
        }
        if let contentType = r.contentType, contentType.lowercased().hasPrefix("multipart/") {
            // (Handed over, not shared: the parser lets go of the whole answer once it is split into parts.)
            var body = r.body
            r.body = []
            return try Self.revisions(fromMixed: &body, contentType: contentType, id: request.id)
        }
        guard case .array(let entries) = try parse(r.body) else {
            throw ReplicationError(.transient, "open_revs response is not an array from \(urlString)")
        }
        return try entries.compactMap { entry in
            guard case .object(let doc)? = entry["ok"] else { return nil }
            return try Self.revision(from: doc)
        }
    }

    /// The revisions of a `multipart/mixed` `open_revs` answer held in memory (``revisions(fromMixed:contentType:id:staging:)``).
    static func revisions(fromMixed body: inout [UInt8], contentType: String, id: String) throws -> [ReplicatedRevision] {
        let held = body
        body = []
        return try held.withUnsafeBufferPointer { try revisions(fromMixed: $0, contentType: contentType, id: id, staging: nil) }
    }

    /// The revisions of a `multipart/mixed` `open_revs` answer: JSON parts (a revision without bodies to send,
    /// or `{"missing": rev}`) and `multipart/related` parts (a revision and its attachment bodies). With `staging`
    /// (the answer in a mapped file), attachment bodies larger than ``stagedAttachmentThreshold`` are copied into
    /// staging files of their own a megabyte at a time instead of into memory.
    static func revisions(fromMixed buffer: UnsafeBufferPointer<UInt8>, contentType: String, id: String,
                          staging: (file: MappedFile, directory: String)?) throws -> [ReplicatedRevision] {
        func malformed(_ detail: String) -> ReplicationError {
            ReplicationError(.transient, "malformed multipart open_revs answer for \(id): \(detail)")
        }
        guard let boundary = Multipart.boundary(fromContentType: contentType) else { throw malformed("no boundary") }
        let parts: [MultipartSpan]
        do { parts = try Multipart.scan(buffer, boundary: boundary) } catch { throw malformed("\(error)") }
        var out: [ReplicatedRevision] = []
        for part in parts {
            let type = (part.header("Content-Type") ?? "application/json").lowercased()
            if type.hasPrefix("multipart/related") {
                guard let inner = Multipart.boundary(fromContentType: part.header("Content-Type") ?? "") else {
                    throw malformed("a related part without a boundary")
                }
                let related: [MultipartSpan]
                do {
                    // (Found in the part's bytes, then placed in the whole answer's.)
                    related = try Multipart.scan(UnsafeBufferPointer(rebasing: buffer[part.body]), boundary: inner).map {
                        MultipartSpan(headers: $0.headers, body: ($0.body.lowerBound + part.body.lowerBound)..<($0.body.upperBound + part.body.lowerBound))
                    }
                } catch { throw malformed("\(error)") }
                out.append(try revision(fromRelated: related, in: buffer, id: id, staging: staging))
            } else {
                guard case .object(let doc) = try JSON.parse(Array(buffer[part.body])) else { throw malformed("a JSON part is not an object") }
                if doc["missing"] != nil || doc["error"] != nil { continue }
                // (CouchDB sends a revision bare here; a peer may wrap it as the JSON answer does.)
                if case .object(let ok)? = doc["ok"] { out.append(try revision(from: ok)) } else { out.append(try revision(from: doc)) }
            }
        }
        return out
    }

    /// Attachment bodies larger than this, in an answer staged to a file, are staged too rather than read into memory.
    static var stagedAttachmentThreshold: Int { StagedAttachment.threshold }

    /// A revision from its `multipart/related` parts in `buffer`: the document (attachments marked
    /// `"follows": true`), then one part per such attachment, matched by filename (or in the document's order).
    /// Each body is kept as sent — with its `encoding` when the source stores it encoded — and checked against the
    /// length the stub gives.
    static func revision(fromRelated parts: [MultipartSpan], in buffer: UnsafeBufferPointer<UInt8>, id: String,
                         staging: (file: MappedFile, directory: String)?) throws -> ReplicatedRevision {
        func malformed(_ detail: String) -> ReplicationError {
            ReplicationError(.transient, "malformed multipart revision of \(id): \(detail)")
        }
        guard let first = parts.first, case .object(var doc) = try JSON.parse(Array(buffer[first.body])) else {
            throw malformed("the first part is not a JSON document")
        }
        var byName: [String: MultipartSpan] = [:]
        var unnamed: [MultipartSpan] = []
        for part in parts.dropFirst() {
            if let name = part.header("Content-Disposition").flatMap(Multipart.filename(fromContentDisposition:)) {
                byName[name] = part
            } else {
                unnamed.append(part)
            }
        }
        var blobs: [String: [UInt8]] = [:]
        var staged: [String: StagedAttachment] = [:]
        var encodings: [String: String] = [:]
        if case .object(var atts)? = doc["_attachments"] {
            for (name, meta) in atts {
                guard case .object(var m) = meta, m["follows"]?.boolValue == true else { continue }
                guard let part = byName.removeValue(forKey: name) ?? (unnamed.isEmpty ? nil : unnamed.removeFirst()) else {
                    throw malformed("no part for attachment \(name)")
                }
                let count = part.body.count
                let encoding = m["encoding"]?.stringValue ?? part.header("Content-Encoding")
                if let encoding, encoding != "gzip" { throw malformed("attachment \(name) has an unknown encoding \(encoding)") }
                let declared = encoding == nil ? m["length"]?.intValue : (m["encoded_length"]?.intValue ?? nil)
                if let declared, declared != Int64(count) {
                    throw malformed("attachment \(name) is \(count) bytes, its stub says \(declared)")
                }
                // Addressed by the bytes as they will be stored (the digest CouchDB gives them too).
                let digest: String
                if let staging, count > stagedAttachmentThreshold {
                    let file = try StagingFile(directory: staging.directory, compressingAt: nil)
                    try staging.file.forEachPiece(of: part.body) { try file.append($0) }
                    let blob = try file.finish()
                    digest = blob.digest
                    staged[digest] = StagedAttachment(path: blob.path, length: blob.length)
                } else {
                    let bytes = Array(buffer[part.body])
                    digest = Database.attachmentDigest(bytes)
                    blobs[digest] = bytes
                }
                m.removeValue(forKey: "follows")
                m["digest"] = .string(digest)
                if encoding != nil {
                    encodings[digest] = "gzip"
                    m["encoding"] = "gzip"
                    m["encoded_length"] = .int(Int64(count))
                } else {
                    m.removeValue(forKey: "encoding")
                    m.removeValue(forKey: "encoded_length")
                    m["length"] = .int(Int64(count))
                }
                atts[name] = .object(m)
            }
            doc["_attachments"] = .object(atts)
        }
        var revision = try revision(from: doc)
        revision.attachments.merge(blobs) { a, _ in a }
        revision.stagedAttachments = staged
        revision.attachmentEncodings = encodings
        return revision
    }

    // MARK: Writing

    /// `PUT /{db}/{docid}?new_edits=false` with the revision and its attachment bodies in `multipart/related`.
    /// Returns the target's refusal of this document (validation, a bad stub, too large), or nil when stored.
    /// Staged bodies are sent from their files a megabyte at a time, never whole in memory.
    func putMultipart(_ revision: ReplicatedRevision) async throws -> DocumentFailure? {
        let body = try Self.multipartDocument(from: revision)
        let contentType = "multipart/related; boundary=\"\(body.boundary)\""
        let path = "/" + Self.escapeDocID(revision.id), query = [("new_edits", "false")]
        let r: Reply
        if body.isInMemory {
            r = try await send(.PUT, path, query: query, raw: (contentType, body.segments.flatMap { segment -> [UInt8] in
                if case .bytes(let b) = segment { b } else { [] }
            }))
        } else {
            r = try await send(.PUT, path, query: query, streamed: (contentType, MultipartSegments(body.segments)))
        }
        if (200..<300).contains(r.status) { return nil }
        if r.status == 413 {
            return DocumentFailure(id: revision.id, rev: revision.rev.description, error: "too_large",
                                   reason: "the document is larger than the target accepts")
        }
        // A refusal of this document (as `_bulk_docs` reports per row); anything else fails the batch.
        guard [400, 401, 403, 409, 412, 415, 417].contains(r.status),
              case .object(let o)? = try? JSON.parse(r.body), let error = o["error"]?.stringValue else {
            throw self.error(for: r, "PUT \(revision.id)?new_edits=false")
        }
        return DocumentFailure(id: revision.id, rev: revision.rev.description, error: error,
                               reason: o["reason"]?.stringValue ?? "")
    }

    /// The revision as CouchDB's replicator writes it: the document with `_revisions`, attachments whose bodies
    /// travel marked `"follows": true` (with `encoding` and `encoded_length` when sent encoded), then one part per
    /// such attachment in the document's order — in ``Multipart/write(_:boundary:)``'s layout, as segments: bytes,
    /// and the staged bodies' files.
    static func multipartDocument(from revision: ReplicatedRevision) throws -> MultipartSegments.Body {
        var doc = try document(from: revision, inline: false)
        var attachments: [(headers: [(name: String, value: String)], body: MultipartSegments.Body.Segment)] = []
        if case .object(var atts)? = doc["_attachments"] {
            for (name, meta) in atts {
                guard case .object(var m) = meta, let digest = m["digest"]?.stringValue else { continue }
                let body: MultipartSegments.Body.Segment
                if let data = revision.attachments[digest] {
                    body = .bytes(data)
                } else if let file = revision.stagedAttachments[digest] {
                    body = .payload(file)
                } else {
                    continue
                }
                m.removeValue(forKey: "stub")
                m["follows"] = true
                var headers: [(name: String, value: String)] = [
                    ("Content-Disposition", Multipart.contentDisposition(attachmentFilename: name)),
                    ("Content-Type", m["content_type"]?.stringValue ?? "application/octet-stream"),
                    ("Content-Length", String(body.length)),
                ]
                if let encoding = revision.attachmentEncodings[digest] {
                    m["encoding"] = .string(encoding)
                    m["encoded_length"] = .int(Int64(body.length))
                    headers.append(("Content-Encoding", encoding))
                } else {
                    m.removeValue(forKey: "encoding")
                    m.removeValue(forKey: "encoded_length")
                    m["length"] = .int(Int64(body.length))
                }
                atts[name] = .object(m)
                attachments.append((headers, body))
            }
            doc["_attachments"] = .object(atts)
        }
        var body = MultipartSegments.Body()
        body.appendPart(headers: [("Content-Type", "application/json")], .bytes(JSON.object(doc).serializedBytes))
        for attachment in attachments { body.appendPart(headers: attachment.headers, attachment.body) }
        body.close()
        return body
    }

    /// `body` over each item, at most ``openRevsConcurrency`` at a time; results in completion order.
    func concurrently<T: Sendable, R: Sendable>(_ items: [T], _ body: @escaping @Sendable (T) async throws -> [R]) async throws -> [R] {
        guard !items.isEmpty else { return [] }
        return try await withThrowingTaskGroup(of: [R].self) { group in
            var out: [R] = []
            var iterator = items.makeIterator()
            for _ in 0..<Self.openRevsConcurrency {
                guard let item = iterator.next() else { break }
                group.addTask { try await body(item) }
            }
            while let results = try await group.next() {
                out += results
                if let item = iterator.next() { group.addTask { try await body(item) } }
            }
            return out
        }
    }
}

/// A request body as segments — bytes, and staged attachment files read a megabyte at a time — sent as a stream
/// of known length. Each iteration reads the files again, so a request retried (a session signed in again) sends
/// the same bytes.
struct MultipartSegments: AsyncSequence, Sendable {
    typealias Body = SegmentedMultipartBody<StagedAttachment>
    typealias Segment = Body.Segment

    typealias Element = ByteBuffer
    let segments: [Segment]

    init(_ segments: [Segment]) { self.segments = segments }

    /// The body's length in bytes.
    var length: Int { segments.reduce(0) { $0 + $1.length } }

    func makeAsyncIterator() -> Iterator { Iterator(segments: segments) }

    struct Iterator: AsyncIteratorProtocol {
        let segments: [Segment]
        var index = 0
        var file: FileHandle?

        mutating func next() async throws -> ByteBuffer? {
            while index < segments.count {
                switch segments[index] {
                case .bytes(let b):
                    index += 1
                    if !b.isEmpty { return ByteBuffer(bytes: b) }
                case .payload(let staged):
                    if file == nil { file = try FileHandle(forReadingFrom: URL(fileURLWithPath: staged.path)) }
                    if let data = try file?.read(upToCount: 1 << 20), !data.isEmpty { return ByteBuffer(bytes: data) }
                    try file?.close()
                    file = nil
                    index += 1
                }
            }
            return nil
        }
    }
}
