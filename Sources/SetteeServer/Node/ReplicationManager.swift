import Foundation
import Logging
import SetteeCore
import SetteeIndex
import SetteeReplication
import SetteeStore
import Synchronization

/// The node's replications: transient ones from `POST /_replicate`, persistent ones from documents in the
/// `_replicator` database (restarted with the server, state written back to the document), and the continuous
/// push and pull with each `--peer`. Every running one is listed in `_active_tasks`.
final class ReplicationManager: Sendable {
    unowned let node: Node
    /// The jobs and loops, shared with the manager's extensions (the `_replicator` watcher, the scheduler).
    struct State {
        var jobs: [String: Job] = [:]
        /// Scheduled jobs waiting for a slot (ids, oldest first): CouchDB's scheduler runs at most `[replicator]
        /// max_jobs` continuous and `_replicator` jobs at once.
        var pending: [String] = []
        var schedulerLoop: Task<Void, Never>?
        var replicatorWatch: Task<Void, Never>?
        var peerLoop: Task<Void, Never>?
        var stopped = false
        /// Each `_replicator` document's content (without `_replication_*` fields) as last acted upon, so the
        /// node's own state writes, which come back through the feed, are not acted upon again.
        var seenDocuments: [String: String] = [:]
        /// Jobs that stopped on an error (newest last, at most 50), for `_scheduler/jobs`.
        var failedJobs: [(job: Job, error: ReplicationError, at: Date)] = []
    }
    let state = Mutex(State())
    let logger = Logger(label: "settee.replicator")

    init(node: Node) {
        self.node = node
    }

    // MARK: _replicate

    /// `POST /_replicate`: runs a one-shot replication to its end, or starts a continuous one; or cancels.
    /// `writer` is the requester: the replication writes into a local target as that user.
    func replicate(_ body: JSONObject, writer: WriteContext) async throws -> (status: Int, body: JSON) {
        if body["cancel"]?.boolValue == true {
            var id = body["replication_id"]?.stringValue ?? body["id"]?.stringValue
            if id == nil {
                var spec = try Self.spec(body)
                spec.writer = writer
                let source = try endpoint(spec.source, create: false, allowInsecureCredentials: spec.allowInsecureCredentials, writer: spec.writer)
                let target = try endpoint(spec.target, create: spec.createTarget, creationParameters: spec.createTargetParameters,
                                          allowInsecureCredentials: spec.allowInsecureCredentials, writer: spec.writer)
                id = Replication(source: source, target: target, options: options(spec)).replicationID + Self.suffix(spec)
            }
            guard let id, let job = removeJob(id) else {
                throw CouchError(.notFound, "not_found", "Replication \(id ?? "") is not running")
            }
            job.cancel()
            return (200, ["ok": true, "_local_id": .string(id)])
        }
        var spec = try Self.spec(body)
        spec.writer = writer
        let source = try endpoint(spec.source, create: false, allowInsecureCredentials: spec.allowInsecureCredentials, writer: spec.writer)
        try await checkSourceBeforeCreating(spec, source)
        spec.filterSource = await Self.filterSource(spec, source)
        let target = try endpoint(spec.target, create: spec.createTarget, creationParameters: spec.createTargetParameters,
                                  allowInsecureCredentials: spec.allowInsecureCredentials, writer: spec.writer)
        let replication = Replication(source: source, target: target, options: options(spec), logger: logger)
        let id = replication.replicationID + Self.suffix(spec)
        if spec.continuous {
            if state.withLock({ $0.jobs[id] }) == nil { start(Job(id: id, docID: nil, spec: spec, replication: replication)) }
            return (202, ["ok": true, "_local_id": .string(id)])
        }
        let job = Job(id: id, docID: nil, spec: spec, replication: replication)
        let run = Task { try await replication.run() }
        job.onCancel = { run.cancel() }
        job.markStarted()
        state.withLock { $0.jobs[id] = job }
        defer { _ = removeJob(id, ifSame: job) }
        do {
            let result = try await withTaskCancellationHandler {
                try await run.value
            } onCancel: {
                run.cancel()
            }
            var report = Self.report(result, documentIDs: spec.documentIDs != nil)
            if !result.completed {
                report["ok"] = false
                report["error"] = "cancelled"
                report["reason"] = "The replication was cancelled before it finished."
            }
            return (200, .object(report))
        } catch let e as ReplicationError {
            throw CouchError.from(e)
        }
    }

    /// With `create_target` and a local target that does not exist yet, the source must answer first: a
    /// replication that cannot read its source leaves no empty database behind.
    func checkSourceBeforeCreating(_ spec: Spec, _ source: any Endpoint) async throws {
        guard spec.createTarget, let name = spec.target.stringValue ?? spec.target["url"]?.stringValue,
              !name.contains("://"), let keyspace = try? Keyspace(name),
              !Database.exists(name: keyspace.database, inDirectory: node.configuration.dataDirectory) else { return }
        do {
            _ = try await source.databaseInfo()
        } catch {
            throw CouchError.from(error)
        }
    }

    // MARK: Jobs

    @discardableResult
    func removeJob(_ id: String, ifSame job: Job? = nil) -> Job? {
        state.withLock { s in
            guard let existing = s.jobs[id], job == nil || existing === job else { return nil }
            s.jobs[id] = nil
            s.pending.removeAll { $0 == id }  // (a job cancelled while it waited for a slot)
            return existing
        }
    }

    // MARK: Lifecycle

    /// Starts the persistent replications (`_replicator`) and the peers' ones.
    func startBackground() {
        if Database.exists(name: SystemDatabase.replicator.rawValue, inDirectory: node.configuration.dataDirectory) { watchReplicatorDatabase() }
        let peers: Task<Void, Never>? = node.configuration.peers.isEmpty ? nil : Task { [weak self] in
            guard let self else { return }
            await self.runPeers()
        }
        let scheduler = Task { [weak self] in
            guard let self else { return }
            await self.runScheduler()
        }
        state.withLock { s in
            s.peerLoop = peers
            s.schedulerLoop = scheduler
        }
    }

    /// Stops every replication and waits (briefly) for them to record their checkpoints.
    func stopAll() async {
        let (all, watch, peers, scheduler) = state.withLock { s in
            s.stopped = true
            let all = Array(s.jobs.values)
            s.jobs.removeAll()
            s.pending.removeAll()
            return (all, s.replicatorWatch, s.peerLoop, s.schedulerLoop)
        }
        watch?.cancel()
        peers?.cancel()
        scheduler?.cancel()
        for job in all { job.cancel() }
        for job in all { await job.task?.value }
    }

    // MARK: Peers

    /// Keeps every database here in step with the same-named database on each peer (``PeerSync``).
    private func runPeers() async {
        let peers = node.configuration.peers.map { PeerSync(peer: $0, manager: self) }
        await withTaskGroup(of: Void.self) { group in
            for peer in peers { group.addTask { await peer.run() } }
        }
    }

    /// Runs a one-shot replication listed in `_active_tasks` while it runs (a peer's); it stops with the node.
    func runTracked(_ replication: Replication, id: String, spec: Spec) async throws -> ReplicationResult {
        let job = Job(id: id, docID: nil, spec: spec, replication: replication)
        let run = Task { try await replication.run() }
        job.onCancel = { run.cancel() }
        job.markStarted()
        let registered = state.withLock { s -> Bool in
            guard !s.stopped, s.jobs[id] == nil else { return false }
            s.jobs[id] = job
            return true
        }
        guard registered else {
            run.cancel()
            throw ReplicationError(.cancelled, "stopped")
        }
        defer { _ = removeJob(id, ifSame: job) }
        return try await withTaskCancellationHandler { try await run.value } onCancel: { run.cancel() }
    }
}
