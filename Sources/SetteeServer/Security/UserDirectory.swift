import Foundation
import Synchronization
import SetteeCore
import SetteeStore

/// The `_users` database as CouchDB keeps it: one `org.couchdb.user:NAME` document per user with `name`, `type:
/// "user"`, `roles` and the PBKDF2-derived password. Checks credentials (with an in-memory cache of recently
/// verified passwords, so basic auth does not pay a full PBKDF2 per request) and enforces the user-document rules.
final class UserDirectory: Sendable {
    static let database = SystemDatabase.users.rawValue
    static let prefix = "org.couchdb.user:"

    private struct Verified {
        var salt: String
        var derivedKey: String
        var fingerprint: [UInt8]
    }

    /// Logins answered from the cache of verified passwords, and those that ran the key derivation.
    let cacheHits = Atomic<Int>(0)
    let cacheMisses = Atomic<Int>(0)
    private let verified = Mutex<[String: Verified]>([:])
    /// Keys the cache's fingerprints; random per process, never stored.
    private let pepper: [UInt8] = {
        var g = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: 0...255, using: &g) }
    }()

    /// The user's document (winning, live revision), or nil when there is no `_users` database or no such user.
    /// - Throws: 401 `unauthorized` when the document is in conflict, as CouchDB refuses to authenticate against
    ///   a user document until its conflicts are resolved.
    func document(named name: String, node: Node) throws -> JSONObject? {
        guard let db = try? node.database(node.configuration.security.authenticationDB) else { return nil }
        let c = try db.defaultCollection()
        guard let record = try c.record(id: Self.prefix + name), !record.deleted,
              case .object(let doc) = try JSON.parse(record.body) else { return nil }
        if record.conflicted {
            throw CouchError(.unauthorized, "unauthorized",
                             "User document conflicts must be resolved before the document is used for authentication purposes.")
        }
        return doc
    }

    /// Checks a name and password against `_users`. Returns the user's context and password salt, or nil.
    /// May run PBKDF2: call it off the event loop.
    func authenticate(name: String, password: String, node: Node) throws -> (UserContext, salt: String)? {
        guard let doc = try document(named: name, node: node), let salt = doc["salt"]?.stringValue else { return nil }
        let context = UserContext(name: name, roles: Self.roles(of: doc), method: "default")
        let key = doc["derived_key"]?.stringValue ?? doc["password_sha"]?.stringValue ?? ""
        let print = Passwords.fingerprint(password, salt: salt, pepper: pepper)
        let cached = verified.withLock { $0[name] }
        if let cached, cached.salt == salt, cached.derivedKey == key,
           Passwords.constantTimeEquals(cached.fingerprint, print) {
            cacheHits.add(1, ordering: .relaxed)
            return (context, salt)
        }
        cacheMisses.add(1, ordering: .relaxed)
        guard Passwords.verify(password, against: doc) else { return nil }
        verified.withLock { verified in
            if verified.count > 10_000 { verified.removeAll() }
            verified[name] = Verified(salt: salt, derivedKey: key, fingerprint: print)
        }
        return (context, salt)
    }

    /// A user document's roles, without system roles (`_admin` …) a replicated or hand-made document might carry.
    static func roles(of doc: JSONObject) -> [String] {
        (doc["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []).filter { !$0.hasPrefix("_") }
    }

    // MARK: User-document rules

    /// The user name a `_users` document id names, or nil if it is not a user document id.
    static func userName(ofDocument id: String) -> String? {
        id.hasPrefix(prefix) ? String(id.dropFirst(prefix.count)) : nil
    }

    /// Validates and prepares a user document write, as CouchDB's `_users` rules do: `type: "user"`, `name` equal
    /// to the id's suffix and not starting with `_`, `roles` a list of strings; a plaintext `password` is replaced
    /// by PBKDF2 fields. A caller who is not an admin may create a user without roles (sign-up) and update or
    /// delete only their own document, without changing its roles.
    ///
    /// - Parameters:
    ///   - body: the document body (without `_id`/`_rev`/`_deleted`).
    ///   - existing: the current live body, if any.
    static func prepare(id: String, body: JSONObject, deleted: Bool, existing: JSONObject?, caller: UserContext,
                        isAdmin: Bool, iterations: Int,
                        requirements: PasswordRequirements = .none) throws -> JSONObject {
        if id.hasPrefix("_design/") || id.hasPrefix("_local/") {
            guard isAdmin else { throw CouchError(.forbidden, "forbidden", "Only admins may write design documents to _users.") }
            return body
        }
        guard let name = userName(ofDocument: id) else {
            throw CouchError(.forbidden, "forbidden", "doc.type must be user and _id must start with org.couchdb.user:")
        }
        if !isAdmin {
            if existing != nil || deleted {
                guard caller.name == name else {
                    throw CouchError(.forbidden, "forbidden", "You may only update your own user document.")
                }
            }
        }
        if deleted { return body }
        // In the order of CouchDB's `_design/_auth` checks, with its messages.
        func forbid(_ reason: String) -> CouchError { CouchError(.forbidden, "forbidden", reason) }
        guard body["type"]?.stringValue == "user" else { throw forbid("doc.type must be user") }
        guard let docName = body["name"]?.stringValue, !docName.isEmpty else { throw forbid("doc.name is required") }
        guard let rolesValue = body["roles"], rolesValue != .null else { throw forbid("doc.roles must exist") }
        guard let roles = rolesValue.arrayValue else { throw forbid("doc.roles must be an array") }
        guard roles.allSatisfy({ $0.stringValue != nil }) else { throw forbid("doc.roles can only contain strings") }
        guard docName == name else { throw forbid("Doc ID must be of the form org.couchdb.user:name") }
        if let existingName = existing?["name"]?.stringValue, existingName != docName {
            throw forbid("Usernames can not be changed.")
        }
        guard !name.hasPrefix("_") else { throw forbid("Username may not start with underscore.") }
        guard !name.contains(":") else { throw forbid("Character `:` is not allowed in usernames.") }
        // As CouchDB: nobody, not even an admin, gives a `_users` user a system role (`_admin` would make them a
        // server admin).
        if roles.contains(where: { $0.stringValue?.hasPrefix("_") == true }) {
            throw CouchError(.forbidden, "forbidden", "No system roles (starting with underscore) in users db.")
        }
        if !isAdmin {
            let old = existing?["roles"]?.arrayValue ?? []
            guard roles == old else {
                throw CouchError(.forbidden, "forbidden", existing == nil ? "Only _admin may set roles" : "Only _admin may edit roles")
            }
        }
        var out = body
        if let password = body["password"] {
            guard let text = password.stringValue, !text.isEmpty else {
                throw CouchError(.badRequest, "bad_request", "password must be a non-empty string")
            }
            try checkPassword(text, requirements)
            let hashed = try Passwords.hash(text, iterations: iterations)
            out.removeValue(forKey: "password")
            out.removeValue(forKey: "password_sha")
            for (k, v) in hashed.fields { out[k] = v }
        } else if let existing, out["derived_key"] == nil && out["password_sha"] == nil {
            // An update without a password keeps the stored credentials (a client that strips them can't
            // accidentally remove the password).
            for k in ["password_scheme", "pbkdf2_prf", "iterations", "salt", "derived_key", "password_sha"] {
                if let v = existing[k] { out[k] = v }
            }
        } else if !isAdmin, let existing {
            // Non-admins may not write credentials other than through `password`.
            for k in ["password_scheme", "pbkdf2_prf", "iterations", "salt", "derived_key", "password_sha"]
            where out[k] != existing[k] {
                throw CouchError(.forbidden, "forbidden", "Set a new password with the password field")
            }
        }
        return out
    }
}

extension UserDirectory {
    /// `_users`' design document `_design/_auth`, as CouchDB puts one in every authentication database. Settee
    /// enforces these rules natively (``prepare(id:body:deleted:existing:caller:isAdmin:iterations:)``); the
    /// function states the same rules in CouchDB's JavaScript form, for tools and replicas that read it.
    static let authDesignDocument: JSONObject = [
        "_id": "_design/_auth",
        "language": "javascript",
        "validate_doc_update": .string("""
            function(newDoc, oldDoc, userCtx, secObj) {
              var isAdmin = userCtx.roles.indexOf('_admin') !== -1 ||
                (secObj && secObj.admins && ((secObj.admins.names || []).indexOf(userCtx.name) !== -1 ||
                  (secObj.admins.roles || []).some(function(r) { return userCtx.roles.indexOf(r) !== -1; })));
              if (newDoc._deleted === true) {
                if (isAdmin || (oldDoc && userCtx.name === oldDoc.name)) { return; }
                throw({forbidden: 'You may only delete your own user document.'});
              }
              if (newDoc.type !== 'user') { throw({forbidden: 'doc.type must be user'}); }
              if (!newDoc.name) { throw({forbidden: 'doc.name is required'}); }
              if (!newDoc.roles || !Array.isArray(newDoc.roles)) { throw({forbidden: 'doc.roles must be an array'}); }
              if (newDoc._id !== 'org.couchdb.user:' + newDoc.name) {
                throw({forbidden: 'Doc ID must be of the form org.couchdb.user:name'});
              }
              if (newDoc.name.charAt(0) === '_') { throw({forbidden: 'Username may not start with underscore.'}); }
              newDoc.roles.forEach(function(role) {
                if (typeof role !== 'string') { throw({forbidden: 'doc.roles can only contain strings'}); }
                if (role.charAt(0) === '_') { throw({forbidden: 'No system roles (starting with underscore) in users db.'}); }
              });
              if (oldDoc && oldDoc.name !== newDoc.name) { throw({forbidden: 'Usernames can not be changed.'}); }
              if (!isAdmin) {
                if (oldDoc && userCtx.name !== newDoc.name) {
                  throw({forbidden: 'You may only update your own user document.'});
                }
                var oldRoles = oldDoc ? oldDoc.roles : [];
                if (JSON.stringify(oldRoles) !== JSON.stringify(newDoc.roles)) {
                  throw({forbidden: 'Only _admin may edit roles'});
                }
              }
            }
            """),
    ]

    /// A user document with its plain `password` replaced by the stored PBKDF2 fields (the rest as given).
    static func hashPassword(in body: JSONObject, iterations: Int,
                             requirements: PasswordRequirements = .none) throws -> JSONObject {
        guard let text = body["password"]?.stringValue, !text.isEmpty else { return body }
        try checkPassword(text, requirements)
        var out = body
        out.removeValue(forKey: "password")
        out.removeValue(forKey: "password_sha")
        for (k, v) in try Passwords.hash(text, iterations: iterations).fields { out[k] = v }
        return out
    }

    /// Refuses a new password that doesn't meet `[couch_httpd_auth] password_regexp`, with CouchDB's errors: 400
    /// naming the first unmet rule's reason, or 403 when the setting itself can't be read.
    static func checkPassword(_ password: String, _ requirements: PasswordRequirements) throws {
        let serverError = CouchError(.forbidden, "forbidden", "Server cannot hash passwords at this time.")
        switch requirements {
        case .none:
            return
        case .invalid:
            throw serverError
        case .rules(let rules):
            for rule in rules {
                guard let regex = try? NSRegularExpression(pattern: rule.pattern) else { throw serverError }
                let range = NSRange(password.startIndex..., in: password)
                if regex.firstMatch(in: password, range: range) == nil {
                    let reason = ["Password does not conform to requirements.", rule.reason].compactMap { $0 }
                    throw CouchError(.badRequest, "bad_request", reason.joined(separator: " "))
                }
            }
        }
    }

    /// Writes `_design/_auth` into a new `_users` database.
    static func installAuthDesignDocument(_ db: Database) throws {
        let c = try db.defaultCollection()
        if try c.record(id: "_design/_auth") != nil { return }
        var body = authDesignDocument
        body.removeValue(forKey: "_id")
        _ = try c.write([RevisionWrite(id: "_design/_auth", body: body, mode: .edit(parent: nil))], as: .owner)[0].get()
    }
}
