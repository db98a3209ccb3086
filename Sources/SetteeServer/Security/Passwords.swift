import Crypto
import CryptoExtras
import Foundation
import SetteeCore

/// Password hashing as CouchDB stores it in `_users` documents: PBKDF2 with a per-user random salt and an
/// iteration count kept in the document (`password_scheme: "pbkdf2"`, `pbkdf2_prf`, `iterations`, `salt`,
/// `derived_key`). Plaintext passwords are never stored.
enum Passwords {
    /// The stored form of a password.
    struct Hashed: Sendable, Equatable {
        var salt: String
        var derivedKey: String
        var iterations: Int
        var prf: String

        /// The members written into a user document.
        var fields: JSONObject {
            ["password_scheme": "pbkdf2", "pbkdf2_prf": .string(prf), "iterations": .int(Int64(iterations)),
             "salt": .string(salt), "derived_key": .string(derivedKey)]
        }
    }

    /// Hashes a new password: PBKDF2-HMAC-SHA256, 16 random bytes of salt, a 32-byte key.
    static func hash(_ password: String, iterations: Int) throws -> Hashed {
        let salt = Hex.random(bytes: 16)
        let key = try derive(password, salt: salt, iterations: iterations, prf: "sha256")
        return Hashed(salt: salt, derivedKey: key, iterations: iterations, prf: "sha256")
    }

    /// The hex PBKDF2 key of `password` with a user document's salt, count and PRF (`sha`/`sha1`, `sha224`,
    /// `sha256`, `sha384`, `sha512`; CouchDB before 3.4 used `sha`).
    static func derive(_ password: String, salt: String, iterations: Int, prf: String) throws -> String {
        let function: KDF.Insecure.PBKDF2.HashFunction
        let length: Int
        switch prf {
        case "sha", "sha1": (function, length) = (.insecureSHA1, 20)
        case "sha224": (function, length) = (.insecureSHA224, 28)
        case "sha256": (function, length) = (.sha256, 32)
        case "sha384": (function, length) = (.sha384, 48)
        case "sha512": (function, length) = (.sha512, 64)
        default: throw SetteeError(.badRequest, "unsupported pbkdf2_prf \(prf)")
        }
        guard iterations >= 1, iterations <= 10_000_000 else {
            throw SetteeError(.badRequest, "iterations must be between 1 and 10000000")
        }
        let key = try KDF.Insecure.PBKDF2.deriveKey(from: Array(password.utf8), salt: Array(salt.utf8), using: function,
                                                    outputByteCount: length, unsafeUncheckedRounds: iterations)
        return key.withUnsafeBytes { Hex.encode(Array($0)) }
    }

    /// Whether `password` matches the credentials stored in a user document (`pbkdf2`, or the legacy `simple`
    /// scheme: SHA-1 of password + salt). Compares in constant time.
    static func verify(_ password: String, against doc: JSONObject) -> Bool {
        guard let salt = doc["salt"]?.stringValue else { return false }
        switch doc["password_scheme"]?.stringValue ?? "simple" {
        case "pbkdf2":
            guard let stored = doc["derived_key"]?.stringValue,
                  let iterations = doc["iterations"]?.intValue,
                  let derived = try? derive(password, salt: salt, iterations: Int(iterations),
                                            prf: doc["pbkdf2_prf"]?.stringValue ?? "sha")
            else { return false }
            return constantTimeEquals(derived, stored.lowercased())
        case "simple":
            guard let stored = doc["password_sha"]?.stringValue else { return false }
            let digest = Insecure.SHA1.hash(data: Array((password + salt).utf8))
            return constantTimeEquals(Hex.encode(Array(digest)), stored.lowercased())
        default:
            return false
        }
    }

    /// A fast fingerprint of a verified password, for the in-memory credential cache (never stored).
    static func fingerprint(_ password: String, salt: String, pepper: [UInt8]) -> [UInt8] {
        let mac = HMAC<SHA256>.authenticationCode(for: Array((salt + "\u{0}" + password).utf8), using: SymmetricKey(data: pepper))
        return Array(mac)
    }

    static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        constantTimeEquals(Array(a.utf8), Array(b.utf8))
    }

    static func constantTimeEquals(_ x: [UInt8], _ y: [UInt8]) -> Bool {
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) {
            diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
        }
        return diff == 0
    }
}
