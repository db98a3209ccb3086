import Foundation
import Synchronization

/// Temporary lockout after repeated failed logins, per (user name, client address) — as CouchDB 3.5 does
/// (`[chttpd_auth_lockout]`): once a pair has failed more than `threshold` times, every login for that pair
/// (even with the right password) is refused with 403 until `duration` has passed since the last failure.
/// Other addresses, and other users from the same address, are unaffected. In memory, bounded in size.
final class Lockout: Sendable {
    private struct Entry {
        var failures: Int
        var last: Date
    }

    /// The current threshold and duration (read per use, so a config change applies at once).
    private let settings: @Sendable () -> (threshold: Int, duration: TimeInterval)
    var threshold: Int { settings().threshold }
    var duration: TimeInterval { settings().duration }
    private let maxEntries: Int
    private let entries = Mutex<[String: Entry]>([:])

    init(threshold: Int, duration: TimeInterval, maxEntries: Int = 10_000) {
        self.settings = { (threshold, duration) }
        self.maxEntries = maxEntries
    }

    /// Settings read from the node's live configuration at each use.
    init(maxEntries: Int = 10_000, settings: @escaping @Sendable () -> (threshold: Int, duration: TimeInterval)) {
        self.settings = settings
        self.maxEntries = maxEntries
    }

    private func key(_ user: String, _ address: String) -> String { user + "\u{0}" + address }

    /// Whether the pair is locked now.
    func isLocked(user: String, address: String, now: Date = Date()) -> Bool {
        let (threshold, duration) = settings()
        guard threshold > 0 else { return false }
        let k = key(user, address)
        return entries.withLock { entries in
            guard let e = entries[k] else { return false }
            if now.timeIntervalSince(e.last) >= duration {
                entries[k] = nil
                return false
            }
            return e.failures >= threshold
        }
    }

    /// Counts a failed login; returns true when this failure locks the pair.
    @discardableResult
    func recordFailure(user: String, address: String, now: Date = Date()) -> Bool {
        let (threshold, duration) = settings()
        guard threshold > 0 else { return false }
        let k = key(user, address)
        let maxEntries = maxEntries
        return entries.withLock { entries in
            var e = entries[k] ?? Entry(failures: 0, last: now)
            if now.timeIntervalSince(e.last) >= duration { e.failures = 0 }
            e.failures += 1
            e.last = now
            entries[k] = e
            if entries.count > maxEntries {
                entries = entries.filter { now.timeIntervalSince($0.value.last) < duration }
                if entries.count > maxEntries {
                    // Still too many (a flood of distinct pairs): forget the oldest half.
                    let keep = entries.sorted { $0.value.last > $1.value.last }.prefix(maxEntries / 2)
                    entries = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
                }
            }
            return e.failures == threshold
        }
    }

    /// A successful login clears the pair's failures.
    func recordSuccess(user: String, address: String) {
        guard settings().threshold > 0 else { return }
        let k = key(user, address)
        entries.withLock { $0[k] = nil }
    }
}
