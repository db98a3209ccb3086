import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeStore

/// Authentication (basic auth and `_session` cookies) and per-database `_security` checks.
///
/// With no admin configured the node is in "admin party" mode: every caller is an admin (and the server
/// only binds loopback). With an admin configured every request needs credentials except `GET /`, `GET /_up`
/// and `/_session` itself.
enum Auth {
    static let cookieName = "AuthSession"

    static func authenticate(_ call: inout Call) throws {
        guard let admin = call.node.configuration.admin else {
            call.isAdmin = true
            return
        }
        if let header = call.header(.authorization), header.lowercased().hasPrefix("basic ") {
            let encoded = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
            guard let decoded = Base64.decode(encoded).map({ String(decoding: $0, as: UTF8.self) }),
                  let colon = decoded.firstIndex(of: ":")
            else { throw CouchError.badCredentials }
            let user = String(decoded[..<colon]), pass = String(decoded[decoded.index(after: colon)...])
            guard constantTimeEquals(user, admin.username) && constantTimeEquals(pass, admin.password) else {
                throw CouchError.badCredentials
            }
            call.user = user
            call.isAdmin = true
            return
        }
        if let token = sessionToken(call), let user = call.node.sessions.user(for: token) {
            call.user = user
            call.isAdmin = user == admin.username
            return
        }
        if isPublic(call) { return }
        throw CouchError.unauthorized
    }

    /// Requests anyone may make.
    static func isPublic(_ call: Call) -> Bool {
        switch call.segments.first {
        case nil: return call.method == .get || call.method == .head
        case "_up", "_uuids": return true
        case "_session": return true
        default: return false
        }
    }

    static func sessionToken(_ call: Call) -> String? {
        guard let cookies = call.header(.cookie) else { return nil }
        for part in cookies.split(separator: ";") {
            let kv = part.trimmingCharacters(in: .whitespaces)
            if kv.hasPrefix(cookieName + "=") { return String(kv.dropFirst(cookieName.count + 1)) }
        }
        return nil
    }

    static func checkAdmin(_ call: Call) throws {
        guard call.isAdmin else {
            throw CouchError(.forbidden, "forbidden", "You are not a server admin.")
        }
    }

    /// Enforces a database's `_security` object: admins always pass; when `members` lists names or roles,
    /// only those users may read or write.
    static func checkMember(_ call: Call, _ db: Database) throws {
        if call.isAdmin { return }
        guard let security = try db.metadata("security"), let members = security["members"] else { return }
        let names = members["names"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let roles = members["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        if names.isEmpty && roles.isEmpty { return }
        guard let user = call.user else { throw CouchError.unauthorized }
        guard names.contains(user) else { throw CouchError.forbidden }
    }

    static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) {
            diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
        }
        return diff == 0
    }
}
