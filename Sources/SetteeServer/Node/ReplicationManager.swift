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
// @unchecked: `jobs`, `pending`, the loops, `stopped`, `seenDocuments` and `failedJobs` are guarded by `lock`, which
// the manager's extensions (the `_replicator` watcher, the scheduler) share.
final class ReplicationManager: @unchecked Sendable {
    /// What a job replicates, normalized from a `_replicate` body or a `_replicator` document.
    struct Spec: Sendable {
        var source: JSON
        var target: JSON
        var continuous = false
        var createTarget = false
        /// `create_target_params`: how a created target is made (`{"partitioned": true}`), as query parameters.
        var createTargetParameters: [(String, String)] = []
        var documentIDs: [String]?
        var selector: JSON?
        /// `filter: "ddoc/name"` and its `query_params`; `filterSource` is the function's code when it was read.
        var filter: String?
        var queryParams: [String: String] = [:]
        var filterSource: String?
        /// `since_seq`: where a replication without checkpoints starts.
        var sinceSequence: JSON?
        /// `allow_insecure_credentials`: credentials may go over plain HTTP to a non-loopback host.
        var allowInsecureCredentials = false

        /// Compared to notice that a `_replicator` document's replication changed.
        var fingerprint: String {
            var o: JSONObject = ["source": source, "target": target, "continuous": .bool(continuous),
                                 "create_target": .bool(createTarget)]
            if !createTargetParameters.isEmpty {
                o["create_target_params"] = .object(JSONObject(createTargetParameters.map { ($0.0, JSON.string($0.1)) }))
            }
            if let documentIDs { o["doc_ids"] = .array(documentIDs.map(JSON.string)) }
            if let sinceSequence { o["since_seq"] = sinceSequence }
            if let selector { o["selector"] = selector }
            if let filter {
                o["filter"] = .string(filter)
                o["query_params"] = .object(JSONObject(queryParams.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) }))
            }
            if allowInsecureCredentials { o["allow_insecure_credentials"] = true }
            return JSON.object(o).jsonString
        }
    }

    final class Job: Sendable {
        let id: String
        let docID: String?
        let spec: Spec
        let replication: Replication
        private struct State {
            var task: Task<Void, Never>?
            var onCancel: (@Sendable () -> Void)?
            var onEnd: (@Sendable (Result<ReplicationResult, ReplicationError>) async -> Void)?
            var cancelled = false
            var running = false
            var rotating = false
            var startedOn = Date()
        }
        private let state = Mutex(State())
        /// Where the scheduler started it last (a job waiting for a slot keeps its last start).
        var startedOn: Date { state.withLock { $0.startedOn } }
        /// Whether it runs now (started by the scheduler), rather than waiting for a slot.
        var isRunning: Bool { state.withLock { $0.running } }
        /// Runs when the job ends by itself (a `_replicator` document's state written back).
        var onEnd: (@Sendable (Result<ReplicationResult, ReplicationError>) async -> Void)? {
            get { state.withLock { $0.onEnd } }
            set { state.withLock { $0.onEnd = newValue } }
        }

        /// Marks it running (the scheduler started it).
        func markStarted() {
            state.withLock {
                $0.running = true
                $0.rotating = false
                $0.startedOn = Date()
            }
        }

        /// The scheduler stops it to give its slot to a waiting job; it waits for a slot again afterwards.
        /// Returns false if it was already stopping.
        func rotateOut() -> Bool {
            let task: Task<Void, Never>? = state.withLock { state in
                guard state.running, !state.rotating, !state.cancelled else { return nil }
                state.rotating = true
                return state.task
            }
            task?.cancel()
            return task != nil
        }

        /// Called as its run ends: whether the scheduler stopped it (to run again later) rather than it ending.
        func endRun() -> Bool {
            state.withLock { state in
                state.running = false
                defer { state.rotating = false }
                return state.rotating && !state.cancelled
            }
        }

        /// The background run of a continuous or `_replicator` job.
        var task: Task<Void, Never>? {
            get { state.withLock { $0.task } }
            set {
                let cancelNow = state.withLock { $0.task = newValue; return $0.cancelled }
                if cancelNow { newValue?.cancel() }
            }
        }

        /// Stops a one-shot `_replicate` that runs inside its request.
        var onCancel: (@Sendable () -> Void)? {
            get { state.withLock { $0.onCancel } }
            set {
                let cancelNow = state.withLock { $0.onCancel = newValue; return $0.cancelled }
                if cancelNow { newValue?() }
            }
        }

        /// Stops the job (also if its task is attached only afterwards).
        func cancel() {
            let (task, onCancel) = state.withLock { state in
                state.cancelled = true
                return (state.task, state.onCancel)
            }
            task?.cancel()
            onCancel?()
        }

        init(id: String, docID: String?, spec: Spec, replication: Replication) {
            self.id = id
            self.docID = docID
            self.spec = spec
            self.replication = replication
        }
    }

    unowned let node: Node
    let lock = NSLock()
    var jobs: [String: Job] = [:]
    /// Scheduled jobs waiting for a slot (ids, oldest first): CouchDB's scheduler runs at most `[replicator]
    /// max_jobs` continuous and `_replicator` jobs at once.
    var pending: [String] = []
    private var schedulerLoop: Task<Void, Never>?
    var replicatorWatch: Task<Void, Never>?
    private var peerLoop: Task<Void, Never>?
    var stopped = false
    /// Each `_replicator` document's content (without `_replication_*` fields) as last acted upon, so the
    /// node's own state writes, which come back through the feed, are not acted upon again.
    var seenDocuments: [String: String] = [:]
    /// Jobs that stopped on an error (newest last, at most 50), for `_scheduler/jobs`.
    var failedJobs: [(job: Job, error: ReplicationError, at: Date)] = []
    let logger = Logger(label: "settee.replicator")

    init(node: Node) {
        self.node = node
    }

    // MARK: Specs and endpoints

    /// Parses a `_replicate` body or `_replicator` document.
    static func spec(_ body: JSONObject) throws -> Spec {
        guard let source = body["source"], source.stringValue != nil || source.objectValue != nil,
              let target = body["target"], target.stringValue != nil || target.objectValue != nil
        else { throw CouchError.badRequest("Replication needs `source` and `target` (database names or URLs)") }
        var spec = Spec(source: source, target: target)
        for flag in ["continuous", "create_target", "cancel", "allow_insecure_credentials"] {
            if let v = body[flag], !v.isNull, v.boolValue == nil {
                throw CouchError.badRequest("`\(flag)` must be true or false")
            }
        }
        spec.continuous = body["continuous"]?.boolValue ?? false
        spec.createTarget = body["create_target"]?.boolValue ?? false
        switch body["create_target_params"] {
        case nil, .null?: break
        case .object(let params)?:
            spec.createTargetParameters = params.map { ($0.key, $0.value.stringValue ?? $0.value.jsonString) }
            // (Checked here for a local target as `PUT /{db}` checks it for a remote one.)
            if let p = spec.createTargetParameters.first(where: { $0.0 == "partitioned" }), !["true", "false"].contains(p.1) {
                throw CouchError.badRequest("Invalid `partitioned` parameter")
            }
        default: throw CouchError.badRequest("`create_target_params` must be an object")
        }
        spec.allowInsecureCredentials = body["allow_insecure_credentials"]?.boolValue ?? false
        if let ids = body["doc_ids"], !ids.isNull {
            guard let list = ids.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                throw CouchError.badRequest("`doc_ids` must be an array of strings")
            }
            // As CouchDB's replicator: ids are URL-unquoted (`_design%2Ffoo` is `_design/foo`), sorted, deduplicated.
            let ids = list.compactMap(\.stringValue).map { $0.removingPercentEncoding ?? $0 }
            spec.documentIDs = Array(Set(ids)).sorted()
        }
        if let selector = body["selector"], !selector.isNull {
            guard selector.objectValue != nil else { throw CouchError.badRequest("`selector` must be a JSON object") }
            do { _ = try MangoSelector(selector) } catch { throw CouchError.badRequest("Invalid selector: \(error)") }
            spec.selector = selector
        }
        if let since = body["since_seq"], !since.isNull { spec.sinceSequence = since }
        if let filter = body["filter"]?.stringValue, filter != "_doc_ids", filter != "_selector" {
            guard filter.split(separator: "/").count == 2 else {
                throw CouchError.badRequest("`filter` must be of the form `designname/filtername`")
            }
            spec.filter = filter
            switch body["query_params"] {
            case nil, .null?: break
            case .object(let params)?:
                for (k, v) in params { spec.queryParams[k] = v.stringValue ?? v.jsonString }
            default: throw CouchError.badRequest("`query_params` must be an object")
            }
        }
        return spec
    }

    /// A database name (this node) or a URL (any CouchDB-compatible server), as CouchDB accepts them: a string,
    /// or `{"url": …, "headers": {…}, "auth": {"basic": {"username", "password"}}}`.
    /// Remote endpoints verify HTTPS peers against the node's `--ca-file` (if any) and refuse to send credentials
    /// over plain HTTP to a non-loopback host unless the node (`--allow-insecure-credentials`) or the replication
    /// (`allow_insecure_credentials`) allows it.
    func endpoint(_ value: JSON, create: Bool, creationParameters: [(String, String)] = [],
                  allowInsecureCredentials: Bool = false) throws -> any Endpoint {
        var url = value.stringValue
        var headers: [(String, String)] = []
        var auth: RemoteEndpoint.Authentication?
        if case .object(let o) = value {
            url = o["url"]?.stringValue
            for (k, v) in o["headers"]?.objectValue ?? [:] { if let s = v.stringValue { headers.append((k, s)) } }
            if let basic = o["auth"]?["basic"]?.objectValue, let user = basic["username"]?.stringValue {
                auth = .basic(user: user, password: basic["password"]?.stringValue ?? "")
            }
        }
        guard let url, !url.isEmpty else { throw CouchError.badRequest("Endpoint needs a `url`") }
        if url.contains("://") {
            do {
                var remote = try RemoteEndpoint(url: url, authentication: auth, headers: headers,
                                                trustedRootCertificatesPath: node.configuration.caFile,
                                                allowInsecureCredentials: allowInsecureCredentials
                                                    || node.configuration.allowInsecureCredentials)
                remote.creationParameters = creationParameters
                return remote
            } catch let e as ReplicationError {
                throw CouchError.badRequest(e.message)
            }
        }
        let keyspace = try Keyspace(url)
        if create && !Database.exists(name: keyspace.database, inDirectory: node.configuration.dataDirectory) {
            let partitioned = creationParameters.contains { $0.0 == "partitioned" && $0.1 == "true" }
            _ = try? node.createDatabase(keyspace.database, partitioned: partitioned)
        }
        do {
            let (_, collection) = try keyspace.open(node)
            var local = LocalEndpoint(collection: collection)
            local.maxDocumentSize = node.configuration.maxDocumentSize
            local.maxAttachmentSize = node.configuration.maxAttachmentSize
            local.filterEvaluator = Self.filterEvaluator
            local.selectorMatcher = { ViewCollator.matches($0, $1) }
            return local
        } catch let e as SetteeError where e.code == .notFound {
            throw CouchError(.notFound, "db_not_found", "could not open \(url)")
        }
    }

    func options(_ spec: Spec) -> ReplicationOptions {
        var o = ReplicationOptions()
        o.metricsFactory = node.metrics.factory
        o.continuous = spec.continuous
        o.createTarget = spec.createTarget
        o.documentIDs = spec.documentIDs
        o.selector = spec.selector
        o.sinceSequence = spec.sinceSequence
        o.filter = spec.filter
        o.queryParams = spec.queryParams
        o.filterSource = spec.filterSource
        return o
    }

    /// Runs a local source's filter function for the replicator (`filter: "ddoc/name"`), `req.query` being the
    /// replication's `query_params`.
    static let filterEvaluator: LocalEndpoint.FilterEvaluator = { collection, filter, params, document in
        var query = JSONObject()
        for (k, v) in params.sorted(by: { $0.key < $1.key }) { query[k] = .string(v) }
        let request: JSON = ["query": .object(query), "method": "GET", "headers": [:], "body": "undefined",
                             "userCtx": ["db": .string(collection.database.name), "name": nil, "roles": ["_admin"]],
                             "info": ["db_name": .string(collection.database.name)], "form": [:], "cookie": [:]]
        return try JavaScriptFilter.resolve(filter, view: false, collection: collection, request: request).passes(document)
    }

    /// The source's filter function code, to tell a replication with an edited filter from the one before it.
    static func filterSource(_ spec: Spec, _ source: any Endpoint) async -> String? {
        guard let filter = spec.filter else { return nil }
        let parts = filter.split(separator: "/", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return nil }
        var ddoc: JSONObject?
        if let local = source as? LocalEndpoint {
            ddoc = try? local.collection.record(id: "_design/" + parts[0]).flatMap { r in
                r.deleted ? nil : (try? JSON.parse(r.body))?.objectValue
            }
        } else if let remote = source as? RemoteEndpoint {
            ddoc = try? await remote.document(id: "_design/" + parts[0])
        }
        return ddoc?["filters"]?[parts[1]]?.stringValue
    }

    static func suffix(_ spec: Spec) -> String {
        (spec.continuous ? "+continuous" : "") + (spec.createTarget ? "+create_target" : "")
    }

    // MARK: _replicate

    /// `POST /_replicate`: runs a one-shot replication to its end, or starts a continuous one; or cancels.
    func replicate(_ body: JSONObject) async throws -> (status: Int, body: JSON) {
        if body["cancel"]?.boolValue == true {
            var id = body["replication_id"]?.stringValue ?? body["id"]?.stringValue
            if id == nil {
                let spec = try Self.spec(body)
                let source = try endpoint(spec.source, create: false, allowInsecureCredentials: spec.allowInsecureCredentials)
                let target = try endpoint(spec.target, create: spec.createTarget, creationParameters: spec.createTargetParameters,
                                          allowInsecureCredentials: spec.allowInsecureCredentials)
                id = Replication(source: source, target: target, options: options(spec)).replicationID + Self.suffix(spec)
            }
            guard let id, let job = removeJob(id) else {
                throw CouchError(.notFound, "not_found", "Replication \(id ?? "") is not running")
            }
            job.cancel()
            return (200, ["ok": true, "_local_id": .string(id)])
        }
        var spec = try Self.spec(body)
        let source = try endpoint(spec.source, create: false, allowInsecureCredentials: spec.allowInsecureCredentials)
        try await checkSourceBeforeCreating(spec, source)
        spec.filterSource = await Self.filterSource(spec, source)
        let target = try endpoint(spec.target, create: spec.createTarget, creationParameters: spec.createTargetParameters,
                                  allowInsecureCredentials: spec.allowInsecureCredentials)
        let replication = Replication(source: source, target: target, options: options(spec), logger: logger)
        let id = replication.replicationID + Self.suffix(spec)
        if spec.continuous {
            if lock.withLock({ jobs[id] }) == nil { start(Job(id: id, docID: nil, spec: spec, replication: replication)) }
            return (202, ["ok": true, "_local_id": .string(id)])
        }
        let job = Job(id: id, docID: nil, spec: spec, replication: replication)
        let run = Task { try await replication.run() }
        job.onCancel = { run.cancel() }
        job.markStarted()
        lock.withLock { jobs[id] = job }
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
            throw Self.couchError(e)
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
        } catch let e as ReplicationError {
            throw Self.couchError(e)
        }
    }

    /// The `_replicate` answer for a finished one-shot replication (CouchDB's shape).
    /// A `doc_ids` replication answers without checkpoint history, as CouchDB's (which keeps no checkpoints for
    /// them): `start_time`, `end_time` and the counters.
    static func report(_ result: ReplicationResult, documentIDs: Bool = false) -> JSONObject {
        let s = result.status
        var entry = result.history.first?.objectValue ?? ["session_id": .string(result.sessionID)]
        entry["replication_id"] = .string(result.replicationID)
        if documentIDs {
            var out: JSONObject = ["ok": true]
            for key in ["start_time", "end_time", "docs_read", "docs_written", "doc_write_failures"] {
                out[key] = entry[key] ?? .null
            }
            if s.revisionsChecked == 0 { out["no_changes"] = true }
            return out
        }
        var history = result.history
        if history.isEmpty { history = [.object(entry)] } else { history[0] = .object(entry) }
        var out: JSONObject = ["ok": true, "session_id": .string(result.sessionID),
                               "source_last_seq": result.sourceLastSeq, "replication_id_version": 4,
                               "history": .array(history)]
        if s.revisionsChecked == 0 { out["no_changes"] = true }
        return out
    }

    static func couchError(_ e: ReplicationError) -> CouchError {
        switch e.kind {
        case .unauthorized: return CouchError(.unauthorized, "unauthorized", e.message)
        case .forbidden: return CouchError(.forbidden, "forbidden", e.message)
        case .notFound, .unreachable: return CouchError(.notFound, "db_not_found", "could not open: \(e.message)")
        case .badRequest, .unsupported: return CouchError(.badRequest, "bad_request", e.message)
        case .transient, .cancelled: return CouchError(.badGateway, "replication_failed", e.message)
        case .tls: return CouchError(.badGateway, "tls_error", e.message)
        case .local: return CouchError(.internalServerError, "replication_failed", e.message)
        }
    }

    // MARK: Jobs

    @discardableResult
    func removeJob(_ id: String, ifSame job: Job? = nil) -> Job? {
        lock.withLock {
            guard let existing = jobs[id], job == nil || existing === job else { return nil }
            jobs[id] = nil
            pending.removeAll { $0 == id }  // (a job cancelled while it waited for a slot)
            return existing
        }
    }

    /// `_active_tasks` entries for the running replications (CouchDB's fields).
    var activeTasks: [JSON] {
        let all = lock.withLock { Array(jobs.values) }.filter(\.isRunning)
        return all.map { job in
            let s = job.replication.status
            var o: JSONObject = [
                "type": "replication", "node": "settee@localhost", "pid": .string("<\(job.id.prefix(8))>"),
                "replication_id": .string(job.id), "doc_id": job.docID.map(JSON.string) ?? .null,
                "database": job.docID == nil ? .null : "_replicator",
                "source": .string(job.replication.source.displayName),
                "target": .string(job.replication.target.displayName),
                "continuous": .bool(job.spec.continuous),
                "state": .string(s.activity.name),
                "source_seq": s.sourceSeq, "checkpointed_source_seq": s.checkpointedSourceSeq,
                "through_seq": s.checkpointedSourceSeq,
                "revisions_checked": .int(Int64(s.revisionsChecked)),
                "missing_revisions_found": .int(Int64(s.missingRevisionsFound)),
                "docs_read": .int(Int64(s.docsRead)), "docs_written": .int(Int64(s.docsWritten)),
                "doc_write_failures": .int(Int64(s.docWriteFailures)),
                "changes_pending": s.changesPending.map { .int(Int64($0)) } ?? .null,
                "checkpoint_interval": 0,
                "started_on": .int(Int64(job.startedOn.timeIntervalSince1970)),
                "updated_on": .int(Int64(s.updatedOn.timeIntervalSince1970)),
            ]
            if let e = s.error { o["last_error"] = .string(e.description) }
            o["error_count"] = .int(Int64(s.errorCount))
            return .object(o)
        }
    }

    /// Jobs that stopped on an error, newest first (`_scheduler/jobs` lists them as `failed`).
    var failures: [JSON] {
        lock.withLock { failedJobs }.reversed().map { job, error, at in
            let s = job.replication.status
            return .object([
                "type": "replication", "node": "settee@localhost", "pid": .null, "state": "failed",
                "replication_id": .string(job.id), "doc_id": job.docID.map(JSON.string) ?? .null,
                "database": job.docID == nil ? .null : "_replicator",
                "source": .string(job.replication.source.displayName),
                "target": .string(job.replication.target.displayName),
                "continuous": .bool(job.spec.continuous),
                "last_error": .string(error.description), "error_count": .int(Int64(s.errorCount + 1)),
                "revisions_checked": .int(Int64(s.revisionsChecked)),
                "missing_revisions_found": .int(Int64(s.missingRevisionsFound)),
                "docs_read": .int(Int64(s.docsRead)), "docs_written": .int(Int64(s.docsWritten)),
                "doc_write_failures": .int(Int64(s.docWriteFailures)),
                "changes_pending": s.changesPending.map { .int(Int64($0)) } ?? .null,
                "checkpointed_source_seq": s.checkpointedSourceSeq,
                "started_on": .int(Int64(job.startedOn.timeIntervalSince1970)),
                "updated_on": .int(Int64(at.timeIntervalSince1970)),
            ])
        }
    }

    // MARK: Lifecycle

    /// Starts the persistent replications (`_replicator`) and the peers' ones.
    func startBackground() {
        if Database.exists(name: "_replicator", inDirectory: node.configuration.dataDirectory) { watchReplicatorDatabase() }
        if !node.configuration.peers.isEmpty {
            peerLoop = Task { [weak self] in await self?.runPeers() }
        }
        schedulerLoop = Task { [weak self] in await self?.runScheduler() }
    }

    /// Stops every replication and waits (briefly) for them to record their checkpoints.
    func stopAll() async {
        let (all, watch, peers, scheduler) = lock.withLock {
            stopped = true
            let all = Array(jobs.values)
            jobs.removeAll()
            pending.removeAll()
            return (all, replicatorWatch, peerLoop, schedulerLoop)
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
        let registered = lock.withLock { () -> Bool in
            guard !stopped, jobs[id] == nil else { return false }
            jobs[id] = job
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
