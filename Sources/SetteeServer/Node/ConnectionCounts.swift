import Hummingbird
import HummingbirdCore
import Synchronization

/// How many connections a node's server has open, and how many of them are serving a request (a response being
/// computed or streamed, such as a replicator's continuous `_changes` feed). Couchbase Lite's listener reports
/// these as its `status`.
public final class ConnectionCounts: Sendable {
    private let openCount = Atomic<Int>(0)
    private let activeCount = Atomic<Int>(0)

    public init() {}

    /// Connections open now.
    public var open: Int { openCount.load(ordering: .relaxed) }
    /// Requests being served now, at most one per open connection counted.
    public var active: Int { min(activeCount.load(ordering: .relaxed), max(open, 0)) }

    func connectionOpened() { openCount.add(1, ordering: .relaxed) }
    func connectionClosed() { openCount.subtract(1, ordering: .relaxed) }
    func requestStarted() { activeCount.add(1, ordering: .relaxed) }
    func requestFinished() { activeCount.subtract(1, ordering: .relaxed) }
}

/// Hummingbird's connection limit, also counting connections into ``ConnectionCounts``.
struct CountedConnections: AvailableConnectionsDelegate {
    var limit: MaximumAvailableConnections
    let counts: ConnectionCounts

    mutating func connectionOpened() {
        limit.connectionOpened()
        counts.connectionOpened()
    }

    mutating func connectionClosed() {
        limit.connectionClosed()
        counts.connectionClosed()
    }

    func isAcceptingNewConnections() -> Bool { limit.isAcceptingNewConnections() }
}

/// A request counted in ``ConnectionCounts/active`` until this is released.
final class ServedRequest: Sendable {
    let counts: ConnectionCounts
    init(_ counts: ConnectionCounts) { self.counts = counts }
    deinit { counts.requestFinished() }
}
