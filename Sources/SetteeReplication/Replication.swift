import Foundation
public import Logging
public import Metrics
public import SetteeCore
import Synchronization
public import SetteeStore

/// Options of one replication (one direction, source → target).
public struct ReplicationOptions: Sendable {
    /// Keep following the source's feed after catching up (CouchDB's `continuous`).
    public var continuous = false
    /// Create the target database when it does not exist (`create_target`).
    public var createTarget = false
    /// Only these documents (`doc_ids`).
    public var documentIDs: [String]?
    /// Only documents matching this Mango selector (`selector`).
    public var selector: JSON?
    /// Only documents a filter function of the source passes (`filter: "ddoc/name"`), given `queryParams`.
    public var filter: String?
    public var queryParams: [String: String] = [:]
    /// The filter function's source, when known: part of the replication id, so editing the function starts over.
    public var filterSource: String?
    /// Changes per batch; each batch is diffed, fetched, written and checkpointed as a unit.
    public var batchSize = 500
    /// Ignore checkpoints and start from the beginning (Couchbase Lite's `start(reset: true)`).
    public var reset = false
    /// Start from this source sequence instead of the checkpoint's (CouchDB's `since_seq`); part of the
    /// replication id, so such a replication keeps checkpoints of its own.
    public var sinceSequence: JSON?
    /// Failed attempts (peer unreachable, 5xx) before a one-shot replication gives up.
    public var maxAttempts = 10
    /// Failed attempts before a continuous replication gives up: by default never (CouchDB's behaviour).
    public var continuousMaxAttempts = Int.max
    /// The first retry delay; each further attempt doubles it (with jitter) up to ``maxRetryDelay``.
    public var retryDelay: Duration = .milliseconds(500)
    public var maxRetryDelay: Duration = .seconds(60)
    /// How long a continuous replication's long poll waits before asking again, and its heartbeat.
    public var longpollTimeout: Duration = .seconds(60)
    public var heartbeat: Duration = .seconds(10)
    /// Resolves conflicts the pulled revisions create (only when the target is a ``LocalEndpoint``).
    public var conflictResolver: (any ConflictResolverProtocol)?
    /// Revisions this returns false for are not written to the target (Couchbase Lite's push and pull filters);
    /// the checkpoint passes them, so they are not offered again until they change.
    public var revisionFilter: (@Sendable (ReplicatedRevision) -> Bool)?
    /// Called after each written batch with the revisions written and the ones that failed (Couchbase Lite's
    /// document replication listeners).
    public var onDocuments: (@Sendable (_ written: [ReplicatedRevision], _ failures: [DocumentFailure]) -> Void)?
    /// Purge the local copy of a pulled document the user lost access to (Couchbase Lite's `enableAutoPurge`).
    public var autoPurge = true
    /// Called with the ids of pulled documents the user lost access to (after they were purged, with ``autoPurge``).
    public var onRemoved: (@Sendable (_ ids: [String]) -> Void)?
    /// Where the `settee_replication_*` counters and stage timers go; nil: swift-metrics' process-wide factory.
    public var metricsFactory: (any MetricsFactory)?

    public init() {}
}

/// What a finished one-shot replication reports (the shape of CouchDB's `POST /_replicate` answer).
public struct ReplicationResult: Sendable {
    public var replicationID: String
    public var sessionID: String
    public var sourceLastSeq: JSON
    public var status: ReplicatorStatus
    /// The checkpoint history: this run's entry (CouchDB's fields) first, then earlier sessions' (at most 50 in
    /// all); empty when the run didn't get as far as reading checkpoints.
    public var history: [JSON]
    /// True when the replication caught up and finished; false when it was stopped first (or is continuous).
    public var completed: Bool
}

/// One replication from a source endpoint to a target endpoint, following the CouchDB replication protocol:
/// read checkpoints, then in batches read `_changes`, ask the target's `_revs_diff`, fetch the missing revisions
/// (`_bulk_get`), store them with `new_edits=false` (`_bulk_docs`) and record a checkpoint.
///
/// The three stages overlap: while batch *n* is written, batch *n+1* is diffed and fetched and batch *n+2* read.
/// Transient failures (peer unreachable, 5xx, truncated responses) are retried with exponential backoff and
/// jitter, resuming from the last checkpoint; 401/403/404 stop the replication with an error.
public final class Replication: Sendable {
    public let source: any Endpoint
    public let target: any Endpoint
    public let options: ReplicationOptions
    /// Stable across runs: derived from both endpoints and the filter.
    public let replicationID: String

    private let box: StatusBox
    private let logger: Logger
    /// The checkpoint state, once the replication has read or made it.
    private let checkpointer = Mutex<Checkpointer?>(nil)
    let stages: StageTimes
    let counters: ReplicationCounters

    /// - Parameter onStatus: called (on an arbitrary thread) after every status change.
    public init(source: any Endpoint, target: any Endpoint, options: ReplicationOptions = ReplicationOptions(),
                logger: Logger = Database.log.logger(label: "settee.replication", domain: .replicator),
                onStatus: @escaping @Sendable (ReplicatorStatus) -> Void = { _ in }) {
        self.source = source
        self.target = target
        self.options = options
        self.logger = logger
        self.replicationID = Checkpointer.replicationID(source: source, target: target,
                                                        documentIDs: options.documentIDs, selector: options.selector,
                                                        sinceSequence: options.sinceSequence,
                                                        filter: options.filter.map { f -> JSON in
                                                            ["filter": .string(f), "code": options.filterSource.map(JSON.string) ?? .null,
                                                             "query_params": .object(JSONObject(options.queryParams.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) }))]
                                                        })
        self.box = StatusBox(onChange: onStatus)
        self.counters = ReplicationCounters(factory: options.metricsFactory)
        self.stages = StageTimes(factory: options.metricsFactory)
    }

    /// The current status.
    public var status: ReplicatorStatus { box.current }

    /// Runs the replication: a one-shot one until it has caught up, a continuous one until its task is cancelled.
    ///
    /// - Returns: the final status and checkpoint (for a cancelled continuous replication too).
    /// - Throws: ``ReplicationError`` when it stops on an error (after retries, for transient ones).
    @discardableResult
    public func run() async throws -> ReplicationResult {
        var failures = 0
        box.update { $0 = ReplicatorStatus(); $0.activity = .connecting }
        while true {
            do {
                try await stages.time(.total) { try await attempt(onProgress: { failures = 0 }) }
                stages.dump(replicationID)
                box.update { $0.activity = .stopped; $0.error = nil }
                return result(completed: !options.continuous)
            } catch let error as ReplicationError where error.kind == .cancelled {
                box.update { $0.activity = .stopped }
                return result()
            } catch is CancellationError {
                box.update { $0.activity = .stopped }
                return result()
            } catch let error as ReplicationError where error.isTransient {
                failures += 1
                counters.retries.increment()
                if failures >= (options.continuous ? options.continuousMaxAttempts : options.maxAttempts) {
                    logger.error("replication \(replicationID) stopped after \(failures) attempts: \(error)")
                    box.update { $0.activity = .stopped; $0.error = error }
                    throw error
                }
                let delay = backoff(failures)
                logger.info("replication \(replicationID) offline (\(error)); retrying in \(delay)")
                box.update { $0.activity = .offline; $0.error = error; $0.errorCount += 1 }
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    box.update { $0.activity = .stopped }
                    return result()
                }
                box.update { $0.activity = .connecting }
            } catch {
                let e = ReplicationError.from(error)
                logger.error("replication \(replicationID) stopped: \(e)")
                box.update { $0.activity = .stopped; $0.error = e }
                throw e
            }
        }
    }

    private func backoff(_ failures: Int) -> Duration {
        let base = options.retryDelay * Int(1 << min(failures - 1, 16))
        let capped = min(base, options.maxRetryDelay)
        return capped * Double.random(in: 0.5...1.0)
    }

    private func result(completed: Bool = false) -> ReplicationResult {
        let cp = checkpointer.withLock { $0 }
        let history: [JSON] = cp.map { $0.history($0.lastRecorded, stats: box.current) } ?? []
        return ReplicationResult(replicationID: replicationID, sessionID: cp?.sessionID ?? "",
                                 sourceLastSeq: cp?.lastRecorded ?? .int(0), status: box.current, history: history,
                                 completed: completed)
    }

    // MARK: One attempt

    /// A batch that has been diffed and fetched, waiting to be written.
    private struct Fetched: Sendable {
        var lastSeq: JSON
        var revisions: [ReplicatedRevision]
        /// Documents the reader lost access to (``ChangeEntry/accessRemoved``).
        var removed: [String] = []
    }

    private func attempt(onProgress: @escaping () -> Void) async throws {
        box.update { $0.activity = .connecting }
        // Both peers are asked at once (a short replication is mostly round trips).
        let target = self.target
        async let targetCheck: Void = {
            do {
                _ = try await target.databaseInfo()
            } catch let e as ReplicationError where e.kind == .notFound && options.createTarget {
                try await target.createDatabase()
            }
        }()
        let sourceInfo = try await source.databaseInfo()
        try await targetCheck
        var cp = Checkpointer(replicationID: replicationID, source: source, target: target)
        try await cp.load(reset: options.reset, since: options.sinceSequence)
        checkpointer.withLock { $0 = cp }
        logger.debug("replication \(replicationID) from \(source.displayName) to \(target.displayName) since \(cp.startSeq)")
        box.update {
            $0.sourceSeq = sourceInfo.updateSeq
            $0.checkpointedSourceSeq = cp.startSeq
            $0.activity = .busy
        }
        if let resolver = options.conflictResolver, let local = target as? LocalEndpoint {
            // Conflicts left unresolved by an earlier run that stopped (or crashed) half-way.
            try await ConflictResolution.resolveAll(in: local.collection, resolver: resolver)
        }

        // The reader and fetcher run as tasks of their own (to overlap the stages); stopping must reach them.
        let inFlight = InFlight()
        try await withTaskCancellationHandler {
            try await pipeline(from: cp.startSeq, inFlight, onProgress: onProgress)
        } onCancel: {
            inFlight.cancelAll()
        }
    }

    private func pipeline(from start: JSON, _ inFlight: InFlight, onProgress: @escaping () -> Void) async throws {
        var since = start
        func read(since: JSON, wait: Bool) -> Reading {
            let reading = readTask(since: since, wait: wait)
            _ = inFlight.track(reading.changes)
            _ = inFlight.track(reading.diffed)
            return reading
        }
        var reader = read(since: since, wait: false)
        var fetcher: Task<Fetched, Error>?
        defer {
            reader.changes.cancel()
            reader.diffed.cancel()
            fetcher?.cancel()
        }
        // The next batch's changes are read, and its `_revs_diff` asked, as soon as this batch's changes are in —
        // beside this batch's diff, not after it: the diff is a round trip to the target (over Couchbase Lite's
        // protocol, queued behind the `rev`s in flight), and with one at a time it was the pipeline's slowest
        // stage. A pull over that protocol answers the server's `changes` messages in order, one at a time.
        let readsAhead = (source as? RemoteEndpoint)?.blip == nil
        // Couchbase Lite's protocol acknowledges each pushed revision; as LiteCore's pusher keeps several change
        // lists in flight, the next batches' revisions go out while earlier batches' answers come in (three batches
        // in flight: measured ~7 % faster than two, and four no faster than three). Checkpoints stay in order: a batch
        // is recorded once it and every batch before it are written.
        let overlaps = (target as? RemoteEndpoint)?.speaksCouchbaseLiteProtocol == true && options.conflictResolver == nil
        var writing: [(task: Task<Void, Error>, lastSeq: JSON)] = []
        let maxWriting = 2  // besides the batch being submitted
        func submit(_ fetched: Fetched) async throws {
            guard overlaps else { return try await write(fetched) }
            let next = Task { try await self.writeRevisions(fetched) }
            while writing.count >= maxWriting { try await settleOldest() }
            writing.append((next, fetched.lastSeq))
        }
        // Its checkpoints are recorded behind the writes, one after another, rather than in their way: a
        // `setCheckpoint` queues behind the `rev`s of the batches in flight, and waiting for its answer before the
        // next batch went out stalled the pipeline for a few milliseconds a batch (as LiteCore's checkpointer,
        // which saves on a timer, never does). A failed checkpoint fails the replication when it settles.
        var recording: Task<Void, Error>?
        let checkpointFailure = FirstError()
        func settleOldest() async throws {
            guard !writing.isEmpty else { return }
            let prior = writing.removeFirst()
            try await prior.task.value
            // A checkpoint that failed fails the replication at the next batch, not only when the pipeline settles
            // (a busy continuous push may not settle for a long time).
            if let failed = checkpointFailure.error { throw failed }
            // In a task of its own: to completion even when the replication is stopped meanwhile (the "checkpoint
            // on stop"). In order: each waits for the one before it, whether or not that one succeeded.
            let previous = recording
            recording = Task {
                _ = await previous?.result
                do {
                    try await self.recordIfMoved(prior.lastSeq)
                } catch {
                    checkpointFailure.record(error)
                    throw error
                }
            }
        }
        func settle() async throws {
            do {
                while !writing.isEmpty { try await settleOldest() }
            } catch {
                // No checkpoint task outlives the attempt (a retry must not meet one still recording).
                _ = await recording?.result
                recording = nil
                throw error
            }
            let last = recording
            recording = nil
            try await last?.value
            if let failed = checkpointFailure.error { throw failed }
        }
        do {
            while true {
                try Task.checkCancellation()
                if fetcher == nil && options.continuous { box.update { $0.activity = .idle } }
                let batch = try await (readsAhead ? reader.changes.value : reader.diffed.value.batch)
                // The source says nothing follows this batch: a one-shot replication need not ask again.
                let finalBatch = batch.results.isEmpty || (!options.continuous && batch.pending == 0)
                let caughtUp = batch.results.isEmpty
                box.update {
                    if !caughtUp { $0.activity = .busy; $0.sourceSeq = batch.lastSeq }
                    if let p = batch.pending { $0.changesPending = p }
                }
                let moved = batch.lastSeq != since
                since = batch.lastSeq
                // Read ahead; once caught up (or nearly), a continuous replication long-polls the feed.
                let willWait = options.continuous && (caughtUp || batch.results.count < options.batchSize / 2)
                let current = reader
                if !finalBatch || options.continuous {
                    reader = read(since: since, wait: willWait)
                }
                let diffed = try await current.diffed.value
                let previous = try await fetcher?.value
                fetcher = caughtUp && !moved ? nil : inFlight.track(fetchTask(diffed))
                if let previous {
                    try await submit(previous)
                    onProgress()
                }
                if willWait, let current = fetcher {
                    // The next read may wait long: finish this batch now rather than behind it.
                    try await submit(try await current.value)
                    try await settle()
                    fetcher = nil
                    onProgress()
                }
                if finalBatch && !options.continuous {
                    if let last = try await fetcher?.value { try await submit(last) }
                    try await settle()
                    fetcher = nil
                    if let cp = checkpointer.withLock({ $0 }), cp.lastRecorded != since {
                        try await checkpoint(since)
                    }
                    return
                }
            }
        } catch {
            try? await settle()
            throw error
        }
    }

    /// A batch of changes and the target's answer to its `_revs_diff`.
    private struct Diffed: Sendable {
        var batch: ChangesBatch
        var requests: [FetchRequest]
        var removed: [String] = []
    }

    /// Stage one, in two tasks: read the next batch of changes (`changes`, done first: the next batch's read can
    /// start from its last sequence) and ask the target which of its revisions it lacks (`diffed`).
    private struct Reading: Sendable {
        let changes: Task<ChangesBatch, Error>
        let diffed: Task<Diffed, Error>
    }

    private func readTask(since: JSON, wait: Bool) -> Reading {
        let request = ChangesRequest(
            since: since, limit: options.batchSize,
            feed: wait && options.continuous ? .longpoll(timeout: options.longpollTimeout, heartbeat: options.heartbeat) : .normal,
            documentIDs: options.documentIDs, selector: options.documentIDs == nil ? options.selector : nil,
            filter: options.documentIDs == nil && options.selector == nil ? options.filter : nil, queryParams: options.queryParams)
        let source = self.source, target = self.target, box = self.box, stages = self.stages
        let namesAttachmentsBySHA1 = (target as? RemoteEndpoint)?.speaksCouchbaseLiteProtocol == true
        let changes = Task { try await stages.time(.changes) { try await source.changes(request) } }
        let diffed = Task {
            let batch = try await changes.value
            var revs: [(id: String, revs: [RevID])] = []
            var index: [String: Int] = [:]
            var removed: [String] = []
            for change in batch.results {
                if change.accessRemoved {
                    removed.append(change.id)
                    continue
                }
                if let i = index[change.id] {
                    revs[i].revs += change.revs.filter { !revs[i].revs.contains($0) }
                } else {
                    index[change.id] = revs.count
                    revs.append((change.id, change.revs))
                }
            }
            let checked = revs.reduce(0) { $0 + $1.revs.count }
            let diff = revs.isEmpty ? [:] : try await stages.time(.revsDiff) { try await target.revsDiff(revs) }
            var requests: [FetchRequest] = []
            requests.reserveCapacity(diff.count)
            var missing = 0
            for (id, _) in revs {
                guard let d = diff[id] else { continue }
                missing += d.missing.count
                // Couchbase Lite's protocol names every attachment of a pushed revision by its SHA-1, so each body
                // is read (the server asks only for those it lacks); CouchDB's sends stubs for the ones the target has.
                requests.append(FetchRequest(id: id, revs: d.missing, attsSince: namesAttachmentsBySHA1 ? [] : d.possibleAncestors))
            }
            if !batch.results.isEmpty, let blip = (source as? RemoteEndpoint)?.blip {
                // Couchbase Lite's protocol: the server sends what the answer to its `changes` asks for.
                try await blip.answer(batch, wanting: requests)
            }
            box.update {
                $0.revisionsChecked += checked
                $0.missingRevisionsFound += missing
            }
            return Diffed(batch: batch, requests: requests, removed: removed)
        }
        return Reading(changes: changes, diffed: diffed)
    }

    /// Stage two: fetch the missing revisions (`_bulk_get`).
    private func fetchTask(_ diffed: Diffed) -> Task<Fetched, Error> {
        let source = self.source, box = self.box, stages = self.stages, counters = self.counters
        return Task {
            let requests = diffed.requests
            let revisions = requests.isEmpty ? [] : try await stages.time(.fetch) { try await source.fetch(requests) }
            box.update { $0.docsRead += revisions.count }
            counters.docsRead.increment(by: revisions.count)
            return Fetched(lastSeq: diffed.batch.lastSeq, revisions: revisions, removed: diffed.removed)
        }
    }

    /// Writes a fetched batch and records its checkpoint. Runs to completion even when the replication is
    /// stopped meanwhile, so a stop never leaves a written batch unrecorded (the "checkpoint on stop").
    private func write(_ fetched: Fetched) async throws {
        try await Task { try await self.writeAndRecord(fetched) }.value
    }

    private func writeAndRecord(_ fetched: Fetched) async throws {
        try await writeRevisions(fetched)
        try await recordIfMoved(fetched.lastSeq)
    }

    /// Records a checkpoint at `seq` unless it is already the last one recorded.
    private func recordIfMoved(_ seq: JSON) async throws {
        if let cp = checkpointer.withLock({ $0 }), seq != cp.lastRecorded {
            try await checkpoint(seq)
        }
    }

    /// Writes a fetched batch's revisions (filters, listeners, counters, conflict resolution), without its
    /// checkpoint.
    private func writeRevisions(_ fetched: Fetched) async throws {
        var fetched = fetched
        if !fetched.removed.isEmpty, let local = target as? LocalEndpoint {
            // Couchbase Lite's auto-purge: a document the user can no longer read leaves the local database.
            let ids = fetched.removed
            if options.autoPurge { try await stages.time(.write) { try await local.purge(ids) } }
            options.onRemoved?(ids)
        }
        if let keep = options.revisionFilter { fetched.revisions = fetched.revisions.filter(keep) }
        if !fetched.revisions.isEmpty {
            let failures = try await stages.time(.write) { try await target.write(fetched.revisions) }
            if let onDocuments = options.onDocuments {
                let failed = Set(failures.map(\.id))
                onDocuments(fetched.revisions.filter { !failed.contains($0.id) }, failures)
            }
            let written = fetched.revisions.count - failures.count
            counters.docsWritten.increment(by: written)
            counters.docWriteFailures.increment(by: failures.count)
            for f in failures { logger.warning("replication \(replicationID): \(f)") }
            box.update {
                $0.docsWritten += written
                $0.docWriteFailures += failures.count
                if !failures.isEmpty { $0.documentErrors = Array(($0.documentErrors + failures).suffix(100)) }
            }
            if let resolver = options.conflictResolver, let local = target as? LocalEndpoint {
                try await ConflictResolution.resolve(fetched.revisions, in: local.collection, resolver: resolver)
            }
        }
    }

    private func checkpoint(_ seq: JSON) async throws {
        guard var cp = checkpointer.withLock({ $0 }) else { return }
        try await stages.time(.checkpoint) { try await cp.record(seq, stats: box.current) }
        counters.checkpoints.increment()
        let snapshot = cp
        checkpointer.withLock { $0 = snapshot }
        box.update { $0.checkpointedSourceSeq = seq }
    }
}

/// The first error of several tasks (a pipeline's checkpoints), for the pipeline to throw.
final class FirstError: Sendable {
    private let first = Mutex<(any Error)?>(nil)

    var error: (any Error)? { first.withLock { $0 } }

    func record(_ error: any Error) {
        first.withLock { $0 = $0 ?? error }
    }
}

/// The tasks a pipeline started, so that stopping the replication cancels them too.
final class InFlight: Sendable {
    private let state = Mutex<(cancels: [@Sendable () -> Void], cancelled: Bool)>(([], false))

    func track<T: Sendable>(_ task: Task<T, Error>) -> Task<T, Error> {
        let already = state.withLock { state in
            if !state.cancelled {
                // At most two readings (two tasks each) and a fetcher run at once; older ones have been awaited already.
                if state.cancels.count >= 8 { state.cancels.removeFirst() }
                state.cancels.append { task.cancel() }
            }
            return state.cancelled
        }
        if already { task.cancel() }
        return task
    }

    func cancelAll() {
        let all = state.withLock { state in
            state.cancelled = true
            return state.cancels
        }
        for c in all { c() }
    }
}
