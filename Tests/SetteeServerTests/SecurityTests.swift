import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
import JWTKit
import SetteeCore
import Testing

@testable import SetteeServer

/// A node with an admin, cheap password hashing for tests, and the given security settings.
private func securedNode(_ dir: TempDataDir, _ configure: (inout SecurityConfiguration) -> Void = { _ in }) throws -> Node {
    var config = ServerConfiguration(dataDirectory: dir.path, port: 0, admin: testAdmin)
    config.security.pbkdf2Iterations = 1000
    configure(&config.security)
    return try Node(configuration: config)
}

private let adminAuth: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password)]

private func auth(_ user: String, _ password: String = "pw") -> HTTPFields {
    [.authorization: basicAuth(user, password)]
}

/// Creates `_users` and a user with roles, as the admin.
private func addUser(_ c: Couch, _ name: String, roles: [String] = [], password: String = "pw") async throws {
    if try await c.get("/_users", headers: adminAuth).status == .notFound {
        #expect(try await c.request(.put, "/_users", headers: adminAuth).status == .created)
    }
    let roleList = roles.map { "\"\($0)\"" }.joined(separator: ",")
    let r = try await c.put("/_users/org.couchdb.user:\(name)",
                            #"{"name":"\#(name)","type":"user","roles":[\#(roleList)],"password":"\#(password)"}"#,
                            headers: adminAuth)
    #expect(r.status == .created, "create user \(name): \(r.text)")
}

private func cookie(_ r: HTTPResult) -> String? {
    r.header(.setCookie)?.split(separator: ";").first.map { String($0).trimmingCharacters(in: .whitespaces) }
}

@Suite("Security: roles, _users, lockout, JWT")
struct SecurityTests {
    /// admin / database admin / member / reader / outsider / anonymous × every route family, over real HTTP.
    @Test func roleMatrix() async throws {
        let dir = TempDataDir()
        let node = try securedNode(dir)
        try await withServer(node: node, mode: .live) { c in
            try await addUser(c, "boss", roles: ["managers"])
            try await addUser(c, "mem")
            try await addUser(c, "rea")
            try await addUser(c, "out")
            #expect(try await c.request(.put, "/shop", headers: adminAuth).status == .created)
            let sec = #"{"admins":{"names":[],"roles":["managers"]},"members":{"names":["mem"],"roles":[]},"readers":{"names":["rea"],"roles":[]}}"#
            #expect(try await c.put("/shop/_security", sec, headers: adminAuth).status == .ok)
            #expect(try await c.put("/shop/d1", #"{"v":1}"#, headers: adminAuth).status == .created)

            let callers: [(String, HTTPFields)] = [("admin", adminAuth), ("boss", auth("boss")), ("mem", auth("mem")),
                                                   ("rea", auth("rea")), ("out", auth("out")), ("anon", [:])]
            func check(_ label: String, _ expected: [Int],
                       _ send: (String, HTTPFields) async throws -> HTTPResult) async throws {
                for ((who, headers), want) in zip(callers, expected) {
                    let r = try await send(who, headers)
                    #expect(Int(r.status.code) == want, "\(label) as \(who): \(r.status.code) \(r.text)")
                    if r.status.code >= 400 {
                        #expect(r["error"]?.stringValue != nil && r["reason"]?.stringValue != nil, "\(label) as \(who): error shape")
                    }
                }
            }
            try await check("GET doc", [200, 200, 200, 200, 403, 401]) { _, h in try await c.get("/shop/d1", headers: h) }
            try await check("GET db info", [200, 200, 200, 200, 403, 401]) { _, h in try await c.get("/shop", headers: h) }
            try await check("PUT doc", [201, 201, 201, 403, 403, 401]) { who, h in try await c.put("/shop/doc-\(who)", "{}", headers: h) }
            try await check("POST doc", [201, 201, 201, 403, 403, 401]) { who, h in
                try await c.post("/shop", #"{"_id":"post-\#(who)"}"#, headers: h)
            }
            // Signed-in non-admins writing a design document or _security: 403 (CouchDB's answer).
            try await check("PUT design doc", [201, 201, 403, 403, 403, 401]) { who, h in
                try await c.put("/shop/_design/dd-\(who)", "{}", headers: h)
            }
            try await check("_all_docs", [200, 200, 200, 200, 403, 401]) { _, h in try await c.get("/shop/_all_docs", headers: h) }
            try await check("_changes", [200, 200, 200, 200, 403, 401]) { _, h in try await c.get("/shop/_changes", headers: h) }
            try await check("_bulk_docs", [201, 201, 201, 403, 403, 401]) { who, h in
                try await c.post("/shop/_bulk_docs", #"{"docs":[{"_id":"bulk-\#(who)"}]}"#, headers: h)
            }
            try await check("_revs_diff", [200, 200, 200, 200, 403, 401]) { _, h in
                try await c.post("/shop/_revs_diff", #"{"d1":["9-abc"]}"#, headers: h)
            }
            try await check("_local", [201, 201, 201, 201, 403, 401]) { who, h in
                try await c.put("/shop/_local/ck-\(who)", "{}", headers: h)
            }
            try await check("GET _security", [200, 200, 200, 200, 403, 401]) { _, h in try await c.get("/shop/_security", headers: h) }
            try await check("PUT _security", [200, 200, 403, 403, 403, 401]) { _, h in try await c.put("/shop/_security", sec, headers: h) }
            try await check("_compact", [202, 202, 401, 401, 403, 401]) { _, h in
                var h = h
                h[.contentType] = "application/json"
                return try await c.request(.post, "/shop/_compact", body: [], headers: h)
            }
            try await check("create db", [201, 401, 401, 401, 401, 401]) { who, h in
                try await c.request(.put, "/new-\(who)", headers: h)
            }
            try await check("_all_dbs", [200, 401, 401, 401, 401, 401]) { _, h in try await c.get("/_all_dbs", headers: h) }
            try await check("_active_tasks", [200, 401, 401, 401, 401, 401]) { _, h in try await c.get("/_active_tasks", headers: h) }
            try await check("_metrics", [200, 401, 401, 401, 401, 401]) { _, h in try await c.get("/_metrics", headers: h) }
            try await check("_session", [200, 200, 200, 200, 200, 200]) { _, h in try await c.get("/_session", headers: h) }
            try await check("_up", [200, 200, 200, 200, 200, 200]) { _, h in try await c.get("/_up", headers: h) }
            try await check("delete db", [200, 401, 401, 401, 401, 401]) { who, h in
                try await c.request(.delete, who == "admin" ? "/new-admin" : "/shop", headers: h)
            }

            // A member's _bulk_docs may not carry a design document: that row fails, the others land.
            let bulk = try await c.post("/shop/_bulk_docs", #"{"docs":[{"_id":"_design/sneaky"},{"_id":"fine"}]}"#, headers: auth("mem"))
            #expect(bulk.status == .created)
            #expect(bulk.json[0]?["error"] == "unauthorized")
            #expect(bulk.json[1]?["ok"] == true)
            // Databases nobody set _security on are admin-only.
            #expect(try await c.request(.put, "/private", headers: adminAuth).status == .created)
            #expect(try await c.get("/private", headers: auth("mem")).status == .forbidden)
            // An empty _security (no members, no readers) makes a database public.
            #expect(try await c.put("/private/_security", "{}", headers: adminAuth).status == .ok)
            #expect(try await c.put("/private/pub", "{}").status == .created)
            #expect(try await c.put("/private/_design/nope", "{}").status == .unauthorized)
            // A missing database is 404 for anonymous callers too, as in CouchDB (replicators rely on it).
            #expect(try await c.get("/no-such-db").status == .notFound)
            #expect(try await c.get("/no-such-db", headers: auth("mem")).status == .notFound)
        }
        node.closeAll()
    }

    @Test func usersDatabaseRules() async throws {
        let dir = TempDataDir()
        let node = try securedNode(dir)
        try await withServer(node: node) { c in
            // A fresh node has `_users` (with its `_design/_auth`).
            #expect(try await c.get("/_users/_design/_auth", headers: adminAuth).status == .ok)
            // Anonymous sign-up, without roles.
            let signup = try await c.put("/_users/org.couchdb.user:ann", #"{"name":"ann","type":"user","roles":[],"password":"first"}"#)
            #expect(signup.status == .created, "\(signup.text)")
            let escalate = try await c.put("/_users/org.couchdb.user:eve", #"{"name":"eve","type":"user","roles":["_admin"],"password":"x"}"#)
            expectError(escalate, .forbidden, "forbidden")
            let roleful = try await c.put("/_users/org.couchdb.user:eve", #"{"name":"eve","type":"user","roles":["staff"],"password":"x"}"#)
            expectError(roleful, .forbidden, "forbidden", reason: "Only _admin may set roles")
            expectError(try await c.put("/_users/org.couchdb.user:bob", #"{"name":"notbob","type":"user","roles":[],"password":"x"}"#),
                        .forbidden, "forbidden")
            // Not even an admin gives a user a system role.
            expectError(try await c.put("/_users/org.couchdb.user:root2", #"{"name":"root2","type":"user","roles":["_admin"],"password":"x"}"#,
                                        headers: adminAuth), .forbidden, "forbidden", reason: "No system roles (starting with underscore) in users db.")
            expectError(try await c.put("/_users/org.couchdb.user:_sys", #"{"name":"_sys","type":"user","roles":[],"password":"x"}"#),
                        .forbidden, "forbidden")
            expectError(try await c.put("/_users/org.couchdb.user:tom", #"{"name":"tom","roles":[],"password":"x"}"#),
                        .forbidden, "forbidden")

            // Stored as PBKDF2, never in plaintext.
            let stored = try await c.get("/_users/org.couchdb.user:ann", headers: adminAuth)
            #expect(stored["password"] == nil)
            #expect(stored["password_scheme"] == "pbkdf2")
            #expect(stored["pbkdf2_prf"] == "sha256")
            #expect(stored["iterations"] == 1000)
            #expect(stored["derived_key"]?.stringValue?.count == 64)
            #expect(stored["salt"]?.stringValue?.count == 32)
            let file = try Data(contentsOf: URL(fileURLWithPath: dir.path + "/_users.sqlite"))
            #expect(file.range(of: Data("first".utf8)) == nil, "the plaintext password is not in the database file")

            // Basic auth and cookies for a _users user.
            let who = try await c.get("/_session", headers: auth("ann", "first"))
            #expect(who["userCtx"] == ["name": "ann", "roles": []])
            let login = try await c.post("/_session", #"{"name":"ann","password":"first"}"#)
            #expect(login.status == .ok)
            #expect(login.json == ["ok": true, "name": "ann", "roles": []])
            let annCookie = try #require(cookie(login))
            let viaCookie = try await c.get("/_session", headers: [.cookie: annCookie])
            #expect(viaCookie["userCtx"]?["name"] == "ann")
            #expect(viaCookie["info"]?["authenticated"] == "cookie")

            // Own document readable; others' not (not even whether they exist); no listing.
            let own = try await c.get("/_users/org.couchdb.user:ann", headers: auth("ann", "first"))
            #expect(own.status == .ok)
            try await addUser(c, "bob")
            expectError(try await c.get("/_users/org.couchdb.user:bob", headers: auth("ann", "first")), .notFound, "not_found")
            expectError(try await c.get("/_users/org.couchdb.user:bob"), .notFound, "not_found")
            expectError(try await c.get("/_users/_all_docs", headers: auth("ann", "first")), .forbidden, "forbidden")
            expectError(try await c.get("/_users/_changes", headers: auth("ann", "first")), .forbidden, "forbidden")
            expectError(try await c.get("/_users/_all_docs"), .unauthorized, "unauthorized")
            // Nobody but bob (or an admin) updates bob; ann can't give herself roles.
            let bobRev = try await c.get("/_users/org.couchdb.user:bob", headers: adminAuth)["_rev"]?.stringValue ?? ""
            expectError(try await c.put("/_users/org.couchdb.user:bob",
                                        #"{"_rev":"\#(bobRev)","name":"bob","type":"user","roles":[],"password":"owned"}"#,
                                        headers: auth("ann", "first")), .forbidden, "forbidden")
            let annRev = own["_rev"]?.stringValue ?? ""
            expectError(try await c.put("/_users/org.couchdb.user:ann",
                                        #"{"_rev":"\#(annRev)","name":"ann","type":"user","roles":["boss"]}"#,
                                        headers: auth("ann", "first")), .forbidden, "forbidden", reason: "Only _admin may edit roles")

            // Changing her own password: the old one and the old cookie stop working.
            let change = try await c.put("/_users/org.couchdb.user:ann",
                                         #"{"_rev":"\#(annRev)","name":"ann","type":"user","roles":[],"password":"second"}"#,
                                         headers: auth("ann", "first"))
            #expect(change.status == .created, "\(change.text)")
            expectError(try await c.get("/_session", headers: auth("ann", "first")), .unauthorized, "unauthorized")
            #expect(try await c.get("/_session", headers: auth("ann", "second"))["userCtx"]?["name"] == "ann")
            #expect(try await c.get("/_session", headers: [.cookie: annCookie])["userCtx"]?["name"] == .null)
            // An update without a password keeps the credentials.
            let rev3 = try await c.get("/_users/org.couchdb.user:ann", headers: adminAuth)["_rev"]?.stringValue ?? ""
            let keep = try await c.put("/_users/org.couchdb.user:ann",
                                       #"{"_rev":"\#(rev3)","name":"ann","type":"user","roles":[],"email":"a@example.com"}"#,
                                       headers: auth("ann", "second"))
            #expect(keep.status == .created, "\(keep.text)")
            #expect(try await c.get("/_session", headers: auth("ann", "second"))["userCtx"]?["name"] == "ann")
            // Roles from _users count in _security.
            try await addUser(c, "carl", roles: ["staff"])
            #expect(try await c.request(.put, "/team", headers: adminAuth).status == .created)
            #expect(try await c.put("/team/_security", #"{"members":{"roles":["staff"]}}"#, headers: adminAuth).status == .ok)
            #expect(try await c.put("/team/x", "{}", headers: auth("carl")).status == .created)
            #expect(try await c.put("/team/y", "{}", headers: auth("ann", "second")).status == .forbidden)
        }
        node.closeAll()
    }

    @Test func cookiesAreSignedAndExpire() async throws {
        let dir = TempDataDir()
        let node = try securedNode(dir) { $0.sessionTimeout = 600 }
        try await withServer(node: node) { c in
            let login = try await c.post("/_session", #"{"name":"admin","password":"s3cret"}"#)
            let good = try #require(cookie(login))
            #expect(login.header(.setCookie)?.contains("HttpOnly") == true)
            #expect(try await c.get("/_all_dbs", headers: [.cookie: good]).status == .ok)
            // Forged: another name with the same signature, or a flipped signature byte.
            let value = String(good.dropFirst("AuthSession=".count))
            let decoded = String(decoding: Base64.urlDecode(value) ?? [], as: UTF8.self)
            let forgedName = "AuthSession=" + Base64.urlEncode(Array(("root" + decoded.drop { $0 != ":" }).utf8))
            #expect(try await c.get("/_all_dbs", headers: [.cookie: forgedName]).status == .unauthorized)
            var flipped = Array(decoded.utf8)
            flipped[flipped.count - 1] = flipped.last == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
            #expect(try await c.get("/_all_dbs", headers: [.cookie: "AuthSession=" + Base64.urlEncode(flipped)]).status == .unauthorized)
            #expect(try await c.get("/_all_dbs", headers: [.cookie: "AuthSession=%%%garbage"]).status == .unauthorized)
            // A correctly signed cookie issued longer ago than the timeout is refused; one issued a minute ago is
            // accepted and re-issued (more than 10% of its life is gone).
            let salt = Auth.adminSalt(NodeConfig.AdminCredential.startup(password: testAdmin.password).salt)
            let old = node.cookies.make(user: "admin", salt: salt, time: Int(Date().timeIntervalSince1970) - 601)
            #expect(try await c.get("/_all_dbs", headers: [.cookie: "AuthSession=" + old]).status == .unauthorized)
            let recent = node.cookies.make(user: "admin", salt: salt, time: Int(Date().timeIntervalSince1970) - 61)
            let refreshed = try await c.get("/_all_dbs", headers: [.cookie: "AuthSession=" + recent])
            #expect(refreshed.status == .ok)
            #expect(refreshed.header(.setCookie)?.hasPrefix("AuthSession=") == true)
        }
        node.closeAll()
        // A cookie made with another node secret is refused.
        let other = SessionCookies(secret: Array(repeating: 7, count: 32), timeout: 600)
        let mine = SessionCookies(secret: Array(repeating: 8, count: 32), timeout: 600)
        let made = try #require(other.parse(other.make(user: "x", salt: "s")))
        #expect(mine.verify(user: made.user, time: made.time, stamp: made.stamp, mac: made.mac, salt: "s") == .invalid)
        #expect(other.verify(user: made.user, time: made.time, stamp: made.stamp, mac: made.mac, salt: "s") == .valid(refresh: false))
    }

    @Test func lockoutAfterRepeatedFailuresAndItsExpiry() async throws {
        let dir = TempDataDir()
        let node = try securedNode(dir) {
            $0.lockoutThreshold = 3
            $0.lockoutDuration = 60
        }
        try await withServer(node: node, mode: .live) { c in
            try await addUser(c, "lou", password: "right")
            // CouchDB's rule: `threshold` failures lock the pair.
            for _ in 0..<3 {
                expectError(try await c.get("/_session", headers: auth("lou", "wrong")), .unauthorized, "unauthorized")
            }
            // Locked: even the right password is refused, by basic auth and by _session.
            let locked = try await c.get("/_session", headers: auth("lou", "right"))
            expectError(locked, .forbidden, "forbidden", reason: "Account is temporarily locked due to multiple authentication failures")
            expectError(try await c.post("/_session", #"{"name":"lou","password":"right"}"#), .forbidden, "forbidden")
            // Other users from the same address are not affected.
            #expect(try await c.get("/_all_dbs", headers: adminAuth).status == .ok)
            let metrics = try await c.get("/_metrics", headers: adminAuth).text
            #expect(metrics.contains("settee_auth_lockouts_total 1"))
            #expect(metrics.contains("settee_auth_failures_total 3"))
        }
        node.closeAll()
        // The lock expires `duration` after the last failure (clock passed in, so no sleeping).
        let clock = Lockout(threshold: 3, duration: 300)
        let t0 = Date()
        for k in 0..<3 { clock.recordFailure(user: "lou", address: "a", now: t0.addingTimeInterval(Double(k))) }
        #expect(clock.isLocked(user: "lou", address: "a", now: t0.addingTimeInterval(200)))
        #expect(!clock.isLocked(user: "lou", address: "a", now: t0.addingTimeInterval(304)))
        // A success clears the count.
        for _ in 0..<2 { clock.recordFailure(user: "sam", address: "a") }
        clock.recordSuccess(user: "sam", address: "a")
        clock.recordFailure(user: "sam", address: "a")
        #expect(!clock.isLocked(user: "sam", address: "a"))
        // The lock is per (user, address).
        let lockout = Lockout(threshold: 1, duration: 60)
        #expect(lockout.recordFailure(user: "u", address: "10.0.0.1"))
        #expect(lockout.isLocked(user: "u", address: "10.0.0.1"))
        #expect(!lockout.isLocked(user: "u", address: "10.0.0.2"))
        #expect(!lockout.isLocked(user: "v", address: "10.0.0.1"))
    }

    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var aud: AudienceClaim?
        var roles: [String]

        enum CodingKeys: String, CodingKey {
            case sub, exp, aud
            case roles = "_couchdb.roles"
        }

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    @Test func jwtBearerTokens() async throws {
        let secret = Array("a-test-secret-of-32-bytes-length".utf8)
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let dir = TempDataDir()
        let node = try securedNode(dir) {
            var jwt = JWTConfiguration(hmacSecrets: [secret], rsaPublicKeysPEM: [rsa.publicKey.pemRepresentation])
            jwt.audience = "settee"
            $0.jwt = jwt
        }
        let hmacKeys = JWTKeyCollection()
        await hmacKeys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        let wrongKeys = JWTKeyCollection()
        await wrongKeys.add(hmac: HMACKey(from: Array("another-secret-another-secret-xx".utf8)), digestAlgorithm: .sha256)
        let rsaKeys = JWTKeyCollection()
        await rsaKeys.add(rsa: try Insecure.RSA.PrivateKey(pem: rsa.pemRepresentation), digestAlgorithm: .sha256)
        @Sendable func claims(_ sub: String, exp: TimeInterval = 300, aud: String? = "settee", roles: [String] = ["staff"]) -> Claims {
            Claims(sub: .init(value: sub), exp: .init(value: Date().addingTimeInterval(exp)), aud: aud.map { .init(value: [$0]) },
                   roles: roles)
        }
        @Sendable func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer " + token] }

        try await withServer(node: node) { c in
            let good = try await hmacKeys.sign(claims("alice"))
            let who = try await c.get("/_session", headers: bearer(good))
            #expect(who["userCtx"] == ["name": "alice", "roles": ["staff"]])
            #expect(who["info"]?["authenticated"] == "jwt")
            // Roles from the token count in _security.
            #expect(try await c.request(.put, "/team", headers: adminAuth).status == .created)
            #expect(try await c.put("/team/_security", #"{"members":{"roles":["staff"]}}"#, headers: adminAuth).status == .ok)
            #expect(try await c.put("/team/doc", "{}", headers: bearer(good)).status == .created)
            #expect(try await c.put("/team/doc2", "{}", headers: bearer(try await hmacKeys.sign(claims("bob", roles: [])))).status == .forbidden)

            let rs = try await rsaKeys.sign(claims("rita"))
            #expect(try await c.get("/_session", headers: bearer(rs))["userCtx"]?["name"] == "rita")

            expectError(try await c.get("/_session", headers: bearer(try await hmacKeys.sign(claims("alice", exp: -600)))),
                        .unauthorized, "unauthorized")
            expectError(try await c.get("/_session", headers: bearer(try await wrongKeys.sign(claims("alice")))),
                        .unauthorized, "unauthorized")
            expectError(try await c.get("/_session", headers: bearer(try await hmacKeys.sign(claims("alice", aud: "elsewhere")))),
                        .unauthorized, "unauthorized")
            expectError(try await c.get("/_session", headers: bearer(try await hmacKeys.sign(claims("alice", aud: nil)))),
                        .unauthorized, "unauthorized")
            // alg "none" and garbage.
            let parts = good.split(separator: ".")
            let none = Base64.urlEncode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + parts[1] + "."
            expectError(try await c.get("/_session", headers: bearer(none)), .unauthorized, "unauthorized")
            expectError(try await c.get("/_session", headers: bearer("not.a.token")), .unauthorized, "unauthorized")
            // An RSA public key can't be used as an HMAC secret (algorithm confusion).
            let confused = JWTKeyCollection()
            await confused.add(hmac: HMACKey(from: Array(rsa.publicKey.pemRepresentation.utf8)), digestAlgorithm: .sha256)
            expectError(try await c.get("/_session", headers: bearer(try await confused.sign(claims("mallory")))),
                        .unauthorized, "unauthorized")
        }
        node.closeAll()
    }

    @Test func requestLimits() async throws {
        let dir = TempDataDir()
        var config = ServerConfiguration(dataDirectory: dir.path, port: 0)
        config.maxBulkDocs = 3
        config.maxAttachmentSize = 10
        let node = try Node(configuration: config)
        try await withServer(node: node) { c in
            try await c.createDB("db")
            expectError(try await c.post("/db/_bulk_docs", #"{"docs":[{},{},{},{}]}"#), .contentTooLarge,
                        "max_bulk_docs_count_exceeded", reason: "3")
            #expect(try await c.post("/db/_bulk_docs", #"{"docs":[{"_id":"a"},{},{}]}"#).status == .created)
            expectError(try await c.post("/db/_bulk_get", #"{"docs":[{"id":"a"},{"id":"a"},{"id":"a"},{"id":"a"}]}"#),
                        .contentTooLarge, "max_bulk_get_count_exceeded")
            // Attachments: size and names, inline and standalone.
            let big = Base64.encode(Array(repeating: 65, count: 11))
            expectError(try await c.put("/db/inline", #"{"_attachments":{"a.txt":{"content_type":"text/plain","data":"\#(big)"}}}"#),
                        .contentTooLarge, "attachment_too_large", reason: "a.txt")
            let rev = try await c.putDoc("/db/doc", "{}")
            expectError(try await c.request(.put, "/db/doc/big.bin?rev=\(rev)", body: Array(repeating: 1, count: 11),
                                            headers: [.contentType: "application/octet-stream"]),
                        .contentTooLarge, "attachment_too_large")
            expectError(try await c.request(.put, "/db/doc/_hidden?rev=\(rev)", body: [1], headers: [.contentType: "text/plain"]),
                        .badRequest, "bad_request")
            expectError(try await c.request(.put, "/db/doc/a%00b?rev=\(rev)", body: [1], headers: [.contentType: "text/plain"]),
                        .badRequest, "bad_request")
            expectError(try await c.put("/db/inline2", #"{"_attachments":{"bad\u0000name":{"data":"QQ=="}}}"#),
                        .badRequest, "bad_request")
            #expect(try await c.request(.put, "/db/doc/ok.bin?rev=\(rev)", body: Array(repeating: 1, count: 10),
                                        headers: [.contentType: "application/octet-stream"]).status == .created)
            // Nothing else was written.
            #expect(try await c.get("/db/inline").status == .notFound)
            #expect(try await c.get("/db/inline2").status == .notFound)
        }
        node.closeAll()
    }

    @Test func queriesStopAtTheQueryTimeout() async throws {
        let dir = TempDataDir()
        var config = ServerConfiguration(dataDirectory: dir.path, port: 0)
        // Long enough for the quick query below on a loaded machine (the whole suite runs in parallel).
        config.queryTimeout = 1
        let node = try Node(configuration: config)
        try await withServer(node: node) { c in
            try await c.createDB("db")
            let docs = (0..<3000).map { #"{"_id":"d\#($0)","k":\#($0)}"# }.joined(separator: ",")
            #expect(try await c.post("/db/_bulk_docs", #"{"docs":[\#(docs)]}"#).status == .created)
            let started = Date()
            // 9 million pairs: far longer than 1 s.
            let slow = try await c.post("/db/_query", #"{"query":"SELECT COUNT(*) AS n FROM _ AS a JOIN _ AS b ON a.k != b.k"}"#)
            expectError(slow, .requestTimeout, "timeout")
            #expect(Date().timeIntervalSince(started) < 10)
            // The node answers other queries normally afterwards.
            let quick = try await c.post("/db/_query", #"{"query":"SELECT COUNT(*) AS n FROM _"}"#)
            #expect(quick.status == .ok)
            #expect(quick["rows"]?[0]?["n"] == 3000)
        }
        node.closeAll()
    }
}

@Suite("CouchDB's JWT and password rules, as jwtf and couch_users_db apply them")
struct CouchAuthRuleTests {
    /// jwtf signs ES384/ES512 with any EC key and pads r and s to the algorithm's bits (48 and 64 bytes);
    /// one P-256 public key verifies all three, in the raw form and in DER.
    @Test func oneP256KeyVerifiesEveryESAlgorithm() throws {
        let key = P256.Signing.PrivateKey()
        let ec = JWTAuthenticator.ECKey.p256(key.publicKey)
        let message = Array("header.payload".utf8)
        for (alg, size) in [("ES256", 32), ("ES384", 48), ("ES512", 64)] {
            let signature: P256.Signing.ECDSASignature
            switch alg {
            case "ES256": signature = try key.signature(for: SHA256.hash(data: message))
            case "ES384": signature = try key.signature(for: SHA384.hash(data: message))
            default: signature = try key.signature(for: SHA512.hash(data: message))
            }
            let raw = Array(signature.rawRepresentation)
            let padded = Array(repeating: 0, count: size - 32) + raw[0..<32] + Array(repeating: 0, count: size - 32) + raw[32...]
            #expect(ec.verifies(padded, of: message, alg: alg), "\(alg) padded to \(size)")
            #expect(ec.verifies(raw, of: message, alg: alg), "\(alg) raw")
            #expect(ec.verifies(Array(signature.derRepresentation), of: message, alg: alg), "\(alg) DER")
            #expect(!ec.verifies(padded, of: Array("other".utf8), alg: alg))
        }
    }

    @Test func passwordRegexpIsReadAsCouchDBReadsIt() throws {
        let rules = ErlangTermList.passwordRequirements(#"[{".{10,}"}, {"[A-Z]+", "Requirement 2."}, {"[a-z]+", ""}, {"\\d+", "Req 4."}, "[!.,()]+"]"#)
        guard case .rules(let list) = rules else { Issue.record("not read: \(rules)"); return }
        #expect(list.map(\.pattern) == [".{10,}", "[A-Z]+", "[a-z]+", #"\d+"#, "[!.,()]+"])
        #expect(list.map(\.reason) == [nil, "Requirement 2.", nil, "Req 4.", nil])
        #expect(ErlangTermList.passwordRequirements("") == .none)
        #expect(ErlangTermList.passwordRequirements("[]") == .none)
        #expect(ErlangTermList.passwordRequirements(#"{{".{10,}"}}"#) == .invalid)
        #expect(ErlangTermList.passwordRequirements(#"[{".{10,}"]"#) == .invalid)

        func reason(_ password: String) -> String? {
            do { try UserDirectory.checkPassword(password, rules); return nil } catch let e as CouchError { return e.reason } catch { return "\(error)" }
        }
        #expect(reason("funnybone") == "Password does not conform to requirements.")
        #expect(reason("funnnnnybone") == "Password does not conform to requirements. Requirement 2.")
        #expect(reason("funnnnnyBONE1") == "Password does not conform to requirements.")
        #expect(reason("funnnnnyBONE1.") == nil)
        #expect(throws: CouchError.self) { try UserDirectory.checkPassword("anything", .invalid) }
    }
}
