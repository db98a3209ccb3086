import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeStore

/// `/{db}/{docid}`: read, create/update, delete documents.
enum DocumentRoutes {
    static func handle(_ call: inout Call, _ target: Keyspace, id: String) async throws -> Response {
        let (db, c) = try target.open(call.node)
        if db.name == call.node.configuration.security.authenticationDB, !call.isAdmin, call.access < .admin,
           [.get, .head, .delete].contains(call.method), UserDirectory.userName(ofDocument: id) != call.user {
            // Nobody reads or deletes another user's document (nor learns whether it exists).
            throw CouchError.notFound("missing")
        }
        if db.isPartitioned {
            do { try DocumentIDs.requirePartition(id) } catch { throw CouchError.from(error) }
        }
        switch call.method {
        case .get, .head: return try await get(call, db, c, id: id)
        case .put: return try await put(&call, db, c, id: id)
        case .delete: return try await delete(call, c, id: id)
        case DocumentRoutes.copyMethod: return try await copy(call, db, c, id: id)
        case .post: return try await formUpload(&call, db, c, id: id)
        default: throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    // MARK: Read

    static func get(_ call: Call, _ db: Database, _ c: SetteeStore.Collection, id: String) async throws -> Response {
        let q = call.query
        let output = try DocumentOutput(q)
        let requestedRev: RevID? = try q["rev"].map { s in
            guard let r = RevID(s) else { throw CouchError.badRequest("Invalid rev format") }
            return r
        }
        if q.has("open_revs") {
            return try await openRevs(call, db, c, id: id, output: output)
        }
        if (output.attachments || !output.attsSince.isEmpty) && call.accepts("multipart/related") {
            return try await relatedDocument(call, db, c, id: id, rev: requestedRev, output: output)
        }
        let needTree = output.needsTree || requestedRev != nil
        let metrics = call.node.metrics
        let reader = call.reader
        // A point read takes microseconds: it runs inline on the request's task (Swift's cooperative pool,
        // never a NIO event loop) rather than paying two thread hops to the store's queue.
        let (bytes, rev): ([UInt8], RevID) = try pointRead {
            let archived = needTree ? output.archived(requestedRev.map { [$0] } ?? []) : nil
            guard let record = try c.record(id: id, withTree: needTree, archived: archived) else {
                throw CouchError.notFound("missing")
            }
            let rev = requestedRev ?? record.revID
            if requestedRev == nil && record.deleted { throw CouchError.notFound("deleted") }
            guard let revision = record.revision(rev) else { throw CouchError.notFound("missing") }
            try SyncGate.checkRevision(reader, id: id, rev: rev, in: c)
            metrics.documentsRead(1)
            return (try output.bytes(record, rev: rev, body: revision.body, deleted: revision.deleted, database: db), rev)
        }
        // CouchDB sends no ETag when the answer shows conflicts: it changes when they are resolved, the rev doesn't.
        let etag = output.conflicts || output.deletedConflicts ? nil : "\"\(rev)\""
        if let etag, call.header(.ifNoneMatch).map({ ETags.matches($0, etag) }) == true {
            return Response(status: .notModified, headers: [.eTag: etag, .contentLength: "0"])
        }
        var headers = HTTPFields()
        if let etag { headers[.eTag] = etag }
        if call.method == .head {
            // Same length as the GET body, which ends with a newline.
            headers[.contentType] = "application/json"
            headers[.contentLength] = String(bytes.count + 1)
            return Response(status: .ok, headers: headers)
        }
        return Reply.rawLine(.ok, bytes, headers: headers)
    }

    /// `open_revs=all|[…]`: JSON array of `{"ok": doc}` / `{"missing": rev}`, or `multipart/mixed` when asked.
    static func openRevs(_ call: Call, _ db: Database, _ c: SetteeStore.Collection, id: String,
                         output: DocumentOutput) async throws -> Response {
        let q = call.query
        var requested: [RevID]?
        if q["open_revs"] != "all" {
            guard let list = try q.json("open_revs")?.arrayValue else {
                throw CouchError.badRequest("open_revs must be \"all\" or a JSON array of revisions")
            }
            requested = try list.map { v in
                guard let s = v.stringValue, let r = RevID(s) else { throw CouchError.badRequest("Invalid rev format") }
                return r
            }
        }
        let latest = try q.bool("latest")
        let wanted = requested
        // As CouchDB (mochiweb's accepts_content_type): multipart/mixed when the client accepts it, or accepts
        // anything (`*/*`, `multipart/*`) without asking for JSON by name.
        let multipart = call.accepts("multipart/mixed")
            || ((call.accepts("*/*") || call.accepts("multipart/*")) && !call.accepts("application/json"))
        var output = output
        // A multipart answer always carries attachments, only those newer than `atts_since` when it is given.
        if multipart && output.attsSince.isEmpty { output.attachments = true }
        output.attachmentsFollow = multipart
        let finalOutput = output
        let sendEncoded = output.attEncodingInfo || call.header(HTTPField.Name("X-CouchDB-Send-Encoded-Atts")!) == "true"
        let reader = call.reader
        let (results, body): ([JSON], MultipartBody?) = try await blocking {
            let results: [JSON]
            if let record = try c.record(id: id, withTree: true, archived: finalOutput.archived(wanted ?? [])) {
                let revisions = DocumentOutput.openRevs(record, requested: wanted, latest: latest)
                // A reader limited to channels gets only the revisions in them; the others are missing to it.
                let visible = try reader.map { r in
                    try ChannelIndex.of(db).visibleRevisions(revisions.map { .init(id: id, rev: $0.0) }, in: c, to: r)
                }
                results = try revisions.map { rev, found in
                    guard found, let revision = record.revision(rev),
                          visible?.contains(.init(id: id, rev: rev)) ?? true else { return ["missing": .string(rev.description)] }
                    return ["ok": .object(try finalOutput.render(record, rev: rev, body: revision.body,
                                                                 deleted: revision.deleted, database: db))]
                }
            } else if let wanted {
                results = wanted.map { ["missing": .string($0.description)] }
            } else {
                throw CouchError.notFound("missing")
            }
            guard multipart else { return (results, nil) }
            var body = MultipartBody()
            for result in results {
                if case .object(let doc)? = result["ok"] {
                    // A revision with attachment bytes is a nested multipart/related part, as CouchDB sends it.
                    if MultipartDocuments.sendsAttachments(doc) {
                        let related = try MultipartDocuments.related(doc, database: db, sendEncoded: sendEncoded)
                        body.appendPart(headers: [("Content-Type", "multipart/related; boundary=\"\(related.boundary)\"")],
                                        related)
                    } else {
                        body.appendPart(headers: [("Content-Type", "application/json")], .bytes(JSON.object(doc).serializedBytes))
                    }
                } else {
                    body.appendPart(headers: [("Content-Type", "application/json; error=\"true\"")], .bytes(result.serializedBytes))
                }
            }
            body.close()
            return (results, body)
        }
        guard let body else { return Reply.json(.ok, .array(results)) }
        return Response(status: .ok, headers: [.contentType: "multipart/mixed; boundary=\"\(body.boundary)\""],
                        body: body.responseBody(db))
    }

    /// `GET /{db}/{docid}?attachments=true` (or `atts_since`) with `Accept: multipart/related`: the document and
    /// its attachments as one `multipart/related` body (plain JSON when no attachment bytes go).
    static func relatedDocument(_ call: Call, _ db: Database, _ c: SetteeStore.Collection, id: String, rev: RevID?,
                                output: DocumentOutput) async throws -> Response {
        let sendEncoded = output.attEncodingInfo || call.header(HTTPField.Name("X-CouchDB-Send-Encoded-Atts")!) == "true"
        var following = output
        following.attachmentsFollow = true
        let output = following
        let reader = call.reader
        let (doc, rendered): (JSONObject, MultipartBody?) = try await blocking {
            guard let record = try c.record(id: id, withTree: true, archived: output.archived(rev.map { [$0] } ?? [])) else {
                throw CouchError.notFound("missing")
            }
            let wanted = rev ?? record.revID
            if rev == nil && record.deleted { throw CouchError.notFound("deleted") }
            guard let revision = record.revision(wanted) else { throw CouchError.notFound("missing") }
            try SyncGate.checkRevision(reader, id: id, rev: wanted, in: c)
            let doc = try output.render(record, rev: wanted, body: revision.body, deleted: revision.deleted, database: db)
            guard MultipartDocuments.sendsAttachments(doc) else { return (doc, nil) }
            return (doc, try MultipartDocuments.related(doc, database: db, sendEncoded: sendEncoded))
        }
        guard let rendered else { return Reply.json(.ok, .object(doc)) }  // no attachment bytes to send
        return Response(status: .ok, headers: [.contentType: "multipart/related; boundary=\"\(rendered.boundary)\""],
                        body: rendered.responseBody(db))
    }

    // MARK: Write

    static func put(_ call: inout Call, _ db: Database, _ c: SetteeStore.Collection, id: String) async throws -> Response {
        let contentType = call.header(.contentType)?.lowercased() ?? ""
        var doc: JSONObject
        var follows: [String: FollowingAttachment] = [:]
        defer { for body in follows.values { body.discard() } }
        if contentType.hasPrefix("multipart/related") && AttachmentStreaming.streams(call) {
            // Large (or of unknown length): staged, never whole in memory.
            (doc, follows) = try await MultipartUpload.receive(call, contentType: call.header(.contentType) ?? "")
        } else if contentType.hasPrefix("multipart/related") {
            let bytes = try await call.bodyBytes()
            (doc, follows) = try multipartDocument(bytes, contentType: call.header(.contentType) ?? "", call: call)
        } else {
            let bytes = try await call.bodyBytes()
            if bytes.count > call.node.configuration.maxDocumentSize { throw CouchError.tooLarge }
            guard case .object(let o) = try call.parseJSON(bytes) else {
                throw CouchError.badRequest("Document must be a JSON object")
            }
            doc = o
        }
        let given = call.query["rev"] ?? ifMatch(call)
        if let given, let body = doc["_rev"], body.stringValue != given {
            throw CouchError.badRequest(call.query["rev"] != nil
                ? "Document rev from request body and query string have different values"
                : "Document rev and etag have different values")
        }
        if doc["_rev"] == nil, let given { doc["_rev"] = .string(given) }
        let newEdits = try call.query.bool("new_edits", default: true)
        return try await save(call, c, doc: doc, id: id, newEdits: newEdits, follows: follows)
    }

    /// `POST /{db}`: create a document, generating an id when the body has none.
    static func post(_ call: inout Call, _ target: Keyspace) async throws -> Response {
        let (_, c) = try target.open(call.node)
        let bytes = try await call.bodyBytes()
        if bytes.count > call.node.configuration.maxDocumentSize { throw CouchError.tooLarge }
        guard case .object(let doc) = try call.parseJSON(bytes) else {
            throw CouchError.badRequest("Document must be a JSON object")
        }
        if let given = doc["_id"], given.stringValue == nil {
            throw CouchError(.badRequest, "illegal_docid", "Document id must be a string")
        }
        let id = doc["_id"]?.stringValue ?? Hex.random(bytes: 16)
        return try await save(call, c, doc: doc, id: id, newEdits: true, follows: [:])
    }

    static func save(_ call: Call, _ c: SetteeStore.Collection, doc: JSONObject, id: String, newEdits: Bool,
                     follows: [String: FollowingAttachment]) async throws -> Response {
        if id.hasPrefix("_local/") { throw CouchError.badRequest("Use /{db}/_local/{id} for local documents") }
        try Auth.checkDocumentWrite(call, id: id)
        let input = try DocumentInput.parse(doc, id: id)
        let batch = call.query["batch"] == "ok"
        let metrics = call.node.metrics
        let writer = call.writer
        let maxAttachment = call.node.configuration.maxAttachmentSize
        let compression = call.node.configuration.attachments
        let reader = call.reader
        let rev: RevID? = try await blocking {
            let write = try DocumentInput.write(input, newEdits: newEdits, follows: follows, collection: c,
                                                 maxAttachmentSize: maxAttachment, compression: compression,
                                                 reader: reader)
            switch try c.write([write], as: writer)[0] {
            case .success(let rev):
                metrics.documentsWritten(1)
                return rev
            case .failure(let error) where batch && error.code == .conflict:
                // Batch mode has already said "accepted" in CouchDB by the time a conflict is found; the
                // conflicting write is dropped, as there.
                return nil
            case .failure(let error):
                throw error
            }
        }
        let location = call.absoluteURL("/" + call.segments[0] + "/" + Call.escapePathSegment(id))
        if batch {
            // CouchDB's batch mode answers before the write is durable, without the new revision.
            return Reply.json(.accepted, ["ok": true, "id": .string(id)], headers: [.location: location])
        }
        guard let rev else { throw CouchError.conflict }
        return Reply.json(call.quorumStatus(.created), ["ok": true, "id": .string(id), "rev": .string(rev.description)],
                          headers: [.eTag: "\"\(rev)\"", .location: location])
    }

    static func delete(_ call: Call, _ c: SetteeStore.Collection, id: String) async throws -> Response {
        guard let revText = call.query["rev"] ?? ifMatch(call) else {
            let exists = try await blocking { try c.record(id: id).map { !$0.deleted } ?? false }
            throw exists ? CouchError.conflict : CouchError.notFound("missing")
        }
        guard let parent = RevID(revText) else { throw CouchError.badRequest("Invalid rev format") }
        try Auth.checkDocumentWrite(call, id: id)
        let writer = call.writer
        let rev: RevID = try await blocking {
            guard try c.record(id: id) != nil else { throw CouchError.notFound("missing") }
            let write = RevisionWrite(id: id, body: [:], deleted: true, mode: .edit(parent: parent))
            return try c.write([write], as: writer)[0].get()
        }
        return Reply.json(call.quorumStatus(.ok), ["ok": true, "id": .string(id), "rev": .string(rev.description)],
                          headers: [.eTag: "\"\(rev)\""])
    }

    static let copyMethod = HTTPRequest.Method("COPY")!

    /// `POST /{db}/{docid}` with `multipart/form-data` (an HTML form): the `_rev` field names the revision to
    /// update and each `_attachments` file field adds an attachment, as CouchDB's form upload. Like CouchDB it
    /// requires a `Referer` on this host, so another site's page can't submit the form as a signed-in user.
    static func formUpload(_ call: inout Call, _ db: Database, _ c: SetteeStore.Collection, id: String) async throws -> Response {
        let contentType = call.header(.contentType) ?? ""
        guard contentType.lowercased().hasPrefix("multipart/form-data"), let boundary = Multipart.boundary(fromContentType: contentType) else {
            throw CouchError(.unsupportedMediaType, "bad_content_type", "Content-Type must be multipart/form-data")
        }
        guard let referer = call.header(HTTPField.Name("Referer")!) else { throw CouchError.badRequest("Referer header required.") }
        let host = call.request.head.authority ?? call.header(HTTPField.Name("Host")!) ?? ""
        guard URLComponents(string: referer).map({ c in c.host.map { $0 + (c.port.map { ":\($0)" } ?? "") } == host }) == true else {
            throw CouchError.badRequest("Referer header must match host.")
        }
        let bytes = try await call.bodyBytes()
        let parts: [MultipartPart]
        do { parts = try Multipart.parse(bytes, boundary: boundary) } catch {
            throw CouchError.badRequest("Invalid multipart/form-data body: \(error)")
        }
        var rev: String?
        var files: [(name: String, type: String, data: [UInt8])] = []
        for part in parts {
            guard let disposition = part.header("Content-Disposition"),
                  let field = Multipart.parameter(named: "name", in: disposition) else { continue }
            if field == "_rev" {
                rev = String(decoding: part.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            } else if field == "_attachments", let name = Multipart.filename(fromContentDisposition: disposition), !name.isEmpty {
                files.append((name, part.header("Content-Type") ?? "application/octet-stream", part.body))
            }
        }
        var doc: JSONObject = [:]
        let current: JSONObject? = try await blocking {
            guard let record = try c.record(id: id), !record.deleted, case .object(let body) = try JSON.parse(record.body) else {
                return nil
            }
            return body
        }
        if let current { doc = current }
        if let rev { doc["_rev"] = .string(rev) }
        var atts = doc["_attachments"]?.objectValue ?? [:]
        for (name, meta) in atts {
            guard case .object(var m) = meta else { continue }
            m["stub"] = true
            atts[name] = .object(m)
        }
        for file in files {
            atts[file.name] = ["content_type": .string(file.type), "data": .string(Base64.encode(file.data))]
        }
        if !atts.isEmpty { doc["_attachments"] = .object(atts) }
        return try await save(call, c, doc: doc, id: id, newEdits: true, follows: [:])
    }

    /// `COPY /{db}/{docid}` with `Destination: newid` (or `newid?rev=R` to overwrite revision R): copies the
    /// document's current (or `?rev=`) revision, attachments included, to another id.
    static func copy(_ call: Call, _ db: Database, _ c: SetteeStore.Collection, id: String) async throws -> Response {
        guard let destination = call.header(HTTPField.Name("Destination")!), !destination.isEmpty else {
            throw CouchError.badRequest("Destination header is mandatory for COPY.")
        }
        if destination.contains("://") { throw CouchError.badRequest("Destination URL must be relative.") }
        var targetID = destination
        var targetRev: String?
        if let q = destination.firstIndex(of: "?") {
            targetID = String(destination[..<q])
            let options = QueryOptions(String(destination[destination.index(after: q)...]))
            targetRev = options["rev"]
        }
        targetID = targetID.removingPercentEncoding ?? targetID
        guard !targetID.isEmpty else { throw CouchError.badRequest("Destination header is mandatory for COPY.") }
        let requested: RevID? = try call.query["rev"].map { s in
            guard let r = RevID(s) else { throw CouchError.badRequest("Invalid rev format") }
            return r
        }
        try Auth.checkDocumentWrite(call, id: targetID)
        var withAttachments = try DocumentOutput(QueryOptions(nil))
        withAttachments.attachments = true
        let output = withAttachments
        let reader = call.reader
        let source: JSONObject = try await blocking {
            guard let record = try c.record(id: id, withTree: requested != nil,
                                            archived: requested.map { .revisions([$0]) }) else {
                throw CouchError.notFound("missing")
            }
            let rev = requested ?? record.revID
            if requested == nil && record.deleted { throw CouchError.notFound("deleted") }
            guard let revision = record.revision(rev), !revision.deleted else { throw CouchError.notFound("missing") }
            try SyncGate.checkRevision(reader, id: id, rev: rev, in: c)
            return try output.render(record, rev: rev, body: revision.body, deleted: false, database: db)
        }
        var doc = source
        doc["_id"] = .string(targetID)
        if let targetRev { doc["_rev"] = .string(targetRev) } else { doc.removeValue(forKey: "_rev") }
        doc.removeValue(forKey: "_revisions")
        return try await save(call, c, doc: doc, id: targetID, newEdits: true, follows: [:])
    }

    static func ifMatch(_ call: Call) -> String? {
        call.header(.ifMatch).map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\" ")) }
    }

    /// A `multipart/related` document upload: the JSON document first, then one part per `follows` attachment.
    static func multipartDocument(_ bytes: [UInt8], contentType: String, call: Call) throws -> (JSONObject, [String: FollowingAttachment]) {
        guard let boundary = Multipart.boundary(fromContentType: contentType) else {
            throw CouchError.badRequest("multipart/related without a boundary")
        }
        let parts: [MultipartPart]
        do { parts = try Multipart.parse(bytes, boundary: boundary) } catch {
            throw CouchError.badRequest("Invalid multipart body: \(error)")
        }
        guard let first = parts.first else { throw CouchError.badRequest("Empty multipart body") }
        if first.body.count > call.node.configuration.maxDocumentSize { throw CouchError.tooLarge }
        guard case .object(let doc) = try call.parseJSON(first.body) else {
            throw CouchError.badRequest("Document must be a JSON object")
        }
        let rest = Array(parts.dropFirst())
        let indexes = try followParts(of: doc, dispositions: rest.map { $0.header("Content-Disposition") })
        return (doc, indexes.mapValues { .bytes(rest[$0].body) })
    }

    /// Which part after the document holds each `follows` attachment (an index into the parts after the
    /// document): the part whose `Content-Disposition` names it, else the unnamed parts in the attachments' order.
    /// Parts no attachment claims are ignored.
    /// - Throws: 400 when an attachment follows but no part is left for it.
    static func followParts(of doc: JSONObject, dispositions: [String?]) throws -> [String: Int] {
        let followNames = (doc["_attachments"]?.objectValue ?? [:]).compactMap { name, meta in
            meta["follows"]?.boolValue == true ? name : nil
        }
        var follows: [String: Int] = [:]
        var unnamed: [Int] = []
        for (index, disposition) in dispositions.enumerated() {
            if let disposition, let name = Multipart.filename(fromContentDisposition: disposition), followNames.contains(name) {
                follows[name] = index
            } else {
                unnamed.append(index)
            }
        }
        var unnamedIterator = unnamed.makeIterator()
        for name in followNames where follows[name] == nil {
            guard let index = unnamedIterator.next() else {
                throw CouchError.badRequest("Attachment \(name) follows but its part is missing")
            }
            follows[name] = index
        }
        return follows
    }
}
