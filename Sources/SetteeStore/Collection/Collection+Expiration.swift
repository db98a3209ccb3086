public import Foundation
import Synchronization
import SetteeCore

/// Couchbase Lite's document expiration: a document given a time is purged once it comes.
extension Collection {
    /// Sets (or with nil clears) the time the document `id` is purged at (Couchbase Lite's
    /// `setDocumentExpiration(id:expiration:)`). Purging is local, as in Couchbase Lite: nothing replicates, and
    /// the time itself is not part of the document. A time already past purges the document within moments.
    ///
    /// ```swift
    /// let ttl = Calendar.current.date(byAdding: .day, value: 1, to: Date())
    /// try collection.setDocumentExpiration(id: "doc123", expiration: ttl)
    /// ```
    /// - Throws: ``SetteeError`` `.notFound` when the collection has no such document.
    public func setDocumentExpiration(id: String, expiration: Date?) throws {
        let millis = expiration.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
        try database.write { db in
            let exists = try db.prepare("SELECT 1 FROM \(self.docsTable) WHERE id = ?")
            defer { exists.reset() }
            exists.bind(id, at: 1)
            guard try exists.step() else { throw SetteeError(.notFound, "Document \(id) does not exist") }
            if let millis {
                try db.prepare("INSERT OR REPLACE INTO expiry(collection, id, expires) VALUES (?, ?, ?)")
                    .run([.integer(self.id), .text(id), .integer(millis)])
            } else {
                try db.prepare("DELETE FROM expiry WHERE collection = ? AND id = ?").run([.integer(self.id), .text(id)])
            }
        }
        if let millis { database.expiry.schedule(atMillis: millis) }
    }

    /// The time the document `id` is purged at, or nil when it has none (Couchbase Lite's
    /// `getDocumentExpiration(id:)`).
    public func getDocumentExpiration(id: String) throws -> Date? {
        try expirationMillis(id: id).map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    /// The document's expiration time in milliseconds since 1970 (`META().expiration`), or nil.
    package func expirationMillis(id: String) throws -> Int64? {
        try database.read { db in
            let stmt = try db.prepare("SELECT expires FROM expiry WHERE collection = ? AND id = ?")
            defer { stmt.reset() }
            stmt.bind(self.id, at: 1)
            stmt.bind(id, at: 2)
            return try stmt.step() ? stmt.int64(0) : nil
        }
    }

    /// Every expiration time of the collection, by document id (what a query reading `META().expiration` looks up).
    package func expirations() throws -> [String: Int64] {
        try database.read { db in
            let stmt = try db.prepare("SELECT id, expires FROM expiry WHERE collection = ?")
            defer { stmt.reset() }
            stmt.bind(self.id, at: 1)
            var out: [String: Int64] = [:]
            while try stmt.step() { if let id = stmt.string(0) { out[id] = stmt.int64(1) } }
            return out
        }
    }
}

/// Purges expired documents: a timer set for the earliest expiration time, which purges what is due, then sets
/// itself for the next. It holds the database weakly and runs only while some document has a time.
final class ExpiryTimer: Sendable {
    private struct State {
        weak var database: Database?
        var timer: (any DispatchSourceTimer)?
        var due: Int64?
        var stopped = false
    }
    private let state = Mutex(State())
    private static let queue = DispatchQueue(label: "settee.expiry", qos: .utility)

    /// Called when the database opens: arms the timer if a document has a time.
    func start(database: Database) {
        state.withLock { $0.database = database }
        Self.queue.async { [weak self] in self?.rearm() }
    }

    /// Stops for good (the database closed).
    func stop() {
        state.withLock { state in
            state.stopped = true
            state.timer?.cancel()
            state.timer = nil
        }
    }

    /// Makes sure the timer fires by `millis`.
    func schedule(atMillis millis: Int64) {
        state.withLock { state in
            guard !state.stopped, state.due.map({ millis < $0 }) ?? true else { return }
            arm(millis, &state)
        }
    }

    private func arm(_ millis: Int64, _ state: inout State) {
        state.timer?.cancel()
        state.due = millis
        let delay = max(0, Double(millis) / 1000 - Date().timeIntervalSince1970)
        let t = DispatchSource.makeTimerSource(queue: Self.queue)
        // Expiration is not exact in Couchbase Lite either: a little leeway lets the system batch wake-ups.
        t.schedule(deadline: .now() + delay, leeway: .milliseconds(100))
        t.setEventHandler { [weak self] in self?.fire() }
        state.timer = t
        t.resume()
    }

    private func fire() {
        let database = state.withLock { state -> Database? in
            state.timer?.cancel()
            state.timer = nil
            state.due = nil
            return state.stopped ? nil : state.database
        }
        guard let database else { return }
        do {
            try ExpiryTimer.purgeExpired(database)
        } catch {
            // A failed purge (a full disk, a locked or read-only file) is retried in 5 s, not at once.
            schedule(atMillis: Int64(Date().timeIntervalSince1970 * 1000) + 5000)
            return
        }
        rearm()
    }

    /// Arms the timer for the earliest time left, if any.
    private func rearm() {
        guard let database = state.withLock({ $0.stopped ? nil : $0.database }) else { return }
        let next: Int64? = try? database.read { db in
            let stmt = try db.prepare("SELECT MIN(expires) FROM expiry")
            defer { stmt.reset() }
            return try stmt.step() && !stmt.isNull(0) ? stmt.int64(0) : nil
        }
        if let next { schedule(atMillis: next) }
    }

    /// Purges every document whose time has come, in one transaction.
    static func purgeExpired(_ database: Database) throws {
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        let collections = try database.allCollections()
        try database.write { db in
            let due = try db.withStatement("SELECT collection, id FROM expiry WHERE expires <= ? ORDER BY expires LIMIT 1000",
                                           [.integer(now)]) { dueRows in
                var due: [(Int64, String)] = []
                while try dueRows.step() { if let id = dueRows.string(1) { due.append((dueRows.int64(0), id)) } }
                return due
            }
            for (cid, id) in due {
                if let c = collections.first(where: { $0.id == cid }) { _ = try c.applyPurge(id: id, revisions: nil, db: db) }
                try db.prepare("DELETE FROM expiry WHERE collection = ? AND id = ?").run([.integer(cid), .text(id)])
            }
        }
    }
}
