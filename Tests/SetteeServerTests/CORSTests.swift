import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

@Suite("CORS") struct CORSTests {
    func node(_ dir: TempDataDir, _ cors: CORSConfiguration?) throws -> Node {
        var config = ServerConfiguration(dataDirectory: dir.path, port: 0, admin: testAdmin)
        config.cors = cors
        return try Node(configuration: config)
    }

    static let auth: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password)]

    @Test func offByDefault() async throws {
        let dir = TempDataDir()
        let n = try node(dir, nil)
        try await withServer(node: n) { c in
            let r = try await c.get("/", headers: [.origin: "http://app.example"])
            #expect(r.status == .ok)
            #expect(r.header(.accessControlAllowOrigin) == nil)
            let pre = try await c.request(.options, "/db", headers: [.origin: "http://app.example", .accessControlRequestMethod: "GET"])
            #expect(pre.header(.accessControlAllowOrigin) == nil)
        }
        n.closeAll()
    }

    @Test func allowedOriginsWithCredentials() async throws {
        let dir = TempDataDir()
        let n = try node(dir, CORSConfiguration(origins: ["http://app.example"], credentials: true))
        try await withServer(node: n, mode: .live) { c in
            // A preflight needs no credentials and names the origin itself (never * with credentials).
            let pre = try await c.request(.options, "/db/_bulk_docs", headers: [
                .origin: "http://app.example", .accessControlRequestMethod: "POST",
                .accessControlRequestHeaders: "Authorization, Content-Type"])
            #expect(pre.status == .ok)
            #expect(pre.header(.accessControlAllowOrigin) == "http://app.example")
            #expect(pre.header(.accessControlAllowCredentials) == "true")
            #expect(pre.header(.accessControlAllowMethods)?.contains("POST") == true)
            #expect(pre.header(.accessControlAllowHeaders)?.contains("authorization") == true)
            #expect(pre.header(.accessControlAllowHeaders)?.contains("content-type") == true)
            #expect(pre.header(.accessControlMaxAge) == "600")
            // Real requests (successes and errors) carry the headers for an allowed origin…
            var h = Self.auth
            h[.origin] = "http://app.example"
            let created = try await c.request(.put, "/db", headers: h)
            #expect(created.status == .created)
            #expect(created.header(.accessControlAllowOrigin) == "http://app.example")
            #expect(created.header(.accessControlExposeHeaders)?.contains("etag") == true)
            let denied = try await c.get("/db", headers: [.origin: "http://app.example"])
            #expect(denied.status == .unauthorized)
            #expect(denied.header(.accessControlAllowOrigin) == "http://app.example")
            // …and nothing for another origin, preflight or not.
            let other = try await c.request(.options, "/db", headers: [.origin: "http://evil.example", .accessControlRequestMethod: "GET"])
            #expect(other.header(.accessControlAllowOrigin) == nil)
            var evil = Self.auth
            evil[.origin] = "http://evil.example"
            #expect(try await c.get("/db", headers: evil).header(.accessControlAllowOrigin) == nil)
        }
        n.closeAll()
    }

    @Test func anyOriginWithoutCredentials() async throws {
        let dir = TempDataDir()
        let n = try node(dir, CORSConfiguration(origins: ["*"]))
        try await withServer(node: n) { c in
            let r = try await c.get("/_up", headers: [.origin: "https://anything.example"])
            #expect(r.header(.accessControlAllowOrigin) == "*")
            #expect(r.header(.accessControlAllowCredentials) == nil)
        }
        n.closeAll()
    }
}
