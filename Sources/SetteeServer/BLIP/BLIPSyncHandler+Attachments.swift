import SetteeBLIP
import SetteeCore
import SetteeReplication
import SetteeStore

/// Attachments and blobs, both ways (see ``BLIPAttachments`` for how they are named on each side).
///
/// Serving a pulling client: `getAttachment` (`digest`, `docID`) answers the body of an attachment of a revision
/// being sent (``BLIPOfferedAttachments``) or of a leaf revision of the document named; `proveAttachment`
/// (`digest`, the nonce as body) answers the proof of the same. Anything else is HTTP 404: a digest is not a key
/// to the database's bodies (a purged or deleted document's body stays until compaction).
///
/// Receiving a pushed revision, as Sync Gateway does: for each attachment (the body's blobs, as `blob_/<path>`,
/// and the other `_attachments` entries) that the document already has under that name, nothing; for a body the
/// database holds under another document, `proveAttachment` (the client proves it has the bytes, without sending
/// them; a client that can't is asked for them); otherwise `getAttachment`, checked against the digest and length
/// the revision claims. The revision is stored only once every body is at hand.
extension BLIPSyncHandler {
    // MARK: Serving

    /// `getAttachment`: the bytes of an attachment the client may read, uncompressed unless it asked (`compress`).
    func getAttachment(_ request: BLIPMessage) async throws {
        let sha1 = request.properties["digest"] ?? ""
        let stored = try await storedDigest(for: request)
        let database = context.database
        guard let bytes = try await blocking({ try database.blob(digest: stored) }) else {
            throw CouchError(.notFound, "not_found", "attachment \(sha1) is gone")
        }
        session.send(.response(to: request.number, body: bytes, compressible: request.properties["compress"] == "true"))
    }

    /// `proveAttachment`: the SHA-1 of the nonce and the attachment's bytes (``BLIPAttachments/proof(nonce:data:)``).
    func proveAttachment(_ request: BLIPMessage) async throws {
        guard !request.body.isEmpty, request.body.count <= 255 else {
            throw BLIPSyncError(domain: .blip, code: 400, "proveAttachment needs a nonce of 1 to 255 bytes")
        }
        let stored = try await storedDigest(for: request)
        let database = context.database
        guard let bytes = try await blocking({ try database.blob(digest: stored) }) else {
            throw CouchError(.notFound, "not_found", "attachment is gone")
        }
        session.send(.response(to: request.number, body: Array(BlobDigest.proof(nonce: request.body, data: bytes).utf8)))
    }

    /// The stored digest of the attachment a `getAttachment` or `proveAttachment` names by its SHA-1 (`digest`):
    /// one of a revision being sent (``BLIPOfferedAttachments``), else one on a leaf revision of the document the
    /// request names (`docID`) — for a reader limited to channels, only a document in them; HTTP 404 otherwise.
    private func storedDigest(for request: BLIPMessage) async throws -> String {
        guard let sha1 = request.properties["digest"], !sha1.isEmpty else {
            throw CouchError.badRequest("\(request.profile ?? "the request") needs a `digest`")
        }
        let docID = request.properties["docID"]
        if let offered = offered.digest(sha1: sha1, docID: docID) { return offered }
        let notFound = CouchError(.notFound, "not_found", "no attachment \(sha1) on a document this connection may read")
        guard let docID, !docID.isEmpty else { throw notFound }
        let c = try target(request).collection
        let limited = context.limitedReader
        let found = try await blocking { () -> String? in
            // A reader limited to its channels (a database with a sync function) reaches only the attachments of
            // revisions in them, each checked by its own routing.
            var reader: ChannelIndex.Reader?
            if let limited, try ChannelIndex.of(c.database).syncFunction() != nil {
                reader = try ChannelIndex.of(c.database).reader(user: limited.user, roles: limited.roles, in: c)
            }
            guard let record = try c.record(id: docID, withTree: true) else { return nil }
            var names = BLIPAttachments.Names(database: c.database)
            defer { try? c.database.recordSHA1(names.computed) }
            let leaves = record.tree?.rankedLeaves.map(\.rev) ?? [record.revID]
            let shown = try reader.map { r in
                try ChannelIndex.of(c.database).visibleRevisions(leaves.map { .init(id: docID, rev: $0) }, in: c, to: r)
            }
            for leaf in leaves where shown?.contains(.init(id: docID, rev: leaf)) ?? true {
                guard let body = record.revision(leaf)?.body, body.contains(bytes: BLIPAttachments.attachmentsKey),
                      case .object(let stubs)? = try JSON.parse(body)["_attachments"] else { continue }
                for (_, stub) in stubs {
                    if let digest = stub["digest"]?.stringValue, try names.sha1(of: digest) == sha1 { return names.resolved[sha1] }
                }
            }
            return nil
        }
        guard let found else { throw notFound }
        return found
    }

    // MARK: Receiving

    /// The largest attachment a client can send: a `getAttachment` reply is one BLIP message, and a message over
    /// the connection's limit closes it.
    static let largestReceivable = BLIPConnection.Configuration().maxMessageSize - 65536

    /// A pushed revision's attachments, ready to store.
    struct ReceivedAttachments: Sendable {
        /// The body to store: blob dictionaries and `_attachments` stubs with CouchDB digests.
        var body: JSONObject
        /// Bodies the database did not have, by digest.
        var blobs: [(digest: String, data: [UInt8])] = []
        /// Their SHA-1 names, by digest.
        var sha1: [String: String] = [:]
    }

    /// One attachment of a pushed revision.
    private struct Wanted {
        var name: String
        var digest: String
        var length: Int?
        var contentType: String?
        var revpos: JSON?
        var data: [UInt8]?
        /// The key path of the blob it stands for, if it does.
        var blobPath: String?
    }

    /// What the store knows of a pushed revision's attachments.
    private struct Known: Sendable {
        /// The attachments of the revision's parent and of the current revision, by name.
        var onDocument: [String: JSONObject] = [:]
        /// Stored digest by the name the revision gives (SHA-1 names resolved; CouchDB digests that are stored).
        var stored: [String: String] = [:]
        var conflict = false
    }

    /// Makes a pushed revision's attachments ready to store: finds their bodies, proves or fetches what is not
    /// the document's already, and renames them for the store.
    /// - Parameters:
    ///   - given: the `_attachments` the revision came with (Couchbase Lite's legacy stubs, `blob_/…` included).
    ///   - request: the `rev`, whose `collection` the requests to the client carry.
    ///   - noConflicts: with `noconflicts`, a revision that does not extend the current one is refused before any
    ///     body is fetched.
    /// - Throws: HTTP 400 for malformed stubs or data that does not match its digest or length, 403 for a failed
    ///   proof, 409 for a conflict, 412 (`missing_stub`) for a body neither side can supply, 413 over the size limit.
    func receiveAttachments(id: String, history: [RevID], body: JSONObject, given: JSON?, request: BLIPMessage,
                            noConflicts: Bool) async throws -> ReceivedAttachments {
        let wanted = try Self.wantedAttachments(body: body, given: given)
        guard !wanted.isEmpty else { return ReceivedAttachments(body: body) }
        let limit = min(context.node.configuration.maxAttachmentSize, Self.largestReceivable)
        for w in wanted where (w.length ?? w.data?.count ?? 0) > limit {
            throw CouchError(.contentTooLarge, "attachment_too_large", "\(id): attachment \(w.name) is over \(limit) bytes")
        }
        let known = try await known(id: id, history: history, wanted: wanted, noConflicts: noConflicts,
                                    in: try target(request).collection)
        if known.conflict { throw CouchError(.conflict, "conflict", "Document revision conflict") }

        let generation = Int64(history[0].generation)
        var received = ReceivedAttachments(body: body)
        var stubs = JSONObject(), blobDigests: [String: String] = [:]
        /// Bodies fetched or proved for this revision, by the name it gives them (asked for once each).
        var settled: [String: String] = [:]
        for w in wanted {
            var digest: String
            let length: Int
            if let done = settled[w.digest], let claimed = w.length {
                digest = done
                length = claimed
            } else if let data = w.data {
                // Inline data (Couchbase Lite doesn't send it; a CouchDB-style client might).
                try Self.check(data, against: w, id: id)
                digest = Database.attachmentDigest(data)
                length = data.count
                received.blobs.append((digest, data))
                received.sha1[digest] = BlobDigest.sha1(data)
            } else if let stored = known.stored[w.digest] {
                guard let claimed = w.length else { throw CouchError.badRequest("\(id): attachment \(w.name) has no length") }
                length = claimed
                digest = stored
                // A body the database has, but not this document under this name: the client proves it has the
                // bytes (or, when it can't prove or the body went meanwhile, sends them).
                if w.digest.hasPrefix("sha1-") && known.onDocument[w.name]?["digest"]?.stringValue != stored {
                    if let data = try await proveClientHas(w, stored: stored, id: id, request: request) {
                        digest = Database.attachmentDigest(data)
                        received.blobs.append((digest, data))
                        received.sha1[digest] = w.digest
                    }
                    settled[w.digest] = digest
                }
            } else if w.digest.hasPrefix("sha1-") {
                let data = try await fetch(w, id: id, request: request)
                digest = Database.attachmentDigest(data)
                length = data.count
                received.blobs.append((digest, data))
                received.sha1[digest] = w.digest
                settled[w.digest] = digest
            } else {
                // A CouchDB digest the database lacks: Couchbase Lite can only be asked by SHA-1.
                throw CouchError(.preconditionFailed, "missing_stub", "Invalid attachment stub in \(id) for \(w.name): digest \(w.digest) is unknown")
            }
            let previous = known.onDocument[w.name]
            let revpos = previous?["digest"]?.stringValue == digest ? previous?["revpos"]
                : (w.blobPath == nil ? w.revpos : nil)
            stubs[w.name] = Blob.attachmentStub(contentType: w.contentType, digest: digest, length: length,
                                                revpos: revpos ?? .int(generation))
            if let path = w.blobPath { blobDigests[path] = digest }
        }
        // Stored as the Swift API stores blobs: CouchDB digests in the dictionaries and in their `blob_/…` stubs.
        if case .object(let renamed) = Blob.replacingMetadata(in: .object(body), { path, blob in
            guard let digest = blobDigests[path] else { return blob }
            var renamed = blob
            renamed["digest"] = .string(digest)
            return renamed
        }) {
            received.body = renamed
        }
        received.body["_attachments"] = .object(stubs)
        return received
    }

    /// The attachments of a pushed body: each blob (its `blob_/<path>` stub's digest winning where the two differ,
    /// as Couchbase Lite reads them), then the other `_attachments` entries.
    private static func wantedAttachments(body: JSONObject, given: JSON?) throws -> [Wanted] {
        guard given == nil || given?.objectValue != nil else { throw CouchError.badRequest("_attachments must be an object") }
        let entries = given?.objectValue ?? [:]
        var wanted: [Wanted] = []
        var blobNames = Set<String>()
        for (path, blob) in Blob.metadata(in: .object(body)) {
            let name = Blob.attachmentName(path: path)
            let stub = entries[name]?.objectValue
            guard let digest = stub?["digest"]?.stringValue ?? blob["digest"]?.stringValue else { continue }
            wanted.append(Wanted(name: name, digest: digest, length: (stub?["length"] ?? blob["length"])?.intValue.map(Int.init),
                                 contentType: (blob["content_type"] ?? stub?["content_type"])?.stringValue, blobPath: path))
            blobNames.insert(name)
        }
        for (name, value) in entries where !blobNames.contains(name) {
            guard case .object(let stub) = value else { throw CouchError.badRequest("Attachment \(name) must be an object") }
            var data: [UInt8]?
            if let encoded = stub["data"]?.stringValue {
                guard let decoded = Base64.decode(encoded) else { throw CouchError.badRequest("Invalid attachment data for \(name)") }
                data = decoded
            } else if stub["follows"]?.boolValue == true {
                throw CouchError.badRequest("Attachment \(name) follows, which _blipsync has no way to send")
            }
            let digest = stub["digest"]?.stringValue
            guard digest != nil || data != nil else { throw CouchError.badRequest("Attachment \(name) needs a digest or data") }
            wanted.append(Wanted(name: name, digest: digest ?? "", length: stub["length"]?.intValue.map(Int.init),
                                 contentType: stub["content_type"]?.stringValue, revpos: stub["revpos"], data: data))
        }
        return wanted
    }

    /// Reads what the store has for a pushed revision's attachments (one blocking call).
    private func known(id: String, history: [RevID], wanted: [Wanted], noConflicts: Bool,
                       in c: SetteeStore.Collection) async throws -> Known {
        let parent = history.count > 1 ? history[1] : nil
        let digests = wanted.filter { $0.data == nil }.map(\.digest)
        let limited = context.limitedReader
        return try await blocking {
            var known = Known()
            // A writer limited to its channels (a database with a sync function) may reuse only attachments of
            // revisions it may read, and must prove (or send) any other body.
            var reader: ChannelIndex.Reader?
            if let limited, try ChannelIndex.of(c.database).syncFunction() != nil {
                let r = try ChannelIndex.of(c.database).reader(user: limited.user, roles: limited.roles, in: c)
                if !r.all { reader = r }
            }
            let record = try c.record(id: id, withTree: true, archived: parent.map { .revisions([$0]) })
            if noConflicts {
                known.conflict = Self.refusesAsConflict(current: record, rev: history[0], history: history)
                if known.conflict { return known }
            }
            if let record {
                let revs = [record.revID, parent].compactMap { $0 }
                let shown = try reader.map { r in
                    try ChannelIndex.of(c.database).visibleRevisions(revs.map { .init(id: id, rev: $0) }, in: c, to: r)
                }
                for rev in revs where shown?.contains(.init(id: id, rev: rev)) ?? true {
                    guard let body = record.revision(rev)?.body, body.contains(bytes: BLIPAttachments.attachmentsKey),
                          case .object(let stubs)? = try JSON.parse(body)["_attachments"] else { continue }
                    for (name, stub) in stubs { if let stub = stub.objectValue { known.onDocument[name] = stub } }
                }
            }
            for digest in Set(digests) {
                if digest.hasPrefix("sha1-") {
                    known.stored[digest] = try c.database.blobDigest(sha1: digest)
                } else if try c.database.blobInfo(digest: digest) != nil,
                          reader == nil || known.onDocument.values.contains(where: { $0["digest"]?.stringValue == digest }) {
                    // (A CouchDB digest can't be proved: a limited writer names only one its revisions already have.)
                    known.stored[digest] = digest
                }
            }
            return known
        }
    }

    /// Asks the client for an attachment's bytes (`getAttachment`) and checks them against the revision's claims.
    private func fetch(_ w: Wanted, id: String, request: BLIPMessage) async throws -> [UInt8] {
        var properties: BLIPProperties = ["digest": w.digest, "docID": id]
        if let collection = request.properties["collection"] { properties["collection"] = collection }
        if BLIPAttachments.isCompressible(w.contentType) { properties["compress"] = "true" }
        let reply = try await session.request(.request(profile: "getAttachment", properties: properties))
        if let error = reply.errorInfo {
            throw CouchError(.preconditionFailed, "missing_stub",
                             "\(id): the client could not supply attachment \(w.name) (\(w.digest)): \(error.domain) \(error.code) \(error.message)")
        }
        try Self.check(reply.body, against: w, id: id)
        return reply.body
    }

    /// Asks the client to prove it has the bytes of an attachment the database holds (`proveAttachment`, with a
    /// fresh nonce); a client that has no handler or no such blob (404) is asked for the bytes instead, and so is
    /// one whose body the database no longer has (compacted meanwhile). Returns the bytes when they were sent.
    private func proveClientHas(_ w: Wanted, stored: String, id: String, request: BLIPMessage) async throws -> [UInt8]? {
        let database = context.database
        guard let data = try await blocking({ try database.blob(digest: stored) }) else {
            return try await fetch(w, id: id, request: request)
        }
        var generator = SystemRandomNumberGenerator()
        let nonce = (0..<20).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var properties: BLIPProperties = ["digest": w.digest]
        if let collection = request.properties["collection"] { properties["collection"] = collection }
        let reply = try await session.request(.request(profile: "proveAttachment", properties: properties, body: nonce))
        if let error = reply.errorInfo {
            guard error.code == 404 else {
                throw CouchError(.forbidden, "forbidden", "\(id): proof of attachment \(w.name) failed: \(error.domain) \(error.code) \(error.message)")
            }
            return try await fetch(w, id: id, request: request)
        }
        guard reply.body == Array(BlobDigest.proof(nonce: nonce, data: data).utf8) else {
            throw CouchError(.forbidden, "forbidden", "\(id): incorrect proof for attachment \(w.name) (\(w.digest))")
        }
        return nil
    }

    /// Checks bytes against the digest (SHA-1 or CouchDB's MD5) and length an attachment claims.
    private static func check(_ data: [UInt8], against w: Wanted, id: String) throws {
        if let length = w.length, length != data.count {
            throw CouchError.badRequest("\(id): incorrect data for attachment \(w.name): \(data.count) bytes, \(length) claimed")
        }
        let actual = w.digest.hasPrefix("md5-") ? Database.attachmentDigest(data) : BlobDigest.sha1(data)
        if !w.digest.isEmpty && actual != w.digest {
            throw CouchError.badRequest("\(id): incorrect data for attachment \(w.name): digest \(actual), \(w.digest) claimed")
        }
    }
}
