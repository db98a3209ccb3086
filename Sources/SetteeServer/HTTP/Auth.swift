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
        guard node.config.hasAdmins else {
            call.userCtx = UserContext(name: nil, roles: ["_admin"], method: nil)
            if let header = call.header(.authorization), let (name, _) = basicCredentials(header) {
                call.userCtx.name = name
                call.userCtx.method = "default"
            }
            return
        }
        let settings = node.configuration
        // The proxy handler comes before basic and cookie authentication in CouchDB's handler list: a trusted
        // proxy's headers name the user even when the request also carries other credentials.
        if settings.security.proxy.enabled, let context = try proxyUser(call, settings.security.proxy) {
            call.userCtx = context
            return
        }
        if let header = call.header(.authorization) {
            let lower = header.prefix(7).lowercased()
            if lower.hasPrefix("basic "), !isAnonymousBasic(header) {
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
                    // As CouchDB: a token lacking a required claim (or with the wrong value) is a bad request.
                    if case .missingClaim = error { throw CouchError.badRequest("Invalid bearer token: \(error)") }
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
        if settings.requireValidUser {
            // CouchDB's require_valid_user: even `GET /` needs credentials; `_session` still lets a user sign in.
            guard call.segments.first == "_session" || call.segments == ["_up"] else {
                throw CouchError(.unauthorized, "unauthorized", "Authentication required.")
            }
        }
    }

    /// CouchDB's proxy authentication: a trusted proxy names the user (and roles, comma-separated) in headers; with
    /// `proxy_use_secret` the token header must be the hex HMAC-SHA1 of the name keyed by `[chttpd_auth] secret`.
    static func proxyUser(_ call: Call, _ proxy: ProxyAuthConfiguration) throws -> UserContext? {
        guard let name = call.request.headers.first(where: { $0.name.canonicalName == proxy.userHeader.lowercased() })?.value,
              !name.isEmpty else { return nil }
        let header = { (field: String) in
            call.request.headers.first(where: { $0.name.canonicalName == field.lowercased() })?.value
        }
        if proxy.useSecret {
            guard let secret = proxy.secret, let token = header(proxy.tokenHeader) else { return nil }
            let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Array(name.utf8), using: SymmetricKey(data: Array(secret.utf8)))
            guard Passwords.constantTimeEquals(Hex.encode(Array(mac)), token.lowercased()) else { return nil }
        }
        let roles = (header(proxy.rolesHeader) ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return UserContext(name: name, roles: roles, method: "proxy")
    }

    /// `Basic base64("_:_")`, which CouchDB reads as no credentials at all.
    static func isAnonymousBasic(_ header: String) -> Bool {
        basicCredentials(header).map { $0.0 == "_" && $0.1 == "_" } ?? false
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
        if let admin = node.config.snapshot.admins[name] {
            if try await node.adminPasswords.verify(password, admin, name: name) {
                result = (UserContext(name: name, roles: ["_admin"], method: "default"), adminSalt(admin.salt))
            }
        } else {
            result = try await blocking { try node.users.authenticate(name: name, password: password, node: node) }
        }
        if result == nil, let check = node.configuration.passwordAuthenticator, check(name, password) {
            result = (UserContext(name: name, roles: ["_admin"], method: "default"), adminSalt("authenticator:" + name))
        }
        if result == nil {
            node.metrics.authFailed()
            if node.lockout.recordFailure(user: name, address: address) { node.metrics.lockedOut() }
        } else {
            node.lockout.recordSuccess(user: name, address: address)
        }
        return result
    }

    /// A server admin's cookie salt: changes when the admin's password does.
    static func adminSalt(_ credential: String) -> String {
        Hex.encode(Array(SHA256.hash(data: Array(("settee-admin:" + credential).utf8))))
    }

    /// The caller a valid `AuthSession` cookie names (re-issuing it when due), or nil for a missing, forged or
    /// expired one (the caller is then anonymous, as in CouchDB).
    static func cookieUser(_ call: Call, _ cookie: String) throws -> (UserContext, refreshed: String?)? {
        let node = call.node
        guard let (name, time, mac, stamp) = node.cookies.parse(cookie), !node.revokedCookies.isRevoked(cookie) else { return nil }
        let context: UserContext, salt: String
        if let admin = node.config.snapshot.admins[name] {
            context = UserContext(name: name, roles: ["_admin"], method: "cookie")
            salt = adminSalt(admin.salt)
        } else if let doc = try node.users.document(named: name, node: node), let s = doc["salt"]?.stringValue {
            context = UserContext(name: name, roles: UserDirectory.roles(of: doc), method: "cookie")
            salt = s
        } else if node.configuration.passwordAuthenticator != nil {
            // Signed in through the node's password authenticator (see `login`): its cookies carry that salt.
            context = UserContext(name: name, roles: ["_admin"], method: "cookie")
            salt = adminSalt("authenticator:" + name)
        } else {
            return nil
        }
        switch node.cookies.verify(user: name, time: time, stamp: stamp, mac: mac, salt: salt) {
        case .valid(let refresh):
            guard refresh else { return (context, nil) }
            let settings = node.configuration
            return (context, node.cookies.header(node.cookies.make(user: name, salt: salt),
                                                 secure: settings.security.secureCookies,
                                                 crossSite: settings.cors?.credentials == true,
                                                 persistent: settings.security.allowPersistentCookies))
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
        try authorizeBySecurity(&call, target)
        if call.access > .reader && call.node.isServedReadOnly(target.database) {
            call.access = .reader
            if required(call) > .reader {
                throw CouchError(.forbidden, "forbidden", "This database is served read-only.")
            }
        }
    }

    /// The access `_security` (or being a server admin) gives the caller.
    private static func authorizeBySecurity(_ call: inout Call, _ target: Keyspace) throws {
        if call.isAdmin {
            call.access = .admin
            return
        }
        let s = call.segments, m = call.method
        let read = m == .get || m == .head
        if s.count == 1 && !(read || m == .post) { try checkAdmin(call) }
        // A missing database is 404 for everyone, anonymous callers included, as in CouchDB (replicators rely on
        // it to tell a missing source from missing credentials).
        let db = try call.node.database(target.database)
        if target.database == call.node.configuration.security.authenticationDB {
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
        case (_, .admin) where call.segments.count > 1 && ["_design", "_security"].contains(call.segments[1]):
            // A signed-in non-admin writing a design document or `_security`: 403, as CouchDB answers.
            throw CouchError(.forbidden, "forbidden", "You are not a db or server admin.")
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
        case "_security", "_revs_limit", "_index", "_indexes":
            return read ? .reader : .admin
        case "_compact", "_view_cleanup", "_purge", "_config", "_user", "_role", "_resync":
            // (`_config`, `_user`, `_role`, `_resync`: the sync function and its users and roles.)
            return .admin
        case "_design":
            if read || (m == .post && s.count == 5 && s[3] == "_view") { return .reader }
            // Show, list and rewrite functions read; an update function's write is the caller's own (validated).
            if s.count >= 4 && ["_show", "_list", "_rewrite"].contains(s[3]) { return .reader }
            if s.count >= 4 && s[3] == "_update" { return .member }
            return .admin
        case "_local", "_all_docs", "_design_docs", "_local_docs", "_changes", "_bulk_get", "_revs_diff", "_missing_revs", "_query", "_explain", "_find", "_partition",
             "_ensure_full_commit":
            // Readers may write `_local` documents: replication checkpoints, never replicated or in the feed.
            return .reader
        default:
            return read ? .reader : .member
        }
    }

    /// Design documents are written by database admins only (also inside `_bulk_docs` and `POST /{db}`).
    static func checkDocumentWrite(_ call: Call, id: String) throws {
        if id.hasPrefix("_design/") && call.access < .admin {
            throw call.user == nil ? notDatabaseAdmin : CouchError(.forbidden, "forbidden", "You are not a db or server admin.")
        }
    }

    static func constantTimeEquals(_ a: String, _ b: String) -> Bool { Passwords.constantTimeEquals(a, b) }
}
