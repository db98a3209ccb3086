import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeStore

/// Authentication (basic auth against the configured admin or `_users`, `_session` cookies, JWT bearer tokens) and
/// authorization (server-admin routes, each database's `_security`, the `_users` rules), as CouchDB 3.5 does them.
///
/// With no admin configured the node is in "admin party" mode: every caller is an admin (and the server only binds
/// loopback). With an admin configured, a caller without credentials is anonymous: they may use `GET /`, `_up`,
/// `_uuids`, `_session`, databases whose `_security` has no members, and sign up in `_users`; everything else is
/// 401. Databases nobody set `_security` on are admin-only (CouchDB 3's `default_security = admin_only`).
enum Auth {
    static let cookieName = SessionCookies.name

    // MARK: Authentication

    static func authenticate(_ call: inout Call) async throws {
        let node = call.node
        guard node.configuration.admin != nil else {
            call.userCtx = UserContext(name: nil, roles: ["_admin"], method: nil)
            if let header = call.header(.authorization), let (name, _) = basicCredentials(header) {
                call.userCtx.name = name
                call.userCtx.method = "default"
            }
            return
        }
        if let header = call.header(.authorization) {
            let lower = header.prefix(7).lowercased()
            if lower.hasPrefix("basic ") {
                guard let (name, password) = basicCredentials(header) else { throw CouchError.badCredentials }
                guard let (context, _) = try await login(call, name: name, password: password) else {
                    throw CouchError.badCredentials
                }
                call.userCtx = context
                return
            }
            if lower.hasPrefix("bearer ") {
                guard let jwt = node.jwt else {
                    throw CouchError(.unauthorized, "unauthorized", "Bearer tokens are not accepted by this node (JWT is not configured).")
                }
                let token = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
                do {
                    call.userCtx = try await jwt.authenticate(token)
                } catch {
                    node.metrics.authFailed()
                    throw CouchError(.unauthorized, "unauthorized", "Invalid bearer token: \(error)")
                }
                return
            }
        }
        if let cookie = sessionToken(call), let (context, refreshed) = try cookieUser(call, cookie) {
            call.userCtx = context
            call.setCookie = refreshed
            return
        }
        call.userCtx = .anonymous
    }

    /// `Basic base64(name:password)` → name and password.
    static func basicCredentials(_ header: String) -> (String, String)? {
        guard header.lowercased().hasPrefix("basic ") else { return nil }
        let encoded = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard encoded.utf8.count <= 8192, let decoded = Base64.decode(encoded).map({ String(decoding: $0, as: UTF8.self) }),
              let colon = decoded.firstIndex(of: ":")
        else { return nil }
        return (String(decoded[..<colon]), String(decoded[decoded.index(after: colon)...]))
    }

    /// Checks a name and password (the configured admin, else `_users`), with lockout. Returns the caller's context
    /// and the salt their cookie is signed with, or nil for wrong credentials; 403 when the pair is locked out.
    static func login(_ call: Call, name: String, password: String) async throws -> (UserContext, salt: String)? {
        let node = call.node
        let address = call.remoteAddress
        if node.lockout.isLocked(user: name, address: address) {
            node.metrics.lockedOutRequest()
            throw CouchError(.forbidden, "forbidden", "Account is temporarily locked due to multiple authentication failures")
        }
        var result: (UserContext, salt: String)?
        if let admin = node.configuration.admin, name == admin.username {
            if Passwords.constantTimeEquals(password, admin.password) {
                result = (UserContext(name: name, roles: ["_admin"], method: "default"), adminSalt(admin.password))
            }
        } else {
            result = try await blocking { try node.users.authenticate(name: name, password: password, node: node) }
        }
        if result == nil {
            node.metrics.authFailed()
            if node.lockout.recordFailure(user: name, address: address) { node.metrics.lockedOut() }
        } else {
            node.lockout.recordSuccess(user: name, address: address)
        }
        return result
    }

    /// The configured admin's cookie salt: changes when the admin password does.
    static func adminSalt(_ password: String) -> String {
        Hex.encode(Array(SHA256.hash(data: Array(("settee-admin:" + password).utf8))))
    }

    /// The caller a valid `AuthSession` cookie names (re-issuing it when due), or nil for a missing, forged or
    /// expired one (the caller is then anonymous, as in CouchDB).
    static func cookieUser(_ call: Call, _ cookie: String) throws -> (UserContext, refreshed: String?)? {
        let node = call.node
        guard let (name, time, mac) = node.cookies.parse(cookie), !node.revokedCookies.isRevoked(cookie) else { return nil }
        let context: UserContext, salt: String
        if let admin = node.configuration.admin, name == admin.username {
            context = UserContext(name: name, roles: ["_admin"], method: "cookie")
            salt = adminSalt(admin.password)
        } else {
            guard let doc = try node.users.document(named: name, node: node), let s = doc["salt"]?.stringValue else { return nil }
            context = UserContext(name: name, roles: UserDirectory.roles(of: doc), method: "cookie")
            salt = s
        }
        switch node.cookies.verify(user: name, time: time, mac: mac, salt: salt) {
        case .valid(let refresh):
            guard refresh else { return (context, nil) }
            return (context, node.cookies.header(node.cookies.make(user: name, salt: salt),
                                                 secure: node.configuration.security.secureCookies,
                                  crossSite: node.configuration.cors?.credentials == true))
        case .invalid, .expired:
            return nil
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

    // MARK: Authorization

    /// Server-admin-only routes: 401 "You are not a server admin." otherwise (CouchDB's answer).
    static func checkAdmin(_ call: Call) throws {
        guard call.isAdmin else {
            throw CouchError(.unauthorized, "unauthorized", "You are not a server admin.")
        }
    }

    /// Checks the caller may make this request on this database, and records their access in `call.access`.
    /// Runs before the route handler.
    static func authorize(_ call: inout Call, _ target: Keyspace) throws {
        if call.isAdmin {
            call.access = .admin
            return
        }
        let s = call.segments, m = call.method
        let read = m == .get || m == .head
        if s.count == 1 && !(read || m == .post) { try checkAdmin(call) }
        let db: Database
        do { db = try call.node.database(target.database) } catch {
            // Don't tell anonymous callers which databases exist.
            if call.user == nil { throw CouchError.unauthorized }
            throw error
        }
        if target.database == UserDirectory.database {
            // `_users`' own database admins (its `_security.admins`) manage users; everyone else reaches only user
            // documents, under the `_users` rules (see UserDirectory.prepare), whatever `_security.members` says.
            if try call.node.securityObject(db).access(for: call.userCtx) == .admin {
                call.access = .admin
                return
            }
            if s.count == 2, UserDirectory.userName(ofDocument: s[1]) != nil, [.get, .head, .put, .delete].contains(m) {
                call.access = .member
                return
            }
            if call.user == nil { throw CouchError.unauthorized }
            throw CouchError(.forbidden, "forbidden", "Only admins can access this part of the _users database.")
        }
        let access = try call.node.securityObject(db).access(for: call.userCtx)
        call.access = access
        let needed = required(call)
        if access >= needed { return }
        if call.user == nil { throw CouchError.unauthorized }
        switch (access, needed) {
        case (.none, _): throw CouchError.forbidden
        case (_, .admin): throw notDatabaseAdmin
        default: throw CouchError(.forbidden, "forbidden", "You have read-only access to this database.")
        }
    }

    /// Database-admin-only operations (also enforced up front by ``authorize(_:_:)``).
    static func checkDatabaseAdmin(_ call: Call) throws {
        guard call.access >= .admin else { throw notDatabaseAdmin }
    }

    static let notDatabaseAdmin = CouchError(.unauthorized, "unauthorized", "You are not a db or server admin.")

    /// The access a database request needs.
    static func required(_ call: Call) -> Access {
        let s = call.segments, m = call.method
        let read = m == .get || m == .head
        guard s.count > 1 else { return read ? .reader : .member }
        switch s[1] {
        case "_security", "_revs_limit", "_index":
            return read ? .reader : .admin
        case "_compact", "_view_cleanup", "_purge":
            return .admin
        case "_design":
            if read || (m == .post && s.count == 5 && s[3] == "_view") { return .reader }
            return .admin
        case "_local", "_all_docs", "_design_docs", "_changes", "_bulk_get", "_revs_diff", "_query", "_explain", "_find",
             "_ensure_full_commit":
            // Readers may write `_local` documents: replication checkpoints, never replicated or in the feed.
            return .reader
        default:
            return read ? .reader : .member
        }
    }

    /// Design documents are written by database admins only (also inside `_bulk_docs` and `POST /{db}`).
    static func checkDocumentWrite(_ call: Call, id: String) throws {
        if id.hasPrefix("_design/") && call.access < .admin { throw notDatabaseAdmin }
    }

    static func constantTimeEquals(_ a: String, _ b: String) -> Bool { Passwords.constantTimeEquals(a, b) }
}
