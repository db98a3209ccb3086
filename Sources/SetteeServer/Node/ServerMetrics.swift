import CoreMetrics
import Foundation
import Prometheus
import Synchronization
import SetteeCore
import SetteeReplication
import SetteeStore

/// The node's metrics, recorded through swift-metrics into a Prometheus registry and rendered by `GET /_metrics`.
///
/// Each node has its own registry (no global bootstrap), so several nodes in one process keep separate figures.
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    /// The factory over this node's registry (replications count into it too).
    let factory: PrometheusMetricsFactory
    private let docsWritten: CoreMetrics.Counter
    private let docsRead: CoreMetrics.Counter
    private let openDatabasesMeter: CoreMetrics.Meter
    private let connectedDatabasesMeter: CoreMetrics.Meter
    private let databaseFilesMeter: CoreMetrics.Meter
    private let authFailures: CoreMetrics.Counter
    private let authLockouts: CoreMetrics.Counter
    private let lockedOutRequests: CoreMetrics.Counter
    private let logWritesDropped: CoreMetrics.Counter

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
        ]
        // Replication stages (a batch's `_changes`, `_revs_diff`, `_bulk_get`, `_bulk_docs`, a checkpoint, and a
        // whole run as `total`) run longer than requests, over the network; SetteeReplication's `StageTimes`.
        factory.durationHistogramBuckets["settee_replication_stage_duration_seconds"] = [
            .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(300),
        ]
        self.factory = factory
        docsWritten = CoreMetrics.Counter(label: "settee_documents_written_total", factory: factory)
        docsRead = CoreMetrics.Counter(label: "settee_documents_read_total", factory: factory)
        openDatabasesMeter = CoreMetrics.Meter(label: "settee_open_databases", factory: factory)
        connectedDatabasesMeter = CoreMetrics.Meter(label: "settee_databases_holding_connections", factory: factory)
        databaseFilesMeter = CoreMetrics.Meter(label: "settee_database_open_files", factory: factory)
        authFailures = CoreMetrics.Counter(label: "settee_auth_failures_total", factory: factory)
        authLockouts = CoreMetrics.Counter(label: "settee_auth_lockouts_total", factory: factory)
        lockedOutRequests = CoreMetrics.Counter(label: "settee_auth_locked_out_requests_total", factory: factory)
        logWritesDropped = CoreMetrics.Counter(label: "settee_log_writes_dropped_total", factory: factory)
    }

    private struct Key: Hashable {
        let route: String
        let method: String
        let status: Int
    }
    /// The per-route series made so far, and CouchDB-shaped counters for `/_node/_local/_stats`.
    private struct State {
        var timers: [String: CoreMetrics.Timer] = [:]
        var series: [Key: (CoreMetrics.Counter, CoreMetrics.Timer)] = [:]
        var methodCounts: [String: Int] = [:]
        var statusCounts: [Int: Int] = [:]
        var requestCount = 0
        var documentReads = 0
        var documentWrites = 0
        var openDatabaseCount = 0
        /// ``LogWriter/droppedWrites`` as last added to `settee_log_writes_dropped_total`.
        var logDropsExported = 0
    }
    private let state = Mutex(State())

    /// Records one handled request.
    func request(route: String, method: String, status: Int, seconds: Double) {
        let key = Key(route: route, method: method, status: status)
        let factory = factory
        let pair = state.withLock { state in
            state.requestCount += 1
            state.methodCounts[method, default: 0] += 1
            state.statusCounts[status, default: 0] += 1
            if let existing = state.series[key] { return existing }
            let counter = CoreMetrics.Counter(label: "settee_http_requests_total",
                                              dimensions: [("route", route), ("method", method), ("status", String(status))],
                                              factory: factory)
            let timerKey = "\(route) \(method)"
            let timer = state.timers[timerKey] ?? CoreMetrics.Timer(label: "settee_http_request_duration_seconds",
                                                                    dimensions: [("route", route), ("method", method)],
                                                                    factory: factory)
            state.timers[timerKey] = timer
            state.series[key] = (counter, timer)
            return (counter, timer)
        }
        pair.0.increment()
        pair.1.recordNanoseconds(Int64(seconds * 1e9))
    }

    func documentsWritten(_ n: Int) {
        guard n > 0 else { return }
        docsWritten.increment(by: n)
        state.withLock { $0.documentWrites += n }
    }
    func documentsRead(_ n: Int) {
        guard n > 0 else { return }
        docsRead.increment(by: n)
        state.withLock { $0.documentReads += n }
    }
    func openDatabases(_ n: Int) {
        openDatabasesMeter.set(n)
        state.withLock { $0.openDatabaseCount = n }
    }

    /// `/_node/_local/_stats` in CouchDB's shape (`{"couchdb": {"database_reads": {"value", "type", "desc"}, …}}`),
    /// for the figures Settee keeps.
    func couchStats(adminChecks: (fast: Int, slow: Int), userCache: (hits: Int, misses: Int)) -> JSON {
        func counter(_ value: Int, _ desc: String) -> JSON { ["value": .int(Int64(value)), "type": "counter", "desc": .string(desc)] }
        func gauge(_ value: Int, _ desc: String) -> JSON { ["value": .int(Int64(value)), "type": "gauge", "desc": .string(desc)] }
        let snapshot = state.withLock { $0 }
        var methods = JSONObject()
        for m in ["COPY", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"] {
            methods[m] = counter(snapshot.methodCounts[m] ?? 0, "number of HTTP \(m) requests")
        }
        var statuses = JSONObject()
        for code in Set([200, 201, 202, 204, 206, 301, 304, 400, 401, 403, 404, 405, 406, 409, 412, 413, 415, 416, 417, 500])
            .union(snapshot.statusCounts.keys).sorted() {
            statuses[String(code)] = counter(snapshot.statusCounts[code] ?? 0, "number of HTTP \(code) responses")
        }
        return ["couchdb": [
            "database_reads": counter(snapshot.documentReads, "number of times a document was read from a database"),
            "database_writes": counter(snapshot.documentWrites, "number of times a database was changed"),
            "open_databases": gauge(snapshot.openDatabaseCount, "number of open databases"),
            "auth_cache_hits": counter(userCache.hits, "number of authentication cache hits"),
            "auth_cache_misses": counter(userCache.misses, "number of authentication cache misses"),
            "password_hashing_fast": counter(adminChecks.fast, "number of password checks answered from the cache"),
            "password_hashing_slow": counter(adminChecks.slow, "number of password checks that ran the key derivation"),
            "httpd": ["requests": counter(snapshot.requestCount, "number of HTTP requests")],
            "httpd_request_methods": .object(methods),
            "httpd_status_codes": .object(statuses),
        ]]
    }
    /// A failed login (wrong password, unknown user, bad token).
    func authFailed() { authFailures.increment() }
    /// A (user, address) pair newly locked out.
    func lockedOut() { authLockouts.increment() }
    /// A login refused because its pair is locked out.
    func lockedOutRequest() { lockedOutRequests.increment() }

    /// The Prometheus text exposition. (The open-handle cache's figures, process-wide as `max_dbs_open` is, are
    /// read as it renders: the databases whose SQLite connections are open, and the files those hold; so is the
    /// process's count of log writes dropped because the log could not be written, ``LogWriter/droppedWrites``.)
    func render() -> [UInt8] {
        connectedDatabasesMeter.set(OpenPools.shared.count)
        databaseFilesMeter.set(OpenPools.shared.files)
        let dropped = LogWriter.droppedWrites
        let newDrops = state.withLock { state in
            defer { state.logDropsExported = max(state.logDropsExported, dropped) }
            return dropped - state.logDropsExported
        }
        if newDrops > 0 { logWritesDropped.increment(by: newDrops) }
        return registry.emitToBuffer()
    }
}
