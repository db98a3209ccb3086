import Foundation
import Logging
import SetteeCore
import SetteeIndex
import SetteeReplication
import SetteeStore
import Synchronization

/// How replications are reported: the `_replicate` answer, `_active_tasks` and `_scheduler/jobs` entries, and
/// `_replicator` documents' `_replication_stats` — one shape of CouchDB's counters for all of them.
extension ReplicationManager {
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

    /// `_active_tasks` entries for the running replications (CouchDB's fields).
    var activeTasks: [JSON] {
        let all = state.withLock { Array($0.jobs.values) }.filter(\.isRunning)
        return all.map { job in
            let s = job.replication.status
            var o = job.taskFields(node: node.configuration.nodeName)
            for (key, value) in s.couchStats(pending: true) { o[key] = value }
            o["pid"] = .string("<\(job.id.prefix(8))>")
            o["state"] = .string(s.activity.name)
            o["source_seq"] = s.sourceSeq
            o["through_seq"] = s.checkpointedSourceSeq
            o["checkpoint_interval"] = 0
            o["updated_on"] = .int(Int64(s.updatedOn.timeIntervalSince1970))
            if let e = s.error { o["last_error"] = .string(e.description) }
            o["error_count"] = .int(Int64(s.errorCount))
            return .object(o)
        }
    }

    /// Jobs that stopped on an error, newest first (`_scheduler/jobs` lists them as `failed`).
    var failures: [JSON] {
        state.withLock { $0.failedJobs }.reversed().map { job, error, at in
            let s = job.replication.status
            var o = job.taskFields(node: node.configuration.nodeName)
            for (key, value) in s.couchStats(pending: true) { o[key] = value }
            o["pid"] = .null
            o["state"] = "failed"
            o["last_error"] = .string(error.description)
            o["error_count"] = .int(Int64(s.errorCount + 1))
            o["updated_on"] = .int(Int64(at.timeIntervalSince1970))
            return .object(o)
        }
    }
}

extension ReplicationManager.Job {
    /// The fields every task entry of the job has (`_active_tasks`, `_scheduler/jobs`), on the node named `node`.
    func taskFields(node: String) -> JSONObject {
        [
            "type": "replication", "node": .string(node),
            "replication_id": .string(id), "doc_id": docID.map(JSON.string) ?? .null,
            "database": docID == nil ? .null : .string(SystemDatabase.replicator.rawValue),
            "source": .string(replication.source.displayName),
            "target": .string(replication.target.displayName),
            "continuous": .bool(spec.continuous),
            "started_on": .int(Int64(startedOn.timeIntervalSince1970)),
        ]
    }
}

extension ReplicatorStatus {
    /// CouchDB's replication counters: a `_replicator` document's `_replication_stats`, and with `pending` also
    /// `changes_pending`, as tasks show them.
    func couchStats(pending: Bool = false) -> JSONObject {
        var o: JSONObject = [
            "revisions_checked": .int(Int64(revisionsChecked)),
            "missing_revisions_found": .int(Int64(missingRevisionsFound)),
            "docs_read": .int(Int64(docsRead)), "docs_written": .int(Int64(docsWritten)),
            "doc_write_failures": .int(Int64(docWriteFailures)),
            "checkpointed_source_seq": checkpointedSourceSeq,
        ]
        if pending { o["changes_pending"] = changesPending.map { .int(Int64($0)) } ?? .null }
        return o
    }
}
