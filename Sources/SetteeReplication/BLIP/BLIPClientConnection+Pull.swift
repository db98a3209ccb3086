import SetteeBLIP
import SetteeCore
import Synchronization

/// What a pull is doing on a connection: the feed it subscribed to, the server's `changes` batches not yet handed to
/// the replicator or not yet answered, and the revisions asked for and arrived.
struct PullState: Sendable {
    /// The subscription (`subChanges`) running on the server.
    enum Feed: Sendable, Equatable {
        case none
        /// Ends after the "caught up" batch.
        case oneShot
        /// Keeps sending as the server's database changes.
        case continuous
    }

    /// A `changes` request from the server: `[[sequence, docID, revID, deleted?, bodySize?], …]`.
    struct Batch: Sendable {
        /// The request's number, which the answer goes to.
        var number: UInt64
        /// How many items the request had (the answer has one entry per item).
        var count: Int
        /// The well-formed items and their positions.
        var entries: [(position: Int, change: ChangeEntry)]
        /// The empty `changes` that says the feed is caught up.
        var isCaughtUp: Bool { count == 0 }
        var lastSeq: JSON? { entries.last?.change.seq }
    }

    /// A revision asked for.
    struct RevKey: Hashable, Sendable {
        var id: String
        var rev: String
    }

    /// How an asked-for revision came: as a `rev`, or as a `norev` (gone from the server, or unreadable).
    enum Arrival: Sendable {
        case revision(ReplicatedRevision)
        case missing
    }

    struct ChangesWaiter: Sendable {
        var id: Int
        var continuation: CheckedContinuation<Batch?, any Error>
    }

    /// The most `changes` batches held for the replicator before a server's next one is refused.
    static let maxQueuedBatches = 64

    var feed = Feed.none
    /// What the subscription filters on (document ids, filter and its parameters), to notice a different request.
    var key = ""
    /// The feed's "caught up" batch has been handed out.
    var caughtUp = false
    /// Where the next `changes` call must start for the subscription to carry on: the last batch's sequence.
    var nextSince: JSON?
    var queue: [Batch] = []
    var waiter: ChangesWaiter?
    var waiterIDs = 0
    /// Batches handed out and not yet answered, oldest first.
    var unanswered: [Batch] = []
    /// Revisions asked for, with the ancestors the local database has (older attachments are there too).
    var expected: [RevKey: [RevID]] = [:]
    var arrived: [RevKey: Arrival] = [:]
    var revWaiters: [RevKey: CheckedContinuation<Arrival, any Error>] = [:]
    /// Why the connection ended, once it has.
    var ended: ReplicationError?
}

extension BLIPClientConnection {
    /// A `changes` request from the server: queued for the replicator (an empty one, "caught up", is answered now).
    func receiveChanges(_ request: BLIPMessage) {
        guard let items = (try? request.jsonBody())?.arrayValue else {
            session.send(.error(to: request.number, domain: .http, code: 400, message: "changes: expected a JSON array"))
            return
        }
        var entries: [(position: Int, change: ChangeEntry)] = []
        for (i, item) in items.enumerated() {
            guard let row = item.arrayValue, row.count >= 3, let id = row[1].stringValue, !id.isEmpty,
                  let rev = row[2].stringValue.flatMap(RevID.init) else { continue }
            // The fourth item: `true`/1 deleted; Sync Gateway 3's flags add 2 (access revoked) and 4 (removed from a
            // channel). A tombstone marked removed (5) is a deletion to fetch, as Couchbase Lite takes it.
            let flags = row.count > 3 ? (row[3].boolValue == true ? 1 : row[3].intValue ?? 0) : 0
            let removed = flags & 0b110 != 0 && flags != 0b101
            entries.append((i, ChangeEntry(seq: row[0], id: id, revs: [rev], deleted: flags & 1 == 1, accessRemoved: removed)))
        }
        let batch = PullState.Batch(number: request.number, count: items.count, entries: entries)
        if entries.isEmpty {
            // "Caught up" (or nothing readable): answered now, as wanting nothing.
            session.send(.response(to: request.number, body: Array("[]".utf8)))
            guard batch.isCaughtUp else { return }
        }
        enum Outcome { case handed(PullState.ChangesWaiter), queued, refused }
        let outcome = pull.withLock { state -> Outcome in
            if let waiter = state.waiter {
                state.waiter = nil
                return .handed(waiter)
            }
            // A server sends its next batch once the last is answered (Sync Gateway keeps a few in flight); one
            // that floods this side is refused rather than held without bound.
            guard state.queue.count < PullState.maxQueuedBatches else { return .refused }
            state.queue.append(batch)
            return .queued
        }
        switch outcome {
        case .handed(let waiter): waiter.continuation.resume(returning: batch)
        case .queued: break
        case .refused:
            session.send(.error(to: request.number, domain: .http, code: 503, message: "too many changes batches unanswered"))
        }
    }

    /// A `rev` from the server: one revision asked for, parsed for the replicator (its attachments fetched first).
    func receiveRev(_ request: BLIPMessage) async {
        let properties = request.properties
        guard let id = properties["id"], !id.isEmpty, let revText = properties["rev"], let rev = RevID(revText) else {
            session.send(.error(to: request.number, domain: .http, code: 400, message: "rev needs `id` and a valid `rev`"))
            return
        }
        let key = PullState.RevKey(id: id, rev: revText)
        let arrival: PullState.Arrival
        do {
            var body = JSONObject()
            if !request.body.isEmpty {
                guard case .object(let object)? = try request.jsonBody() else {
                    throw ReplicationError(.badRequest, "the body of \(id) \(revText) is not a JSON object")
                }
                body = object
            }
            for name in ["_id", "_rev", "_deleted", "_revisions", "_exp", "_removed"] { body.removeValue(forKey: name) }
            var history = [rev]
            for item in (properties["history"] ?? "").split(separator: ",") {
                guard let ancestor = RevID(String(item)), ancestor.generation == history.last!.generation - 1 else { break }
                history.append(ancestor)
            }
            let deleted = properties["deleted"].map { $0 == "1" || $0 == "true" } ?? false
            var revision = ReplicatedRevision(id: id, history: history, deleted: deleted, body: body)
            let known = pull.withLock { $0.expected[key] } ?? []
            try await fetchAttachments(of: &revision, known: known)
            arrival = .revision(revision)
            session.send(.response(to: request.number))
        } catch {
            let failure = ReplicationError.from(error)
            session.logger.warning("BLIP: could not take \(id) \(revText) from \(peer): \(failure)")
            session.send(.error(to: request.number, domain: .http, code: failure.status ?? 400, message: failure.message))
            arrival = .missing
        }
        deliver(arrival, for: key)
    }

    /// A `norev`: the server can't send a revision asked for; the replicator leaves it out.
    func receiveNoRev(_ request: BLIPMessage) {
        if !request.flags.contains(.noReply) { session.send(.response(to: request.number)) }
        guard let id = request.properties["id"], let rev = request.properties["rev"] else { return }
        session.logger.info("BLIP: \(peer) has no \(id) \(rev) (\(request.properties["error"] ?? "?") \(request.properties["reason"] ?? ""))")
        deliver(.missing, for: PullState.RevKey(id: id, rev: rev))
    }

    private func deliver(_ arrival: PullState.Arrival, for key: PullState.RevKey) {
        let waiter = pull.withLock { state -> CheckedContinuation<PullState.Arrival, any Error>? in
            if let waiter = state.revWaiters.removeValue(forKey: key) {
                state.expected[key] = nil
                return waiter
            }
            // Kept only if asked for: a revision nobody asked for would be held forever.
            if state.expected[key] != nil { state.arrived[key] = arrival }
            return nil
        }
        waiter?.resume(returning: arrival)
    }

    /// The next `changes` batch from the server, or nil when `timeout` passes first.
    func nextBatch(timeout: Duration?) async throws(ReplicationError) -> PullState.Batch? {
        let id = pull.withLock { state in
            state.waiterIDs += 1
            return state.waiterIDs
        }
        let timer = timeout.map { timeout in
            Task {
                try await Task.sleep(for: timeout)
                let waiter = self.pull.withLock { state -> PullState.ChangesWaiter? in
                    guard state.waiter?.id == id else { return nil }
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.continuation.resume(returning: nil)
            }
        }
        defer { timer?.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    pull.withLock { state in
                        if let ended = state.ended { return continuation.resume(throwing: ended) }
                        if !state.queue.isEmpty { return continuation.resume(returning: state.queue.removeFirst()) }
                        state.waiter = PullState.ChangesWaiter(id: id, continuation: continuation)
                    }
                }
            } onCancel: {
                let waiter = self.pull.withLock { state -> PullState.ChangesWaiter? in
                    guard state.waiter?.id == id else { return nil }
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.continuation.resume(throwing: CancellationError())
            }
        } catch {
            throw ReplicationError.from(error)
        }
    }

    /// Waits for the revision `key` (a `rev` or `norev`).
    func arrival(of key: PullState.RevKey) async throws -> PullState.Arrival {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                pull.withLock { state in
                    if let arrived = state.arrived.removeValue(forKey: key) {
                        state.expected[key] = nil
                        return continuation.resume(returning: arrived)
                    }
                    if let ended = state.ended { return continuation.resume(throwing: ended) }
                    guard state.expected[key] != nil else {
                        // Asked for on an earlier connection: it won't come on this one.
                        return continuation.resume(throwing: ReplicationError(.transient, "\(key.id) \(key.rev) was asked for on a connection that closed"))
                    }
                    state.revWaiters[key] = continuation
                }
            }
        } onCancel: {
            self.pull.withLock { $0.revWaiters.removeValue(forKey: key) }?.resume(throwing: CancellationError())
        }
    }

    /// Fails the waits for `keys` (a fetch that timed out).
    func abandon(_ keys: [PullState.RevKey], _ error: ReplicationError) {
        let waiters = pull.withLock { state in keys.compactMap { state.revWaiters.removeValue(forKey: $0) } }
        for waiter in waiters { waiter.resume(throwing: error) }
    }
}
