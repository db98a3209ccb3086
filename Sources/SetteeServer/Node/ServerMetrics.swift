import CoreMetrics
import Foundation
import Prometheus

/// The node's metrics, recorded through swift-metrics into a Prometheus registry and rendered by `GET /_metrics`.
///
/// Each node has its own registry (no global bootstrap), so several nodes in one process keep separate figures.
final class ServerMetrics: @unchecked Sendable {
    let registry = PrometheusCollectorRegistry()
    /// The factory over this node's registry (replications count into it too).
    let factory: PrometheusMetricsFactory
    private let lock = NSLock()
    private var timers: [String: CoreMetrics.Timer] = [:]
    private let docsWritten: CoreMetrics.Counter
    private let docsRead: CoreMetrics.Counter
    private let openDatabasesMeter: CoreMetrics.Meter
    private let authFailures: CoreMetrics.Counter
    private let authLockouts: CoreMetrics.Counter
    private let lockedOutRequests: CoreMetrics.Counter

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
        ]
        self.factory = factory
        docsWritten = CoreMetrics.Counter(label: "settee_documents_written_total", factory: factory)
        docsRead = CoreMetrics.Counter(label: "settee_documents_read_total", factory: factory)
        openDatabasesMeter = CoreMetrics.Meter(label: "settee_open_databases", factory: factory)
        authFailures = CoreMetrics.Counter(label: "settee_auth_failures_total", factory: factory)
        authLockouts = CoreMetrics.Counter(label: "settee_auth_lockouts_total", factory: factory)
        lockedOutRequests = CoreMetrics.Counter(label: "settee_auth_locked_out_requests_total", factory: factory)
    }

    private struct Key: Hashable {
        let route: String
        let method: String
        let status: Int
    }
    private var series: [Key: (CoreMetrics.Counter, CoreMetrics.Timer)] = [:]

    /// Records one handled request.
    func request(route: String, method: String, status: Int, seconds: Double) {
        let key = Key(route: route, method: method, status: status)
        lock.lock()
        let pair: (CoreMetrics.Counter, CoreMetrics.Timer)
        if let existing = series[key] {
            pair = existing
        } else {
            let counter = CoreMetrics.Counter(label: "settee_http_requests_total",
                                              dimensions: [("route", route), ("method", method), ("status", String(status))],
                                              factory: factory)
            let timerKey = "\(route) \(method)"
            let timer = timers[timerKey] ?? CoreMetrics.Timer(label: "settee_http_request_duration_seconds",
                                                              dimensions: [("route", route), ("method", method)],
                                                              factory: factory)
            timers[timerKey] = timer
            pair = (counter, timer)
            series[key] = pair
        }
        lock.unlock()
        pair.0.increment()
        pair.1.recordNanoseconds(Int64(seconds * 1e9))
    }

    func documentsWritten(_ n: Int) { if n > 0 { docsWritten.increment(by: n) } }
    func documentsRead(_ n: Int) { if n > 0 { docsRead.increment(by: n) } }
    func openDatabases(_ n: Int) { openDatabasesMeter.set(n) }
    /// A failed login (wrong password, unknown user, bad token).
    func authFailed() { authFailures.increment() }
    /// A (user, address) pair newly locked out.
    func lockedOut() { authLockouts.increment() }
    /// A login refused because its pair is locked out.
    func lockedOutRequest() { lockedOutRequests.increment() }

    /// The Prometheus text exposition.
    func render() -> [UInt8] {
        registry.emitToBuffer()
    }
}
