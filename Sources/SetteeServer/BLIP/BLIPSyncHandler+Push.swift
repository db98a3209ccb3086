import SetteeBLIP
import SetteeCore
import SetteeStore

/// The push half: the client offers revisions (`proposeChanges` or `changes`) and sends the wanted ones (`rev`).
extension BLIPSyncHandler {
    /// `changes` from a pushing client: `[[sequence, docID, revID, deleted?, size?], …]`. The answer lists, for each
    /// revision the collection lacks, the leaves it has that may be ancestors (`[]` for none), and `0` for the
    /// revisions it has (trailing zeros dropped); `maxHistory` is the database's revs limit.
    func changes(_ request: BLIPMessage) async throws {
        try requirePush()
        guard let items = try jsonArray(request) else { return }
        var asked: [(id: String, revs: [RevID])] = []
        var positions: [Int] = []
        for (i, item) in items.enumerated() {
            guard let id = item[1]?.stringValue, let rev = item[2]?.stringValue.flatMap(RevID.init) else { continue }
            asked.append((id, [rev]))
            positions.append(i)
        }
        let c = try target(request).collection
        let request2 = asked
        let hiddenIDs = try await hidden(asked.map(\.id), in: c)
        let diffs = try await blocking { try c.revsDiff(request2) }
        var answer = [JSON](repeating: .int(0), count: items.count)
        let byID = Dictionary(diffs.map { ($0.id, $0.diff) }, uniquingKeysWith: { a, _ in a })
        for (k, i) in positions.enumerated() {
            if hiddenIDs.contains(asked[k].id) {
                // A document outside a limited reader's channels is unknown to it (as `_revs_diff` answers).
                answer[i] = []
            } else if let diff = byID[asked[k].id], diff.missing.contains(asked[k].revs[0]) {
                answer[i] = .array(diff.possibleAncestors.map { .string($0.description) })
            }
        }
        while case .int(0)? = answer.last { answer.removeLast() }
        session.send(.response(to: request.number, properties: ["maxHistory": String(context.database.revsLimit)],
                               body: JSON.array(answer).serializedBytes))
    }

    /// `proposeChanges`: `[[docID, revID, serverRevID?, size?], …]`, answered as Sync Gateway does: `0` send it,
    /// `304` already here, `409` conflict (the server's current revision is not the one the client built on).
    func proposeChanges(_ request: BLIPMessage) async throws {
        try requirePush()
        guard let items = try jsonArray(request) else { return }
        let ids = items.map { $0[0]?.stringValue ?? "" }
        let c = try target(request).collection
        let hiddenIDs = try await hidden(ids, in: c)
        let records = try await blocking { try c.records(ids: ids, withTree: true) }
        var answer: [JSON] = []
        for (i, item) in items.enumerated() {
            guard let rev = item[1]?.stringValue.flatMap(RevID.init), !ids[i].isEmpty else {
                answer.append(.int(400))
                continue
            }
            let parent = item[2]?.stringValue.flatMap(RevID.init)
            // A document outside a limited reader's channels is unknown to it: send it (the sync function judges).
            answer.append(.int(Int64(Self.proposal(rev: rev, parent: parent, current: hiddenIDs.contains(ids[i]) ? nil : records[i]))))
        }
        while case .int(0)? = answer.last { answer.removeLast() }
        session.send(.response(to: request.number, body: JSON.array(answer).serializedBytes))
    }

    /// Of `ids`, the documents a reader limited to its channels may not see (none for anyone else).
    func hidden(_ ids: [String], in c: SetteeStore.Collection) async throws -> Set<String> {
        guard let limited = context.limitedReader else { return [] }
        return try await blocking {
            let index = ChannelIndex.of(c.database)
            guard try index.syncFunction() != nil else { return [] }
            let reader = try index.reader(user: limited.user, roles: limited.roles, in: c)
            if reader.all { return [] }
            return Set(ids).subtracting(try index.visible(ids, in: c, to: reader))
        }
    }

    /// The status of a proposed revision against the stored document.
    static func proposal(rev: RevID, parent: RevID?, current: DocumentRecord?) -> Int {
        guard let current else { return 0 }
        if current.revID == rev || current.tree?.index(of: rev) != nil { return 304 }
        if let parent, parent == current.revID { return 0 }
        // A new branch over a deleted document (re-creating it) is not a conflict.
        if parent == nil && current.deleted { return 0 }
        return 409
    }

    /// A pushed revision as its `rev` request says it.
    struct IncomingRevision: Sendable {
        var id: String
        var rev: RevID
        /// The revision and its ancestors, consecutive generations, newest first (`_revisions`).
        var history: [RevID]
        var deleted: Bool
        var noConflicts: Bool
        /// The body without `_` properties.
        var body: JSONObject
        /// Its `_attachments`, when it has some.
        var attachments: JSON?
        /// Whether attachments or blobs must be resolved (fetched, proved, renamed) before it is written.
        var hasAttachments: Bool
    }

    /// `rev`: one revision with its `history` (ancestors, newest first), written as `new_edits=false` writes it.
    /// With `noconflicts`, a revision that does not extend the current one (or a tombstone) is refused with 409.
    ///
    /// A revision without attachments goes straight to the group commit (``BLIPRevisionWriter``) and is answered
    /// when its batch is stored, without a task of its own. One with attachments (legacy `_attachments` stubs,
    /// blobs in the body) has them resolved first in a task
    /// (``receiveAttachments(id:history:body:given:request:noConflicts:)``): nothing is written until every body is
    /// at hand, and a body the client can't supply fails the revision alone.
    func startRev(_ request: BLIPMessage) throws {
        let incoming = try parseRev(request)
        let served = try target(request)
        guard incoming.hasAttachments else {
            submit(incoming, received: ReceivedAttachments(body: incoming.body), request: request, to: served)
            return
        }
        Task {
            do {
                let received = try await self.receiveAttachments(id: incoming.id, history: incoming.history, body: incoming.body,
                                                                 given: incoming.attachments, request: request,
                                                                 noConflicts: incoming.noConflicts)
                self.submit(incoming, received: received, request: request, to: served)
            } catch {
                self.fail(request, error)
            }
        }
    }

    /// Reads a `rev` request's properties and body.
    func parseRev(_ request: BLIPMessage) throws -> IncomingRevision {
        let properties = request.properties
        guard let id = properties["id"], !id.isEmpty, let rev = properties["rev"].flatMap(RevID.init) else {
            throw BLIPSyncError(domain: .http, code: 400, "rev needs `id` and a valid `rev`")
        }
        var body = JSONObject()
        if !request.body.isEmpty {
            guard case .object(let object) = try jsonBody(request) else {
                throw BLIPSyncError(domain: .http, code: 400, "a revision's body is a JSON object")
            }
            body = object
        }
        let attachments = body.removeValue(forKey: "_attachments")
        for key in body.keys where key.hasPrefix("_") { body.removeValue(forKey: key) }
        // The history as `_revisions` holds it: consecutive generations down from the revision.
        var history = [rev]
        for item in (properties["history"] ?? "").split(separator: ",") {
            guard let ancestor = RevID(String(item)), ancestor.generation == history.last!.generation - 1 else { break }
            history.append(ancestor)
        }
        return IncomingRevision(
            id: id, rev: rev, history: history,
            deleted: properties["deleted"].map { $0 == "1" || $0 == "true" } ?? false,
            noConflicts: properties["noconflicts"] == "true" || properties["noconflicts"] == "1",
            body: body, attachments: attachments,
            hasAttachments: attachments != nil || request.body.contains(bytes: Self.blobTypeKey))
    }

    /// Queues the revision for the group commit and answers `request` when it is stored (or refused).
    private func submit(_ incoming: IncomingRevision, received: ReceivedAttachments, request: BLIPMessage, to served: Served) {
        let canWriteDesign = context.canWriteDesign, metrics = context.node.metrics
        let parsed = DocumentInput.Parsed(id: incoming.id, rev: incoming.rev, deleted: incoming.deleted,
                                          history: incoming.history, body: received.body, attachments: nil)
        let newBlobs = received.blobs, sha1Names = received.sha1
        served.writer.submit({ c in
            switch try c.database.isPartitioned ? DocumentIDs.validatePartitioned(incoming.id) : DocumentIDs.validate(incoming.id) {
            case .regular: break
            case .design:
                // 403, not _bulk_docs' 401: to Couchbase Lite a 401 means the connection's credentials failed.
                guard canWriteDesign else {
                    throw BLIPSyncError(domain: .http, code: 403, "Only database admins may push design documents.")
                }
            case .local: throw BLIPSyncError(domain: .http, code: 400, "_local documents are not replicated")
            }
            if incoming.noConflicts,
               Self.refusesAsConflict(current: try c.record(id: incoming.id), rev: incoming.rev, history: incoming.history) {
                throw BLIPSyncError(domain: .http, code: 409, "Document revision conflict")
            }
            var write = try DocumentInput.write(parsed, newEdits: false, collection: c)
            write.blobs += newBlobs
            write.blobSHA1 = sha1Names
            return write
        }, completion: { [self] outcome in
            switch outcome {
            case .success:
                metrics.documentsWritten(1)
                return request.flags.contains(.noReply) ? nil : .response(to: request.number)
            case .failure(let error):
                return failure(request, error)
            }
        })
    }

    /// Whether a `noconflicts` revision (with its `history`, newest first) would branch the stored document: it
    /// neither is nor extends the current revision (a new document over a tombstone excepted).
    static func refusesAsConflict(current: DocumentRecord?, rev: RevID, history: [RevID]) -> Bool {
        guard let current, current.revID != rev else { return false }
        if current.deleted && history.count == 1 { return false }
        return !history.dropFirst().contains(current.revID)
    }

    /// Marks a body that may hold blobs (`"@type"`), before it is searched.
    static let blobTypeKey = Array("\"@type\"".utf8)

    private func jsonBody(_ request: BLIPMessage) throws -> JSON? {
        do { return try request.jsonBody() } catch {
            throw BLIPSyncError(domain: .http, code: 400, "the request's body is not JSON: \(error)")
        }
    }

    private func jsonArray(_ request: BLIPMessage) throws -> [JSON]? {
        guard let body = try jsonBody(request) else {
            session.send(.response(to: request.number, body: Array("[]".utf8)))
            return nil
        }
        guard let items = body.arrayValue else { throw BLIPSyncError(domain: .http, code: 400, "expected a JSON array") }
        return items
    }
}
