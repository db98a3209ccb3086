import Foundation
import SetteeCore

/// `_session` cookies: random tokens mapped to a user name, valid for `timeout` seconds since last use
/// (CouchDB's default is 600 s). Kept in memory: a restart logs everyone out.
final class SessionStore: @unchecked Sendable {
    private let lock = NSLock()
    private var sessions: [String: (user: String, expires: Date)] = [:]
    let timeout: TimeInterval = 600

    /// Starts a session and returns its token.
    func create(user: String) -> String {
        let token = Hex.random(bytes: 24)
        lock.lock()
        sessions[token] = (user, Date().addingTimeInterval(timeout))
        if sessions.count > 10_000 { sessions = sessions.filter { $0.value.expires > Date() } }
        lock.unlock()
        return token
    }

    /// The user of a live session (refreshing its expiry), or nil.
    func user(for token: String) -> String? {
        lock.lock()
        defer { lock.unlock() }
        guard let s = sessions[token] else { return nil }
        guard s.expires > Date() else {
            sessions[token] = nil
            return nil
        }
        sessions[token] = (s.user, Date().addingTimeInterval(timeout))
        return s.user
    }

    func remove(_ token: String) {
        lock.lock()
        sessions[token] = nil
        lock.unlock()
    }
}
