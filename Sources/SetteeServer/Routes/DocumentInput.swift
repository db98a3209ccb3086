import Foundation
import SetteeCore
import SetteeIndex
import SetteeStore

/// Turning a CouchDB document (request JSON) into a store write: special fields, revision history,
/// attachments (inline base64, `follows` parts of a multipart body, stubs).
enum DocumentInput {
    /// A document from a request, its special fields separated from its body.
    struct Parsed: Sendable {
        var id: String
        var rev: RevID?
        var deleted: Bool
        var history: [RevID]?
        var body: JSONObject
        var attachments: JSONObject?
    }

    static let ignoredSpecials: Set<String> = ["_conflicts", "_deleted_conflicts", "_revs_info", "_local_seq", "_id", "_rev",
                                               "_deleted", "_revisions", "_attachments"]

    /// Splits special fields off a document. `id` overrides `_id` (the URL wins).
    static func parse(_ doc: JSONObject, id: String?) throws -> Parsed {
        var body = JSONObject()
        var parsed = Parsed(id: id ?? "", rev: nil, deleted: false, history: nil, body: [:], attachments: nil)
        if id == nil {
            guard let docID = doc["_id"] else { throw CouchError.badRequest("Document must have an _id") }
            guard let s = docID.stringValue else { throw CouchError(.badRequest, "illegal_docid", "Document id must be a string") }
            parsed.id = s
        }
        for (key, value) in doc {
            guard key.utf8.first == UInt8(ascii: "_") else {
                body[key] = value
                continue
            }
            switch key {
            case "_rev":
                guard let s = value.stringValue, let rev = RevID(s) else {
                    throw CouchError.badRequest("Invalid rev format")
                }
                parsed.rev = rev
            case "_deleted":
                parsed.deleted = value.boolValue ?? false
            case "_revisions":
                parsed.history = try history(value)
            case "_attachments":
                guard case .object(let atts) = value else { throw CouchError.badRequest("_attachments must be an object") }
                parsed.attachments = atts
            case _ where key.hasPrefix("_replication_"):
                body[key] = value  // replication state in `_replicator` documents
            default:
                guard ignoredSpecials.contains(key) else {
                    throw CouchError(.badRequest, "doc_validation", "Bad special document member: \(key)")
                }
            }
        }
        parsed.body = body
        return parsed
    }

    /// `_revisions: {"start": N, "ids": [newest…]}` → revision ids newest first (`RevID.history(fromRevisions:)`).
    static func history(_ value: JSON) throws -> [RevID] {
        do { return try RevID.history(fromRevisions: value) } catch { throw CouchError.from(error) }
    }

    /// Builds the store write for a parsed document.
    ///
    /// - Parameters:
    ///   - newEdits: CouchDB's `new_edits` (false: store the revision and history as given).
    ///   - follows: attachment bodies from a multipart request, by attachment name (in memory, or staged to files
    ///     the write copies into the database).
    ///   - collection: used to resolve attachment stubs against the parent revision.
    ///   - reader: a writer limited to channels (a database with a sync function): a stub must name an attachment
    ///     of a revision of this document the writer may read (its parent, or by digest one of its leaves), not
    ///     any body the database holds, so no hidden attachment can be copied into a revision it reads.
    static func write(_ doc: Parsed, newEdits: Bool, follows: [String: FollowingAttachment] = [:],
                      collection: SetteeStore.Collection, maxAttachmentSize: Int = .max,
                      compression: AttachmentSettings = AttachmentSettings(),
                      reader: ChannelIndex.Reader? = nil) throws -> RevisionWrite {
        let ownStubsOnly = reader != nil
        if newEdits, !doc.deleted, doc.id.hasPrefix("_design/"), doc.body["language"]?.stringValue ?? "javascript" != "erlang" {
            // Views are checked on write, as CouchDB checks them: SQL++ expressions parse, built-in reduces exist.
            // JavaScript functions are compiled when first used. (Replicated design documents — new_edits=false —
            // are stored as they are.)
            do { _ = try DesignView.all(in: doc.body, id: doc.id, checkingLanguage: false) } catch let e as SetteeError {
                throw CouchError(.badRequest, "invalid_design_doc", e.reason)
            }
            if doc.body["language"]?.stringValue == "query", case .object(let views)? = doc.body["views"] {
                // Mango's design documents: every view's map is an object (`{"fields": …}`), as CouchDB checks.
                for (name, view) in views where view["map"] != nil && view["map"]?.objectValue == nil {
                    throw CouchError(.badRequest, "invalid_design_doc", "views.\(name).map field must have object type")
                }
            }
            switch doc.body["options"]?["partitioned"] {
            case nil, .bool(false)?: break
            case .bool(true)?:
                if !collection.database.isPartitioned {
                    throw CouchError(.badRequest, "invalid_design_doc", "partitioned option cannot be true in a non-partitioned database.")
                }
            default:
                throw CouchError(.badRequest, "invalid_design_doc", "`options.partitioned` field must have boolean type")
            }
        }
        let mode: RevisionWrite.Mode
        var generation: Int
        if newEdits {
            mode = .edit(parent: doc.rev)
            generation = (doc.rev?.generation ?? 0) + 1
        } else {
            var history = doc.history ?? []
            if history.isEmpty {
                guard let rev = doc.rev else { throw CouchError.badRequest("new_edits=false requires _rev or _revisions") }
                history = [rev]
            } else if let rev = doc.rev, rev != history[0] {
                throw CouchError.badRequest("_rev does not match _revisions")
            }
            mode = .replicated(history: history)
            generation = history[0].generation
        }
        var body = doc.body
        var blobs: [(digest: String, data: [UInt8])] = []
        var staged: [StagedBlob] = []
        var encodings: [String: String] = [:]
        if let atts = doc.attachments, !atts.isEmpty {
            var out = JSONObject()
            var parentAtts: JSONObject?
            var stubDigests: [String] = []
            for (name, value) in atts {
                guard case .object(let meta) = value else { throw CouchError.badRequest("Attachment \(name) must be an object") }
                let contentType = meta["content_type"]?.stringValue ?? "application/octet-stream"
                if meta["stub"]?.boolValue == true {
                    if let digest = meta["digest"]?.stringValue, let length = meta["length"]?.intValue {
                        stubDigests.append(digest)
                        out[name] = ["content_type": .string(contentType), "revpos": meta["revpos"] ?? .int(Int64(generation)),
                                     "digest": .string(digest), "length": .int(length), "stub": true]
                        continue
                    }
                    if parentAtts == nil, let parent = doc.rev {
                        if let reader { try SyncGate.checkRevision(reader, id: doc.id, rev: parent, in: collection) }
                        parentAtts = try attachments(of: doc.id, rev: parent, collection: collection)
                    }
                    // A stub names the parent's attachment; a `revpos` it gives must be that attachment's.
                    guard let previous = parentAtts?[name],
                          meta["revpos"] == nil || meta["revpos"]?.intValue == previous["revpos"]?.intValue else {
                        throw CouchError(.preconditionFailed, "missing_stub", "Invalid attachment stub in \(doc.id) for \(name)")
                    }
                    out[name] = previous
                    continue
                }
                // New attachment data from an interactive write gets its name checked; stubs and replicated
                // revisions keep the names they already have (CouchDB peers may hold legacy names).
                if newEdits { try validateAttachmentName(name) }
                let revpos = newEdits ? Int64(generation) : (meta["revpos"]?.intValue ?? Int64(generation))
                func stub(digest: String, length: Int) -> JSON {
                    ["content_type": .string(contentType), "revpos": .int(revpos), "digest": .string(digest),
                     "length": .int(Int64(length)), "stub": true]
                }
                let data: [UInt8]
                if let encoded = meta["data"]?.stringValue {
                    guard let decoded = Base64.decode(encoded) else {
                        throw CouchError.badRequest("Invalid attachment data for \(name)")
                    }
                    data = decoded
                } else if meta["follows"]?.boolValue == true {
                    switch follows[name] {
                    case .bytes(let part)?:
                        data = part
                    case .staged(let upload)?:
                        // Staged as it will be stored (compressed or not, its digest computed on the way).
                        if upload.length > maxAttachmentSize { throw CouchError(.contentTooLarge, "attachment_too_large", name) }
                        staged.append(upload.blob)
                        out[name] = stub(digest: upload.blob.digest, length: upload.length)
                        continue
                    case nil:
                        throw CouchError.badRequest("Attachment \(name) follows but its body is missing from the request")
                    }
                } else {
                    throw CouchError.badRequest("Attachment \(name) needs data, follows or stub")
                }
                if data.count > maxAttachmentSize { throw CouchError(.contentTooLarge, "attachment_too_large", name) }
                let stored = try StoredAttachment(data, contentType: contentType,
                                                  givenEncoding: meta["follows"]?.boolValue == true ? meta["encoding"]?.stringValue : nil,
                                                  givenLength: meta["length"]?.intValue, compression: compression)
                blobs.append((stored.digest, stored.bytes))
                if let encoding = stored.encoding { encodings[stored.digest] = encoding }
                out[name] = stub(digest: stored.digest, length: stored.length)
            }
            if !stubDigests.isEmpty && ownStubsOnly {
                var own: Set<String> = []
                if let record = try collection.record(id: doc.id, withTree: true) {
                    let leaves = record.tree?.rankedLeaves.map(\.rev) ?? [record.revID]
                    let shown = try reader.map { r in
                        try ChannelIndex.of(collection.database).visibleRevisions(leaves.map { .init(id: doc.id, rev: $0) },
                                                                                  in: collection, to: r)
                    }
                    for leaf in leaves where shown?.contains(.init(id: doc.id, rev: leaf)) ?? true {
                        guard let body = record.revision(leaf)?.body, case .object(let stubs)? = try JSON.parse(body)["_attachments"] else { continue }
                        for (_, stub) in stubs { if let d = stub["digest"]?.stringValue { own.insert(d) } }
                    }
                }
                let supplied = Set(blobs.map(\.digest) + staged.map(\.digest))
                for d in stubDigests where !own.contains(d) && !supplied.contains(d) {
                    throw CouchError(.preconditionFailed, "missing_stub", "Invalid attachment stub in \(doc.id): digest \(d) is not one of its attachments")
                }
            } else if !stubDigests.isEmpty {
                let present = try collection.database.existingBlobs(stubDigests)
                let supplied = Set(blobs.map(\.digest) + staged.map(\.digest))
                for d in stubDigests where !present.contains(d) && !supplied.contains(d) {
                    throw CouchError(.preconditionFailed, "missing_stub", "Invalid attachment stub in \(doc.id): digest \(d) is unknown")
                }
            }
            body["_attachments"] = .object(out)
        }
        var write = RevisionWrite(id: doc.id, body: body, deleted: doc.deleted, mode: mode, blobs: blobs)
        write.blobEncodings = encodings
        write.stagedBlobs = staged
        return write
    }

    /// Whether a design document is CouchDB's JavaScript kind: its `language` is `javascript` (or absent with a
    /// view whose `map` is function source), rather than Settee's SQL++ views or Mango's `query`.
    static func isJavaScript(_ body: JSONObject) -> Bool {
        if let language = body["language"]?.stringValue { return language.lowercased() == "javascript" }
        guard case .object(let views)? = body["views"] else {
            return body["validate_doc_update"] != nil || body["shows"] != nil || body["lists"] != nil
                || body["updates"] != nil || body["filters"] != nil || body["rewrites"] != nil
        }
        for (_, view) in views {
            if case .string? = view["map"] { return true }
        }
        return false
    }

    /// Attachment names: non-empty, at most 1,024 bytes, no control characters (NUL included), not starting with
    /// `_` (CouchDB reserves those).
    static func validateAttachmentName(_ name: String) throws {
        guard !name.isEmpty, name.utf8.count <= 1024 else {
            throw CouchError.badRequest("Attachment name must be 1 to 1024 bytes")
        }
        guard !name.hasPrefix("_") else {
            throw CouchError.badRequest("Attachment name '\(name)' starts with prohibited character '_'")
        }
        guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw CouchError.badRequest("Attachment name contains a control character")
        }
    }

    /// The `_attachments` of a stored revision, or nil.
    static func attachments(of id: String, rev: RevID, collection: SetteeStore.Collection) throws -> JSONObject? {
        guard let record = try collection.record(id: id, withTree: true), let revision = record.revision(rev),
              case .object(let body) = try JSON.parse(revision.body) else { return nil }
        return body["_attachments"]?.objectValue
    }
}

/// An attachment body as it will be stored: gzip-compressed when its content type is compressible
/// (`[attachments] compressible_types`), even when that doesn't make it smaller, as CouchDB stores them; the digest is of
/// the stored bytes (CouchDB's), the length the attachment's own.
struct StoredAttachment {
    var bytes: [UInt8]
    var encoding: String?
    var digest: String
    var length: Int

    /// `givenEncoding` is the encoding a replicator sent the data in (`multipart/related` with
    /// `"encoding": "gzip"`): such bytes are stored as they came.
    init(_ data: [UInt8], contentType: String, givenEncoding: String? = nil, givenLength: Int64? = nil,
         compression: AttachmentSettings) throws {
        if givenEncoding == "gzip" {
            bytes = data
            encoding = "gzip"
            length = try givenLength.map(Int.init) ?? Gzip.decompress(data, limit: Int.max).count
        } else if !data.isEmpty, compression.compresses(contentType),
                  let packed = try? Gzip.compress(data, level: compression.compressionLevel) {
            bytes = packed
            encoding = "gzip"
            length = data.count
        } else {
            bytes = data
            encoding = nil
            length = data.count
        }
        digest = Database.attachmentDigest(bytes)
    }
}
