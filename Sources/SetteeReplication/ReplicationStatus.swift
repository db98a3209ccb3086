public import Foundation
import Metrics
public import SetteeCore
import Synchronization

/// What a replication is doing (Couchbase Lite's `ReplicatorActivityLevel`).
public enum ReplicatorActivityLevel: UInt8, Sendable, Comparable {
    /// Not running: finished, stopped, or failed (see ``ReplicatorStatus/error``).
    case stopped = 0
    /// The peer is unreachable; retrying with backoff.
    case offline
    /// Checking the peers and reading checkpoints.
    case connecting
    /// Caught up; a continuous replication waits for changes.
    case idle
    /// Transferring changes.
    case busy

    private var rank: Int {
        switch self {
        case .stopped: 0
        case .idle: 1
        case .offline: 2
        case .connecting: 3
        case .busy: 4
        }
    }

    public static func < (a: Self, b: Self) -> Bool { a.rank < b.rank }

    /// The level's name (`stopped`, `offline`, `connecting`, `idle`, `busy`), as status documents show it.
    public var name: String {
        switch self {
        case .stopped: "stopped"
        case .offline: "offline"
        case .connecting: "connecting"
        case .idle: "idle"
        case .busy: "busy"
        }
    }
}

/// A replication's state and counters, as `_active_tasks` reports them.
public struct ReplicatorStatus: Sendable, CustomStringConvertible {
    /// Couchbase Lite's progress: changes handled of the changes known.
    public struct Progress: Sendable, Equatable {
        public var completed: UInt64
        public var total: UInt64
    }

    public var activity: ReplicatorActivityLevel = .stopped
    /// The last error: a transient one while offline, the fatal one once stopped.
    public var error: ReplicationError?
    /// Revisions fetched from the source.
    public var docsRead = 0
    /// Revisions the target stored.
    public var docsWritten = 0
    /// Revisions the target refused (403, 409, missing stubs…); the replication goes on.
    public var docWriteFailures = 0
    /// Revisions compared with the target (`_revs_diff`).
    public var revisionsChecked = 0
    /// Of those, the ones the target lacked.
    public var missingRevisionsFound = 0
    /// Changes known to remain on the source, when it says.
    public var changesPending: Int?
    /// The source sequence the last checkpoint recorded.
    public var checkpointedSourceSeq: JSON = .int(0)
    /// The newest source sequence read from the feed.
    public var sourceSeq: JSON = .int(0)
    /// Failed attempts (peer unreachable, 5xx…) since the replication started; each was retried.
    public var errorCount = 0
    /// The most recent per-document failures (newest last, at most 100).
    public var documentErrors: [DocumentFailure] = []
    /// When the replication started.
    public var startedOn = Date()
    /// When the status last changed.
    public var updatedOn = Date()

    public init() {}

    public var progress: Progress {
        let done = UInt64(revisionsChecked)
        return Progress(completed: done, total: done + UInt64(max(changesPending ?? 0, 0)))
    }

    public var description: String {
        "\(activity.name): read \(docsRead), written \(docsWritten), failed \(docWriteFailures)"
            + (changesPending.map { ", pending \($0)" } ?? "") + (error.map { ", error \($0)" } ?? "")
    }

    /// Two directions (push and pull) seen as one: the busier activity, summed counters.
    static func combine(_ a: ReplicatorStatus, _ b: ReplicatorStatus) -> ReplicatorStatus {
        var s = a
        s.activity = a.activity == .stopped || b.activity == .stopped
            ? (a.activity == .stopped && b.activity == .stopped ? .stopped : max(a.activity, b.activity))
            : max(a.activity, b.activity)
        s.error = a.error ?? b.error
        s.docsRead += b.docsRead
        s.docsWritten += b.docsWritten
        s.docWriteFailures += b.docWriteFailures
        s.revisionsChecked += b.revisionsChecked
        s.missingRevisionsFound += b.missingRevisionsFound
        if let p = b.changesPending { s.changesPending = (s.changesPending ?? 0) + p }
        s.documentErrors = Array((a.documentErrors + b.documentErrors).suffix(100))
        s.startedOn = min(a.startedOn, b.startedOn)
        s.updatedOn = max(a.updatedOn, b.updatedOn)
        return s
    }
}

/// Thread-safe holder of one replication's status that tells its observer about every change.
final class StatusBox: Sendable {
    private let status = Mutex(ReplicatorStatus())
    private let onChange: @Sendable (ReplicatorStatus) -> Void

    init(onChange: @escaping @Sendable (ReplicatorStatus) -> Void) {
        self.onChange = onChange
    }

    var current: ReplicatorStatus { status.withLock { $0 } }

    func update(_ change: (inout ReplicatorStatus) -> Void) {
        let snapshot: ReplicatorStatus = status.withLock { status in
            change(&status)
            status.updatedOn = Date()
            return status
        }
        onChange(snapshot)
    }
}

/// Prometheus counters, through swift-metrics: the factory given in ``ReplicationOptions/metricsFactory`` (the
/// server passes its registry's) or the process-wide one.
struct ReplicationCounters: Sendable {
    let docsRead: Counter
    let docsWritten: Counter
    let docWriteFailures: Counter
    let checkpoints: Counter
    let retries: Counter

    init(factory: (any MetricsFactory)?) {
        let f = factory ?? MetricsSystem.factory
        docsRead = Counter(label: "settee_replication_docs_read_total", factory: f)
        docsWritten = Counter(label: "settee_replication_docs_written_total", factory: f)
        docWriteFailures = Counter(label: "settee_replication_doc_write_failures_total", factory: f)
        checkpoints = Counter(label: "settee_replication_checkpoints_total", factory: f)
        retries = Counter(label: "settee_replication_retries_total", factory: f)
    }
}
