import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

/// The `AuthSession=…` pair of a Set-Cookie header.
private func sessionCookie(_ r: HTTPResult) -> String? {
    guard let setCookie = r.header(.setCookie) else { return nil }
    return setCookie.split(separator: ";").first.map { String($0).trimmingCharacters(in: .whitespaces) }
}

@Suite("Authentication")
struct AuthTests {
    @Test func requestsWithoutCredentialsAre401WhenAdminConfigured() async throws {
        try await withServer(admin: true) { c in
            expectError(try await c.get("/_all_dbs"), .unauthorized, "unauthorized")
            expectError(try await c.request(.put, "/db"), .unauthorized, "unauthorized")
            // A database that doesn't exist is 404 for everyone, as in CouchDB.
            expectError(try await c.get("/db/doc"), .notFound, "not_found")
            expectError(try await c.get("/_users/_all_docs"), .unauthorized, "unauthorized")
            expectError(try await c.get("/_metrics"), .unauthorized, "unauthorized")
            // Nothing was created (the system databases are there from the start).
            #expect(c.node.databaseNames() == ["_replicator", "_users"])
        }
    }

    @Test func wrongPasswordIs401() async throws {
        try await withServer(admin: true) { c in
            let r = try await c.get("/_all_dbs", headers: [.authorization: basicAuth("admin", "wrong")])
            expectError(r, .unauthorized, "unauthorized", reason: "Name or password is incorrect.")
            let unknownUser = try await c.get("/_all_dbs", headers: [.authorization: basicAuth("bob", testAdmin.password)])
            expectError(unknownUser, .unauthorized, "unauthorized")
            let garbage = try await c.get("/_all_dbs", headers: [.authorization: "Basic !!!notbase64"])
            #expect(garbage.status == .unauthorized)
        }
    }

    @Test func correctBasicAuthIsAdmin() async throws {
        try await withServer(admin: true) { c in
            let auth: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password)]
            let created = try await c.request(.put, "/db", headers: auth)
            #expect(created.status == .created)
            let dbs = try await c.get("/_all_dbs", headers: auth)
            #expect(dbs.status == .ok)
            #expect(dbs.json == ["_replicator", "_users", "db"])
            let session = try await c.get("/_session", headers: auth)
            #expect(session["userCtx"]?["name"] == "admin")
            #expect(session["userCtx"]?["roles"] == ["_admin"])
            #expect(session["info"]?["authenticated"] == "default")
        }
    }

    @Test func welcomeAndUpArePublic() async throws {
        try await withServer(admin: true) { c in
            let root = try await c.get("/")
            #expect(root.status == .ok)
            #expect(root["couchdb"] == "Welcome")
            let up = try await c.get("/_up")
            #expect(up.status == .ok)
            #expect(up["status"] == "ok")
        }
    }

    @Test func adminPartyTreatsEveryCallerAsAdmin() async throws {
        try await withServer { c in
            let r = try await c.get("/_session")
            #expect(r.status == .ok)
            #expect(r["ok"] == true)
            #expect(r["userCtx"]?["roles"] == ["_admin"])
            #expect(try await c.get("/_all_dbs").status == .ok)
        }
    }

    @Test func refusesToBindBeyondLoopbackWithoutAdmin() throws {
        let dir = TempDataDir()
        let node = try Node(configuration: ServerConfiguration(dataDirectory: dir.path, host: "0.0.0.0", port: 0))
        #expect(throws: SetteeError.self) { _ = try SetteeServer.application(node: node) }
        node.closeAll()
    }
}

@Suite("Session")
struct SessionTests {
    @Test func jsonLoginSetsCookieThatAuthenticatesLaterRequests() async throws {
        try await withServer(admin: true) { c in
            let login = try await c.post("/_session", #"{"name":"admin","password":"s3cret"}"#)
            #expect(login.status == .ok)
            #expect(login.json == ["ok": true, "name": "admin", "roles": ["_admin"]])
            let setCookie = try #require(login.header(.setCookie))
            #expect(setCookie.hasPrefix("AuthSession="))
            #expect(setCookie.contains("HttpOnly"))
            let cookie = try #require(sessionCookie(login))
            #expect(cookie.count > "AuthSession=".count)

            let who = try await c.get("/_session", headers: [.cookie: cookie])
            #expect(who.status == .ok)
            #expect(who["ok"] == true)
            #expect(who["userCtx"]?["name"] == "admin")
            #expect(who["userCtx"]?["roles"] == ["_admin"])
            #expect(who["info"]?["authenticated"] == "cookie")
            #expect(who["info"]?["authentication_handlers"] == ["cookie", "default"])

            let dbs = try await c.get("/_all_dbs", headers: [.cookie: cookie])
            #expect(dbs.status == .ok)
        }
    }

    @Test func formLoginSetsCookie() async throws {
        try await withServer(admin: true) { c in
            let login = try await c.request(.post, "/_session", body: Array("name=admin&password=s3cret".utf8),
                                            headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(login.status == .ok)
            #expect(login["name"] == "admin")
            let cookie = try #require(sessionCookie(login))
            #expect(cookie.hasPrefix("AuthSession="))
            #expect(try await c.get("/_all_dbs", headers: [.cookie: cookie]).status == .ok)
        }
    }

    @Test func loginWithWrongPasswordIs401AndSetsNoCookie() async throws {
        try await withServer(admin: true) { c in
            let r = try await c.post("/_session", #"{"name":"admin","password":"nope"}"#)
            expectError(r, .unauthorized, "unauthorized", reason: "Name or password is incorrect.")
            #expect(r.header(.setCookie) == nil)
            let missing = try await c.post("/_session", #"{"name":"admin"}"#)
            expectError(missing, .unauthorized, "unauthorized")
        }
    }

    @Test func anonymousSessionHasNullNameAndNoRoles() async throws {
        try await withServer(admin: true) { c in
            let r = try await c.get("/_session")
            #expect(r.status == .ok)
            #expect(r["userCtx"]?["name"] == .null)
            #expect(r["userCtx"]?["roles"] == [])
            #expect(r["info"]?["authenticated"] == nil)
        }
    }

    @Test func logoutExpiresCookieAndInvalidatesSession() async throws {
        try await withServer(admin: true) { c in
            let login = try await c.post("/_session", #"{"name":"admin","password":"s3cret"}"#)
            let cookie = try #require(sessionCookie(login))
            let out = try await c.delete("/_session", headers: [.cookie: cookie])
            #expect(out.status == .ok)
            #expect(out.json == ["ok": true])
            let expired = try #require(out.header(.setCookie))
            #expect(expired.hasPrefix("AuthSession=;"))
            #expect(expired.contains("Max-Age=0"))
            // The old cookie no longer authenticates.
            expectError(try await c.get("/_all_dbs", headers: [.cookie: cookie]), .unauthorized, "unauthorized")
            let who = try await c.get("/_session", headers: [.cookie: cookie])
            #expect(who["userCtx"]?["name"] == .null)
        }
    }

    @Test func unsupportedSessionMethodIs405() async throws {
        try await withServer { c in
            expectError(try await c.put("/_session", "{}"), .methodNotAllowed, "method_not_allowed")
        }
    }
}
