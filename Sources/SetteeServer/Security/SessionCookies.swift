import Crypto
import Foundation
import Synchronization
import SetteeCore

/// `_session` cookies, stateless as CouchDB's: `AuthSession=` base64url of `name:hex-time:hex-mac`, where the mac is
/// HMAC-SHA256 keyed by the node's secret and the user's password salt. A cookie is valid for the session timeout
/// from its issue time; changing the password (a new salt) or the node secret invalidates it; nothing is kept in
/// memory, so cookies survive restarts and work on any node sharing the secret.
struct SessionCookies: Sendable {
    static let name = "AuthSession"
    /// The node's secret (random, made once, kept in the data directory with mode 0600).
    let secret: [UInt8]
    /// The session timeout now (read per use, so `[chttpd_auth] timeout` applies at once).
    var timeout: TimeInterval { timeoutSetting() }
    private let timeoutSetting: @Sendable () -> TimeInterval

    init(secret: [UInt8], timeout: TimeInterval) {
        self.init(secret: secret) { timeout }
    }

    init(secret: [UInt8], timeout: @escaping @Sendable () -> TimeInterval) {
        self.secret = secret
        self.timeoutSetting = timeout
    }

    /// Loads the node secret from `directory/.settee-node-secret`, creating it on first use.
    static func loadSecret(directory: String) throws -> [UInt8] {
        let path = (directory as NSString).appendingPathComponent(".settee-node-secret")
        if let text = try? String(contentsOfFile: path, encoding: .utf8),
           let bytes = Hex.decode(text.trimmingCharacters(in: .whitespacesAndNewlines)), bytes.count >= 32 {
            return bytes
        }
        let secret = Hex.random(bytes: 32)
        guard FileManager.default.createFile(atPath: path, contents: Data(secret.utf8),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw SetteeError(.storage, "cannot write the node secret \(path)")
        }
        return Hex.decode(secret) ?? []
    }

    /// A cookie value for `user`, issued at `time` (seconds since 1970). Each carries its own random nonce, so two
    /// sessions of one user started in the same second are distinct (one's logout doesn't end the other).
    func make(user: String, salt: String, time: Int = Int(Date().timeIntervalSince1970)) -> String {
        let payload = "\(user):\(String(time, radix: 16, uppercase: true))-\(Hex.random(bytes: 12))"
        return Base64.urlEncode(Array((payload + ":" + mac(payload, salt: salt)).utf8))
    }

    /// The user name, issue time and signed stamp (`HEXTIME-NONCE`) a cookie claims, before its signature is
    /// checked.
    func parse(_ cookie: String) -> (user: String, time: Int, mac: String, stamp: String)? {
        guard cookie.utf8.count <= 4096, let bytes = Base64.urlDecode(cookie) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        // The name may itself contain ':'; stamp and mac are the last two fields.
        guard let macColon = text.lastIndex(of: ":") else { return nil }
        let head = text[..<macColon]
        guard let timeColon = head.lastIndex(of: ":") else { return nil }
        let user = String(head[..<timeColon])
        let stamp = head[head.index(after: timeColon)...]
        let hexTime = stamp.split(separator: "-", maxSplits: 1).first ?? ""
        guard !user.isEmpty, let time = Int(hexTime, radix: 16) else { return nil }
        return (user, time, String(text[text.index(after: macColon)...]), String(stamp))
    }

    enum Verdict: Equatable {
        case valid(refresh: Bool)
        case invalid
        case expired
    }

    /// Checks a parsed cookie's signature (with the user's current salt) and age.
    func verify(user: String, time: Int, stamp: String, mac given: String, salt: String, now: Date = Date()) -> Verdict {
        let payload = "\(user):\(stamp)"
        guard Passwords.constantTimeEquals(mac(payload, salt: salt), given) else { return .invalid }
        let age = now.timeIntervalSince1970 - Double(time)
        guard age < timeout, age > -60 else { return .expired }
        return .valid(refresh: age > timeout / 10)
    }

    private func mac(_ payload: String, salt: String) -> String {
        let key = SymmetricKey(data: secret + Array(salt.utf8))
        return Hex.encode(Array(HMAC<SHA256>.authenticationCode(for: Array(payload.utf8), using: key)))
    }

    /// The Set-Cookie header value for a cookie.
    /// `SameSite=Lax` normally; `SameSite=None; Secure` when the node serves TLS and lets other origins send
    /// credentials (CORS), since browsers only send cross-site cookies that are both.
    /// Without `persistent` (`allow_persistent_cookies = false`) the cookie has no `Max-Age`: browsers drop it
    /// when they close.
    func header(_ value: String, secure: Bool, crossSite: Bool = false, persistent: Bool = true) -> String {
        let sameSite = crossSite && secure ? "None" : "Lax"
        let maxAge = persistent ? " Max-Age=\(Int(timeout));" : ""
        return "\(Self.name)=\(value); Version=1; Path=/;\(maxAge) HttpOnly; SameSite=\(sameSite)"
            + (secure ? "; Secure" : "")
    }

    /// The Set-Cookie header that clears the cookie.
    static let clearHeader = "\(name)=; Version=1; Path=/; HttpOnly; Max-Age=0"
}

/// Cookies ended by `DELETE /_session` before their expiry: refused until they would have expired anyway, so a
/// logout really ends the session on this node (CouchDB's cookies stay valid until they expire). In memory, bounded.
final class RevokedCookies: Sendable {
    private let revoked = Mutex<[String: Date]>([:])

    func revoke(_ cookie: String, until expiry: Date) {
        let now = Date()
        revoked.withLock { revoked in
            if revoked.count >= 10_000 { revoked = revoked.filter { $0.value > now } }
            if revoked.count < 10_000 { revoked[cookie] = expiry }
        }
    }

    func isRevoked(_ cookie: String) -> Bool {
        revoked.withLock { revoked in
            guard let until = revoked[cookie] else { return false }
            if until < Date() {
                revoked[cookie] = nil
                return false
            }
            return true
        }
    }
}
