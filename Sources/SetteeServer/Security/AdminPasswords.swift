import Foundation
import Synchronization
import SetteeCore

/// Checks server admins' passwords (`[admins]`), with an in-memory cache of verified passwords so that basic auth
/// doesn't pay a full PBKDF2 per request (CouchDB's `password_hashing_fast`/`_slow` path), and hashes the plain
/// passwords the config API is given, as CouchDB stores them.
final class AdminPasswords: Sendable {
    private struct Verified {
        var credential: NodeConfig.AdminCredential
        var fingerprint: [UInt8]
    }

    private let verified = Mutex<[String: Verified]>([:])
    /// Keys the cache's fingerprints; random per process, never stored.
    private let pepper: [UInt8] = Array(Hex.random(bytes: 32).utf8)
    /// Password checks answered from the cache, and those that ran PBKDF2.
    let fastChecks = Atomic<Int>(0)
    let slowChecks = Atomic<Int>(0)

    /// Whether `password` is the admin's. The start-up admin's is compared in constant time; a hashed one is
    /// derived off the cooperative pool (then remembered by a keyed fingerprint).
    func verify(_ password: String, _ credential: NodeConfig.AdminCredential, name: String) async throws -> Bool {
        switch credential {
        case .startup(let expected):
            fastChecks.add(1, ordering: .relaxed)
            return Passwords.constantTimeEquals(password, expected)
        case .pbkdf2(let prf, let key, let salt, let iterations):
            let print = Passwords.fingerprint(password, salt: salt, pepper: pepper)
            if let cached = verified.withLock({ $0[name] }), cached.credential == credential,
               Passwords.constantTimeEquals(cached.fingerprint, print) {
                fastChecks.add(1, ordering: .relaxed)
                return true
            }
            slowChecks.add(1, ordering: .relaxed)
            let derived = try await blocking { try Passwords.derive(password, salt: salt, iterations: iterations, prf: prf) }
            guard Passwords.constantTimeEquals(derived, key) else { return false }
            verified.withLock { cache in
                if cache.count > 1_000 { cache.removeAll() }
                cache[name] = Verified(credential: credential, fingerprint: print)
            }
            return true
        }
    }

    /// The stored form of a new admin password: `-pbkdf2:sha256-DERIVED,SALT,ITERATIONS`. A value already in a stored
    /// form (`-pbkdf2…`, `-hashed-…`) is kept as given, as CouchDB keeps it.
    static func hashForStorage(_ value: String, iterations: Int) async throws -> String {
        if value.hasPrefix("-pbkdf2") || value.hasPrefix("-hashed-") { return value }
        let hashed = try await blocking { try Passwords.hash(value, iterations: iterations) }
        return "-pbkdf2:sha256-\(hashed.derivedKey),\(hashed.salt),\(hashed.iterations)"
    }
}
