import CoreMetrics
public import Foundation
import Logging
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

/// Time spent per stage, recorded into the `settee_replication_stage_duration_seconds` timer (one series per
/// ``Stage``) through the same factory as ``ReplicationCounters``; the timers are made once per replication.
///
/// With `SETTEE_REPLICATION_TRACE` set, the same measurements are also summed per stage and logged when a run ends.
final class StageTimes: Sendable {
    /// The stages timed; `total` is a whole attempt (from reading checkpoints to catching up or stopping).
    enum Stage: Int, CaseIterable, Sendable {
        case changes, revsDiff, fetch, write, checkpoint, total

        /// The `stage` label value.
        var name: String {
            switch self {
            case .changes: "changes"
            case .revsDiff: "revs_diff"
            case .fetch: "fetch"
            case .write: "write"
            case .checkpoint: "checkpoint"
            case .total: "total"
            }
        }
    }

    /// The timer's label (a Prometheus histogram in seconds, with a `stage` label, on a node).
    static let metricLabel = "settee_replication_stage_duration_seconds"
    static let traceEnabled = ProcessInfo.processInfo.environment["SETTEE_REPLICATION_TRACE"] != nil

    /// One timer per stage, indexed by `Stage.rawValue`.
    private let timers: [CoreMetrics.Timer]
    /// Nanoseconds and calls per stage, indexed by `Stage.rawValue`; only summed when tracing.
    private let totals = Mutex<[(nanoseconds: UInt64, count: Int)]>(Array(repeating: (0, 0), count: Stage.allCases.count))

    init(factory: (any MetricsFactory)?) {
        let f = factory ?? MetricsSystem.factory
        timers = Stage.allCases.map { CoreMetrics.Timer(label: Self.metricLabel, dimensions: [("stage", $0.name)], factory: f) }
    }

    /// Runs `body`, recording its duration (whether it returns or throws) against `stage`.
    func time<T>(_ stage: Stage, _ body: () async throws -> T) async rethrows -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        defer { record(stage, nanoseconds: DispatchTime.now().uptimeNanoseconds &- start) }
        return try await body()
    }

    private func record(_ stage: Stage, nanoseconds: UInt64) {
        timers[stage.rawValue].recordNanoseconds(Int64(clamping: nanoseconds))
        guard Self.traceEnabled else { return }
        totals.withLock {
            $0[stage.rawValue].nanoseconds &+= nanoseconds
            $0[stage.rawValue].count += 1
        }
    }

    /// Logs the per-stage totals (`stage seconds/calls`) when `SETTEE_REPLICATION_TRACE` is set.
    func dump(_ replicationID: String) {
        guard Self.traceEnabled else { return }
        let totals = self.totals.withLock { $0 }
        let text = Stage.allCases.filter { totals[$0.rawValue].count > 0 }.map { stage in
            let t = totals[stage.rawValue]
            return "\(stage.name) \(String(format: "%.3f", Double(t.nanoseconds) / 1e9))s/\(t.count)"
        }
        Logger(label: "settee.replication").notice("replication \(replicationID) stage times: \(text.joined(separator: ", "))")
    }
}
