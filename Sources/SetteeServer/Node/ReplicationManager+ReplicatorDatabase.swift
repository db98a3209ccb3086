import Foundation
import SetteeCore
import SetteeReplication
import SetteeStore

/// Persistent replications: documents in the `_replicator` database, followed through its change feed; each
/// becomes a scheduled job, and its state (`triggered`, `completed`, `failed`) is written back into the document.
extension ReplicationManager {
    // MARK: _replicator

    /// Called when a database is created or deleted, to follow `_replicator`.
    func databaseCreated(_ name: String) {
        if name == SystemDatabase.replicator.rawValue { watchReplicatorDatabase() }
    }

    func databaseDeleted(_ name: String) {
        guard name == SystemDatabase.replicator.rawValue else { return }
        let (watch, docJobs) = state.withLock { s in
            let w = s.replicatorWatch
            s.replicatorWatch = nil
            let j = s.jobs.values.filter { $0.docID != nil }
            for job in j { s.jobs[job.id] = nil }
            return (w, j)
        }
        watch?.cancel()
        for job in docJobs { job.cancel() }
    }

    func watchReplicatorDatabase() {
        state.withLock { s in
            guard s.replicatorWatch == nil, !s.stopped else { return }
            s.replicatorWatch = Task { [weak self] in await self?.followReplicatorDatabase() }
        }
    }

    func followReplicatorDatabase() async {
        guard let db = try? node.database(SystemDatabase.replicator.rawValue), let collection = try? db.defaultCollection() else { return }
        var since: UInt64 = 0
        while !Task.isCancelled {
            let commits = db.commits()
            do {
                let from = since
                let rows = try await Database.offload { () -> [Collection.ChangeRow] in
                    var o = Collection.ChangesOptions(since: from)
                    o.includeDocs = true
                    return try collection.changes(o)
                }
                for row in rows {
                    since = max(since, row.sequence)
                    await replicatorDocumentChanged(row, collection)
                }
            } catch {
                logger.warning("_replicator: \(error)")
                return
            }
            var iterator = commits.makeAsyncIterator()
            guard await iterator.next() != nil else { return }  // the database closed
        }
    }

    func replicatorDocumentChanged(_ row: Collection.ChangeRow, _ collection: SetteeStore.Collection) async {
        let docID = row.id
        guard !docID.hasPrefix("_design/") else { return }
        let current = state.withLock { $0.jobs.values.first { $0.docID == docID } }
        // A row read before a newer write of the same document (a job's final state, written back while this pass
        // ran) is stale: the feed brings the newer revision next, so act on that one — not restart a job that has just
        // finished. (Read after `current`: a job's final state is committed before the job leaves `jobs`.)
        if let latest = try? await Database.offload({ try collection.record(id: docID) }), latest.sequence != row.sequence {
            return
        }
        guard !row.deleted, let bytes = row.body, case .object(let doc)? = try? JSON.parse(bytes) else {
            state.withLock { $0.seenDocuments[docID] = nil }
            if let current { removeJob(current.id)?.cancel() }
            return
        }
        var userFields = doc
        for key in doc.keys where key.hasPrefix("_replication_") { userFields.removeValue(forKey: key) }
        // A save without `_replication_state` (a user asking to run a finished job again) counts as a change.
        let fingerprint = JSON.object(userFields).jsonString + (doc["_replication_state"] == nil ? " new" : "")
        let seen = state.withLock { s in
            let same = s.seenDocuments[docID] == fingerprint
            s.seenDocuments[docID] = fingerprint
            return same
        }
        if seen { return }  // only our own `_replication_*` fields changed
        let spec: Spec
        do {
            spec = try Self.spec(doc)
        } catch {
            if let current { removeJob(current.id)?.cancel() }
            await writeState(docID, collection, state: "failed", reason: "\(CouchError.from(any: error).reason)")
            return
        }
        if let current, current.spec.fingerprint == spec.fingerprint { return }  // our own state write, or no change
        if let current { removeJob(current.id)?.cancel() }
        let state = doc["_replication_state"]?.stringValue
        let source: any Endpoint, target: any Endpoint
        do {
            source = try endpoint(spec.source, create: false, allowInsecureCredentials: spec.allowInsecureCredentials, writer: spec.writer)
            try await checkSourceBeforeCreating(spec, source)
            target = try endpoint(spec.target, create: spec.createTarget, creationParameters: spec.createTargetParameters,
                                  allowInsecureCredentials: spec.allowInsecureCredentials, writer: spec.writer)
        } catch {
            await writeState(docID, collection, state: "failed", reason: CouchError.from(any: error).reason)
            return
        }
        let replication = Replication(source: source, target: target, options: options(spec), logger: logger)
        let id = replication.replicationID + Self.suffix(spec)
        // A one-shot job that already finished (or failed) for this very replication is not run again.
        if (state == "completed" || state == "failed") && doc["_replication_id"]?.stringValue == id { return }
        let job = Job(id: id, docID: docID, spec: spec, replication: replication)
        if !(state == "triggered" && doc["_replication_id"]?.stringValue == id) {
            await writeState(docID, collection, state: "triggered", replicationID: id)
        }
        start(job) { [weak self] outcome in
            guard let self else { return }
            switch outcome {
            case .success(let result) where result.completed:
                await self.writeState(docID, collection, state: "completed", replicationID: id, stats: result.status)
            case .failure(let e) where e.kind != .cancelled:
                await self.writeState(docID, collection, state: "failed", reason: e.description, replicationID: id,
                                      stats: replication.status)
            default:
                break
            }
        }
    }

    /// Writes `_replication_state` (and friends) back into a `_replicator` document.
    func writeState(_ docID: String, _ collection: SetteeStore.Collection, state: String, reason: String? = nil,
                            replicationID: String? = nil, stats: ReplicatorStatus? = nil) async {
        do {
            try await writeStateOnce(docID, collection, state: state, reason: reason, replicationID: replicationID, stats: stats)
        } catch {
            // The replication goes on; only its document doesn't say so. Not silent: the log does.
            logger.error("the state of _replicator/\(docID) could not be written (\(state)): \(error)")
        }
    }

    private func writeStateOnce(_ docID: String, _ collection: SetteeStore.Collection, state: String, reason: String?,
                                replicationID: String?, stats: ReplicatorStatus?) async throws {
        try await Database.offload {
            for _ in 0..<3 {
                guard let record = try collection.record(id: docID), !record.deleted else { return }
                var body = try record.json()
                // Already says so (a restart re-reading a failed document): no new revision.
                if body["_replication_state"]?.stringValue == state && stats == nil
                    && body["_replication_state_reason"]?.stringValue == reason
                    && (replicationID == nil || body["_replication_id"]?.stringValue == replicationID) { return }
                body["_replication_state"] = .string(state)
                body["_replication_state_time"] = .string(ISO8601DateFormatter().string(from: Date()))
                if let replicationID { body["_replication_id"] = .string(replicationID) }
                if let reason { body["_replication_state_reason"] = .string(reason) } else {
                    body.removeValue(forKey: "_replication_state_reason")
                }
                if let s = stats { body["_replication_stats"] = .object(s.couchStats()) }
                let state = RevisionWrite(id: docID, body: body, mode: .edit(parent: record.revID))
                let outcome = try collection.write([state], as: .owner)
                if case .failure(let e) = outcome[0] {
                    if e.code == .conflict { continue }
                    throw e
                }
                return
            }
        }
    }
}
