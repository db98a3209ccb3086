import SetteeBLIP
import SetteeCore

/// Pulling from a `_blipsync` endpoint: the server drives the feed (`subChanges`, then its `changes` and `rev`
/// requests); these calls fit it to the replicator's read → diff → fetch → write batches.
extension BLIPClient {
    /// The next batch of the server's feed after `since`.
    ///
    /// The first call subscribes one-shot (`subChanges` without `continuous`); the server sends its changes in
    /// batches and then an empty "caught up" batch, which comes back as an empty result. A long-polling call after
    /// that subscribes again with `continuous` from where the feed got to, and waits (up to its timeout) for the
    /// server's next batch. A call that doesn't continue the subscription (another `since`, other filters) starts
    /// over on a new connection, so no batch of the old feed can be mistaken for one of the new.
    func changes(_ request: ChangesRequest) async throws(ReplicationError) -> ChangesBatch {
        if request.selector != nil {
            throw ReplicationError(.unsupported, "Couchbase Lite's protocol has no selector filter (\(settings.displayName))")
        }
        if let filter = request.filter, filter != Self.channelFilter {
            throw ReplicationError(.unsupported, "Couchbase Lite's protocol serves no filter \(filter) (\(settings.displayName))")
        }
        let key = JSON.array([request.documentIDs.map { .array($0.sorted().map(JSON.string)) } ?? .null,
                              request.filter.map(JSON.string) ?? .null,
                              .object(JSONObject(request.queryParams.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) }))])
            .jsonString
        let longpoll: Duration?
        if case .longpoll(let timeout, _) = request.feed { longpoll = timeout } else { longpoll = nil }
        var connection = try await self.connection()

        enum Step { case subscribe(continuous: Bool), wait(Duration?), caughtUp, restart }
        for attempt in 0..<2 {
            let step: Step = connection.pull.withLock { state in
                if state.feed == .none { return .subscribe(continuous: longpoll != nil) }
                guard state.key == key, state.nextSince == request.since else { return .restart }
                if !state.queue.isEmpty { return .wait(nil) }
                switch state.feed {
                case .oneShot where !state.caughtUp: return .wait(nil)
                case .oneShot: return longpoll != nil ? .subscribe(continuous: true) : .caughtUp
                case .continuous: return state.caughtUp && longpoll == nil ? .caughtUp : .wait(state.caughtUp ? longpoll : nil)
                case .none: return .subscribe(continuous: longpoll != nil)
                }
            }
            switch step {
            case .restart where attempt == 0:
                drop(connection)
                connection = try await self.connection()
                continue
            case .restart:
                throw ReplicationError(.transient, "the pull from \(settings.displayName) could not start over")
            case .caughtUp:
                return ChangesBatch(results: [], lastSeq: request.since, pending: 0)
            case .subscribe(let continuous):
                try await subscribe(connection, request, key: key, continuous: continuous)
                return try await next(connection, since: request.since, timeout: nil)
            case .wait(let timeout):
                return try await next(connection, since: request.since, timeout: timeout)
            }
        }
        throw ReplicationError(.transient, "the pull from \(settings.displayName) could not start over")
    }

    /// The filter name of a pull by channels (Sync Gateway's).
    static let channelFilter = "sync_gateway/bychannel"

    /// `subChanges` from `request.since`.
    private func subscribe(_ connection: BLIPClientConnection, _ request: ChangesRequest, key: String, continuous: Bool) async throws(ReplicationError) {
        var properties: BLIPProperties = ["batch": String(max(1, min(request.limit, 1000)))]
        if request.since != .int(0) && request.since != .string("0") && request.since != .null {
            properties["since"] = request.since.jsonString
        }
        if continuous { properties["continuous"] = "true" }
        if let filter = request.filter {
            properties["filter"] = filter
            for (name, value) in request.queryParams.sorted(by: { $0.key < $1.key }) { properties[name] = value }
        }
        var body: [UInt8] = []
        if let ids = request.documentIDs { body = JSON.object(["docIDs": .array(ids.map(JSON.string))]).serializedBytes }
        connection.pull.withLock { state in
            state.feed = continuous ? .continuous : .oneShot
            state.key = key
            state.caughtUp = false
            state.nextSince = request.since
        }
        let reply = try await connection.request(.request(profile: "subChanges", properties: properties, body: body))
        if let error = reply.errorInfo {
            connection.pull.withLock { $0.feed = .none }
            throw connection.error(error, "subChanges")
        }
    }

    /// The server's next batch as a page of changes (an empty page once it is caught up, or when `timeout` passes).
    private func next(_ connection: BLIPClientConnection, since: JSON, timeout: Duration?) async throws(ReplicationError) -> ChangesBatch {
        guard let batch = try await connection.nextBatch(timeout: timeout) else {
            return ChangesBatch(results: [], lastSeq: since)
        }
        return connection.pull.withLock { state in
            guard let lastSeq = batch.lastSeq else {
                // "Caught up" (answered as it came).
                state.caughtUp = true
                return ChangesBatch(results: [], lastSeq: since, pending: 0)
            }
            state.unanswered.append(batch)
            state.nextSince = lastSeq
            return ChangesBatch(results: batch.entries.map(\.change), lastSeq: lastSeq)
        }
    }

    /// Answers the server's `changes` request that `batch` came from: for each of its revisions, the ancestors the
    /// local database has when it lacks the revision (`requests` lists those), else `0`. The server then sends the
    /// wanted revisions as `rev` requests, which ``fetch(_:)`` collects.
    func answer(_ batch: ChangesBatch, wanting requests: [FetchRequest]) async throws(ReplicationError) {
        let connection = try await self.connection()
        let wanted = Dictionary(requests.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let found: PullState.Batch? = connection.pull.withLock { state in
            guard let index = state.unanswered.firstIndex(where: { $0.lastSeq == batch.lastSeq || ($0.lastSeq == nil && batch.results.isEmpty) })
            else { return nil }
            let pending = state.unanswered.remove(at: index)
            for (_, change) in pending.entries {
                guard let request = wanted[change.id], let rev = change.revs.first, request.revs.contains(rev) else { continue }
                state.expected[PullState.RevKey(id: change.id, rev: rev.description)] = request.attsSince
            }
            return pending
        }
        guard let pending = found else {
            throw ReplicationError(.transient, "the batch of changes from \(settings.displayName) came on an earlier connection")
        }
        var answer = [JSON](repeating: .int(0), count: pending.count)
        for (position, change) in pending.entries {
            guard let request = wanted[change.id], let rev = change.revs.first, request.revs.contains(rev) else { continue }
            answer[position] = .array(request.attsSince.map { .string($0.description) })
        }
        while case .int(0)? = answer.last { answer.removeLast() }
        connection.session.send(.response(to: pending.number, body: JSON.array(answer).serializedBytes))
    }

    /// The revisions ``answer(_:wanting:)`` asked for, as the server sends them; those it can't send (`norev`) are
    /// left out. Waits up to five minutes for the server before giving up on the connection.
    func fetch(_ requests: [FetchRequest]) async throws(ReplicationError) -> [ReplicatedRevision] {
        let connection = try await self.connection()
        let keys = requests.flatMap { request in request.revs.map { PullState.RevKey(id: request.id, rev: $0.description) } }
        let watchdog = Task {
            try await Task.sleep(for: Self.fetchTimeout)
            connection.abandon(keys, ReplicationError(.transient, "\(settings.displayName) sent no revision for \(Self.fetchTimeout)"))
            self.drop(connection)
        }
        defer { watchdog.cancel() }
        var revisions: [ReplicatedRevision] = []
        revisions.reserveCapacity(keys.count)
        do {
            for key in keys {
                if case .revision(let revision) = try await connection.arrival(of: key) { revisions.append(revision) }
            }
        } catch {
            throw ReplicationError.from(error)
        }
        return revisions
    }

    /// How long ``fetch(_:)`` waits for the server's revisions.
    static let fetchTimeout: Duration = .seconds(300)
}
