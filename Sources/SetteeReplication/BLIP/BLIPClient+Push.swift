import SetteeBLIP
import SetteeCore
import SetteeStore
import Synchronization

/// Pushing to a `_blipsync` endpoint: `changes` offers revisions (the server answers which it lacks), `rev` sends
/// each wanted one with its history, and the server fetches attachment bodies it lacks with `getAttachment`.
extension BLIPClient {
    /// A `changes` request listing the revisions; the server answers, per revision, `0` when it has it or the
    /// ancestors it has when it lacks it (CouchDB's `_revs_diff`, in Couchbase Lite's shape).
    func revsDiff(_ revisions: [(id: String, revs: [RevID])]) async throws(ReplicationError) -> [String: RevTree.RevsDiff] {
        let connection = try await self.connection()
        var offered: [(id: String, rev: RevID)] = []
        for (id, revs) in revisions { for rev in revs { offered.append((id, rev)) } }
        guard !offered.isEmpty else { return [:] }
        let first = connection.pushSequence.add(offered.count, ordering: .relaxed).oldValue
        let items: [JSON] = offered.enumerated().map { i, item in
            [.int(Int64(first + i + 1)), .string(item.id), .string(item.rev.description)]
        }
        let reply = try await connection.request(.request(profile: "changes", body: JSON.array(items).serializedBytes))
        if let error = reply.errorInfo { throw connection.error(error, "changes") }
        if let limit = reply.properties["maxHistory"].flatMap(Int.init), limit > 0 {
            connection.maxHistory.withLock { $0 = limit }
        }
        let answers = (try? reply.jsonBody())?.arrayValue ?? []
        var diffs: [String: RevTree.RevsDiff] = [:]
        for (i, item) in offered.enumerated() where i < answers.count {
            guard let known = answers[i].arrayValue else { continue }
            var diff = diffs[item.id] ?? RevTree.RevsDiff(missing: [], possibleAncestors: [])
            diff.missing.append(item.rev)
            for ancestor in known.compactMap({ $0.stringValue.flatMap(RevID.init) }) where !diff.possibleAncestors.contains(ancestor) {
                diff.possibleAncestors.append(ancestor)
            }
            diffs[item.id] = diff
        }
        return diffs
    }

    /// Sends every revision as a `rev` request at once (BLIP interleaves them) and waits for the server's answers:
    /// an error answer is that document's failure (403 a validation function or access, 409 a conflict).
    func write(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> [DocumentFailure] {
        guard !revisions.isEmpty else { return [] }
        let connection = try await self.connection()
        let maxHistory = connection.maxHistory.withLock { $0 }
        var messages: [(revision: ReplicatedRevision, message: BLIPMessage, digests: [String])] = []
        messages.reserveCapacity(revisions.count)
        for revision in revisions {
            let (message, digests) = try revMessage(revision, connection: connection, maxHistory: maxHistory)
            messages.append((revision, message, digests))
        }
        defer {
            connection.outgoingAttachments.withLock { bodies in
                for digest in messages.flatMap(\.digests) {
                    bodies[digest]?.users -= 1
                    if bodies[digest]?.users ?? 0 <= 0 { bodies[digest] = nil }
                }
            }
        }
        // Every `rev` goes out at once (one lock, one flush); the replies are gathered as they come (no task per revision).
        let outcome: Result<[DocumentFailure], ReplicationError> = await withCheckedContinuation { continuation in
            let gathered = Mutex<(left: Int, failures: [DocumentFailure], closed: Bool)>((messages.count, [], false))
            let revisions = messages.map(\.revision)
            connection.session.request(contentsOf: messages.map { connection.tagged($0.message) }) { i, reply in
                let item = revisions[i]
                let done: Result<[DocumentFailure], ReplicationError>? = gathered.withLock { state in
                    switch reply {
                    case .success(let message):
                        if let error = message.errorInfo {
                            state.failures.append(DocumentFailure(id: item.id, rev: item.rev.description,
                                                                  error: Self.errorName(error.code), reason: error.message))
                        }
                    case .failure:
                        state.closed = true
                    }
                    state.left -= 1
                    guard state.left == 0 else { return nil }
                    return state.closed
                        ? .failure(ReplicationError(.transient, "the connection to \(connection.peer) closed during a push"))
                        : .success(state.failures)
                }
                if let done { continuation.resume(returning: done) }
            }
        }
        return try outcome.get()
    }

    /// The `rev` request for a revision: `id`, `rev`, `history` (ancestors, newest first, up to `maxHistory`),
    /// `deleted`, `sequence`, and the body with its attachment stubs named by `sha1-` digests; the bodies those
    /// digests name are offered for the server's `getAttachment`.
    private func revMessage(_ revision: ReplicatedRevision, connection: BLIPClientConnection,
                            maxHistory: Int) throws(ReplicationError) -> (BLIPMessage, [String]) {
        var properties: BLIPProperties = ["id": revision.id, "rev": revision.rev.description]
        let ancestors = revision.history.dropFirst().prefix(max(maxHistory - 1, 0))
        if !ancestors.isEmpty { properties["history"] = ancestors.map(\.description).joined(separator: ",") }
        if revision.deleted { properties["deleted"] = "1" }
        properties["sequence"] = String(connection.pushSequence.add(1, ordering: .relaxed).newValue)
        var body = revision.body
        var offered: [String] = []
        if case .object(let attachments)? = revision.body["_attachments"] {
            var renames: [String: String] = [:]
            for (_, meta) in attachments {
                guard let digest = meta["digest"]?.stringValue, renames[digest] == nil,
                      var bytes = try revision.attachmentBytes(digest) else { continue }
                if revision.attachmentEncodings[digest] == "gzip" {
                    // Stored compressed here; Couchbase Lite's protocol carries an attachment's own bytes.
                    do {
                        bytes = try Gzip.decompress(bytes, limit: 1 << 32)
                    } catch {
                        throw ReplicationError(.local, "attachment \(digest) of \(revision.id) does not decompress: \(error)")
                    }
                }
                let sha1 = BlobDigest.sha1(bytes)
                renames[digest] = sha1
                offered.append(sha1)
                connection.outgoingAttachments.withLock { bodies in
                    bodies[sha1, default: .init(bytes: bytes, users: 0)].users += 1
                }
            }
            BLIPAttachments.renameDigests(in: &body, renames)
            if case .object(var stubs)? = body["_attachments"] {
                // Bodies travel by `getAttachment`, never inline.
                for name in stubs.keys {
                    guard case .object(var stub)? = stubs[name] else { continue }
                    for key in ["data", "follows", "encoding", "encoded_length"] { stub.removeValue(forKey: key) }
                    stub["stub"] = .bool(true)
                    stubs[name] = .object(stub)
                }
                body["_attachments"] = .object(stubs)
            }
        }
        return (.request(profile: "rev", properties: properties, body: JSON.object(body).serializedBytes), offered)
    }

    /// CouchDB's error name for a status, as a document failure reports it.
    static func errorName(_ code: Int) -> String {
        switch code {
        case 400: "bad_request"
        case 401: "unauthorized"
        case 403: "forbidden"
        case 404: "not_found"
        case 409: "conflict"
        case 413: "document_too_large"
        default: "error"
        }
    }
}
