import Foundation
import Synchronization
import SetteeCore

/// The node's database events for `GET /_db_updates`: databases created, updated (a commit) and deleted, numbered
/// in order. Kept in memory (the newest 10,000; consecutive updates of one database coalesce into one), so the feed
/// starts when the node starts; a client that has fallen further behind than the log reaches gets what remains.
final class DatabaseUpdates: Sendable {
    enum Kind: String, Sendable { case created, updated, deleted }

    struct Event: Sendable {
        var seq: UInt64
        var database: String
        var kind: Kind
    }

    private struct State {
        var events: [Event] = []
        var lastSeq: UInt64 = 0
    }

    private let state = Mutex(State())
    static let capacity = 10_000

    func record(_ database: String, _ kind: Kind) {
        state.withLock { s in
            if kind == .updated, let last = s.events.last, last.database == database, last.kind == .updated {
                s.lastSeq += 1
                s.events[s.events.count - 1].seq = s.lastSeq
            } else {
                s.lastSeq += 1
                s.events.append(Event(seq: s.lastSeq, database: database, kind: kind))
                if s.events.count > Self.capacity { s.events.removeFirst(s.events.count - Self.capacity) }
            }
        }
    }

    var lastSeq: UInt64 { state.withLock { $0.lastSeq } }

    /// Events after `since`, oldest first, at most `limit`.
    func events(since: UInt64, limit: Int = .max) -> [Event] {
        state.withLock { s in Array(s.events.filter { $0.seq > since }.prefix(limit)) }
    }

    /// Waits until an event after `since` is recorded, `timeout` passes, `stop` says so (the server shutting down)
    /// or the task is cancelled (checking every 50 ms: database events are rare next to document writes, and this
    /// keeps no state per waiter).
    func wait(since: UInt64, timeout: Duration, stop: () -> Bool = { false }) async {
        let deadline = ContinuousClock.now + timeout
        while lastSeq <= since, ContinuousClock.now < deadline, !Task.isCancelled, !stop() {
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}
