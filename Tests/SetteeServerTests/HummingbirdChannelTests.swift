import Foundation
import SetteeCore
import SetteeTestSupport
import Testing

@testable import SetteeServer

/// The switch back to Hummingbird's own HTTP/1.1 channel (``ServerConfiguration/http1Channel`` `.hummingbird`,
/// `settee serve --http1-channel hummingbird`): real requests over real sockets.
@Suite struct HummingbirdChannelTests {
    @Test func applicationOnHummingbirdsChannelServesRequests() async throws {
        let dir = TempDataDir()
        var configuration = ServerConfiguration(dataDirectory: dir.path, port: 0)
        configuration.http1Channel = .hummingbird
        let node = try Node(configuration: configuration)
        defer { node.closeAll() }
        try await withServer(node: node, mode: .live) { c in
            try await c.createDB("db")
            _ = try await c.putDoc("/db/a", #"{"n":1}"#)
            let doc = try await c.get("/db/a")
            #expect(doc.status == .ok && doc["n"]?.intValue == 1)
            let all = try await c.get("/db/_all_docs")
            #expect(all.status == .ok && rowIDs(all.json) == ["a"])
            let missing = try await c.get("/db/b")
            expectError(missing, .notFound, "not_found")
        }
        _ = dir
    }

    /// `settee serve --http1-channel hummingbird`: pipelining, HTTP/1.0, half-close, 413 and graceful shutdown
    /// with an open feed, as with Settee's own channel (HTTPConnectionTests), but for HTTP/1.0's close.
    @Test func serveWithHummingbirdsChannel() async throws {
        try await offThePool {
            let dir = TempDir()
            let server = try ServerProcess(dataDirectory: dir.path, admin: nil,
                                           extraArguments: ["--http1-channel", "hummingbird", "--max-request-size", "2000"])
            defer { server.stop(); _ = dir }
            let conn = try RawHTTPConnection(port: server.port)
            try conn.send(HTTPConnectionTests.request("PUT", "/db"))
            #expect(try conn.readResponse()?.status == 201)
            try conn.send(HTTPConnectionTests.request("PUT", "/db/a", body: #"{"n":1}"#)
                          + HTTPConnectionTests.request("GET", "/db/a") + HTTPConnectionTests.request("GET", "/db/x"))
            #expect(try conn.readResponse()?.status == 201)
            let a = try #require(try conn.readResponse())
            #expect(a.status == 200 && HTTPConnectionTests.id(a.body) == "a")
            #expect(try conn.readResponse()?.status == 404)

            let big = #"{"docs":[{"pad":"\#(String(repeating: "x", count: 5000))"}]}"#
            try conn.send(HTTPConnectionTests.request("POST", "/db/_bulk_docs", body: big))
            let tooLarge = try #require(try conn.readResponse())
            #expect(tooLarge.status == 413 && (try? JSON.parse(tooLarge.body))?["error"]?.stringValue == "too_large")

            let old = try RawHTTPConnection(port: server.port)
            try old.send(Array("GET /_up HTTP/1.0\r\n\r\n".utf8))
            // (Hummingbird's channel leaves an HTTP/1.0 connection open after the response: the client closes it.)
            #expect(try old.readResponse()?.status == 200)

            let half = try RawHTTPConnection(port: server.port)
            try half.send(HTTPConnectionTests.request("GET", "/"))
            half.shutdownWrite()
            #expect(try half.readResponse()?.status == 200)
            #expect(half.closedByServer())

            // SIGTERM ends an open continuous feed (the node hears of the shutdown) and the process exits.
            let feed = try RawHTTPConnection(port: server.port)
            try feed.send(HTTPConnectionTests.request("GET", "/db/_changes?feed=continuous&heartbeat=30000"))
            Thread.sleep(forTimeInterval: 0.5)
            let started = Date()
            server.process.terminate()
            let continuous = try #require(try feed.readResponse())
            #expect(String(decoding: continuous.body, as: UTF8.self).contains("\"last_seq\""))
            server.process.waitUntilExit()
            #expect(Date().timeIntervalSince(started) < 10)
        }
    }
}
