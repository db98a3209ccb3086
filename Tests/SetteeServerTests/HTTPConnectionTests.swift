import Foundation
import SetteeCore
import SetteeTestSupport
import Testing

/// The HTTP/1.1 connection handling of `settee serve` (SetteeHTTP1Channel), over real sockets to a child process:
/// pipelining, keep-alive and close, half-close, body limits, idle and stalled clients.
@Suite struct HTTPConnectionTests {
    static func request(_ method: String, _ path: String, body: String? = nil, headers: [String] = []) -> [UInt8] {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: x\r\n"
        for header in headers { text += header + "\r\n" }
        if let body { text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body } else { text += "\r\n" }
        return Array(text.utf8)
    }

    static func id(_ body: [UInt8]) -> String? {
        (try? JSON.parse(body))?["_id"]?.stringValue
    }

    /// A fresh `settee serve` (admin party, loopback) and a connection on which database `db` was created.
    static func nodeWithDatabase(_ extraArguments: [String] = []) throws -> (TempDir, ServerProcess, RawHTTPConnection) {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path, admin: nil, extraArguments: extraArguments)
        let conn = try RawHTTPConnection(port: server.port)
        try conn.send(request("PUT", "/db"))
        #expect(try conn.readResponse()?.status == 201)
        return (dir, server, conn)
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await offThePool {
            let (dir, server, conn) = try Self.nodeWithDatabase()
            defer { server.stop(); _ = dir }
            for name in ["a", "b", "c"] {
                try conn.send(Self.request("PUT", "/db/\(name)", body: #"{"n":"\#(name)"}"#))
                #expect(try conn.readResponse()?.status == 201)
            }
            // Three requests in one write, one of them a write: answered one at a time, in order.
            try conn.send(Self.request("GET", "/db/c") + Self.request("PUT", "/db/d", body: #"{"n":"d"}"#)
                          + Self.request("GET", "/db/a") + Self.request("GET", "/db/d"))
            let first = try #require(try conn.readResponse())
            let second = try #require(try conn.readResponse())
            let third = try #require(try conn.readResponse())
            let fourth = try #require(try conn.readResponse())
            #expect(Self.id(first.body) == "c")
            #expect(second.status == 201)
            #expect(Self.id(third.body) == "a")
            #expect(fourth.status == 200 && Self.id(fourth.body) == "d")
            // The connection stays open for more.
            try conn.send(Self.request("GET", "/db/b"))
            #expect(Self.id(try #require(try conn.readResponse()).body) == "b")
        }
    }

    /// `CONNECT`, `TRACE` and methods no route takes get CouchDB's answer (chttpd answers them as any method a
    /// handler doesn't take: 405 `method_not_allowed`, or the handler's 404; mochiweb switches to no tunnel) and
    /// the keep-alive connection serves the next request. NIO's decoder stops after a CONNECT (or an Upgrade
    /// request): the connection used to hang there.
    @Test func connectTraceAndOtherMethodsAreAnsweredAndTheConnectionLivesOn() async throws {
        try await offThePool {
            let (dir, server, conn) = try Self.nodeWithDatabase()
            defer { server.stop(); _ = dir }
            for method in ["CONNECT", "TRACE", "PROPFIND"] {
                try conn.send(Self.request(method, "/db"))
                let answer = try #require(try conn.readResponse())
                #expect(answer.status == 405, "\(method)")
                #expect((try? JSON.parse(answer.body))?["error"]?.stringValue == "method_not_allowed", "\(method)")
                try conn.send(Self.request("GET", "/db"))
                #expect(try conn.readResponse()?.status == 200, "the request after \(method)")
            }
            try conn.send(Self.request("CONNECT", "/db/missing"))
            #expect(try conn.readResponse()?.status == 405)
            // A CONNECT with the next request in the same write, and a request asking to upgrade (ignored, as
            // CouchDB ignores it): each answered, then the next.
            try conn.send(Self.request("CONNECT", "/") + Self.request("GET", "/_up"))
            #expect(try conn.readResponse()?.status == 405)
            #expect(try conn.readResponse()?.status == 200)
            try conn.send(Self.request("GET", "/db", headers: ["Connection: Upgrade", "Upgrade: websocket"]))
            #expect(try conn.readResponse()?.status == 200)
            try conn.send(Self.request("GET", "/_up"))
            #expect(try conn.readResponse()?.status == 200)
        }
    }

    @Test func connectionCloseAndHTTP10CloseAfterTheResponse() async throws {
        try await offThePool {
            let dir = TempDir()
            let server = try ServerProcess(dataDirectory: dir.path, admin: nil)
            defer { server.stop() }
            let conn = try RawHTTPConnection(port: server.port)
            try conn.send(Self.request("GET", "/_up", headers: ["Connection: close"]))
            let response = try #require(try conn.readResponse())
            #expect(response.status == 200)
            #expect(response.headers["connection"] == "close")
            #expect(conn.closedByServer())

            let old = try RawHTTPConnection(port: server.port)
            try old.send(Array("GET /_up HTTP/1.0\r\n\r\n".utf8))
            #expect(try old.readResponse()?.status == 200)
            #expect(old.closedByServer())

            // A response larger than the socket's send buffer arrives whole before the close.
            let (dir2, server2, writer) = try Self.nodeWithDatabase()
            defer { server2.stop(); _ = dir2 }
            let big = String(repeating: "0123456789abcdef", count: 6 << 16)  // 6 MiB
            try writer.send(Self.request("PUT", "/db/big", body: #"{"pad":"\#(big)"}"#))
            #expect(try writer.readResponse()?.status == 201)
            let reader = try RawHTTPConnection(port: server2.port)
            try reader.send(Self.request("GET", "/db/big", headers: ["Connection: close"]))
            let whole = try #require(try reader.readResponse())
            #expect(whole.status == 200)
            #expect((try? JSON.parse(whole.body))?["pad"]?.stringValue?.utf8.count == big.utf8.count)
            #expect(reader.closedByServer())

            // HTTP/1.0 asking for keep-alive keeps the connection.
            let kept = try RawHTTPConnection(port: server.port)
            for _ in 0..<2 {
                try kept.send(Array("GET /_up HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".utf8))
                #expect(try kept.readResponse()?.status == 200)
            }
        }
    }

    /// Responses are framed for the request: HEAD and 304 carry headers but no body bytes (the next response on
    /// the connection parses cleanly), a feed of unknown length is chunked for HTTP/1.1 and, for HTTP/1.0, sent
    /// unframed and ended by closing the connection; an HTTP/1.0 keep-alive response says so.
    @Test func responseFramingFollowsTheRequest() async throws {
        try await offThePool {
            let (dir, server, conn) = try Self.nodeWithDatabase()
            defer { server.stop(); _ = dir }
            try conn.send(Self.request("PUT", "/db/a", body: #"{"n":1}"#))
            #expect(try conn.readResponse()?.status == 201)
            try conn.send(Self.request("GET", "/db/a"))
            let get = try #require(try conn.readResponse())
            #expect(get.status == 200 && Self.id(get.body) == "a")

            try conn.send(Self.request("HEAD", "/db/a"))
            let head = try #require(try conn.readResponse(expectBody: false))
            #expect(head.status == 200)
            #expect(head.headers["content-length"] == String(get.body.count))
            let etag = try #require(head.headers["etag"])
            try conn.send(Self.request("GET", "/db/a", headers: ["If-None-Match: \(etag)"]))
            let notModified = try #require(try conn.readResponse())
            #expect(notModified.status == 304 && notModified.headers["etag"] == etag)
            // CouchDB's 304 says `Content-Length: 0`; nothing is framed after it.
            #expect(notModified.headers["content-length"] == "0" && notModified.headers["transfer-encoding"] == nil)
            // No stray body bytes after the HEAD or the 304: the next response is the document again.
            try conn.send(Self.request("GET", "/db/a"))
            let again = try #require(try conn.readResponse())
            #expect(again.status == 200 && again.body == get.body)

            try conn.send(Self.request("GET", "/db/_changes?feed=continuous&since=0&timeout=200"))
            let chunked = try #require(try conn.readResponse())
            #expect(chunked.status == 200 && chunked.headers["transfer-encoding"] == "chunked")
            #expect(String(decoding: chunked.body, as: UTF8.self).contains(#""last_seq":"#))

            let old = try RawHTTPConnection(port: server.port)
            try old.send(Array("GET /db/_changes?feed=continuous&since=0&timeout=200 HTTP/1.0\r\n\r\n".utf8))
            let raw = String(decoding: try old.readUntilClosed(), as: UTF8.self)
            let parts = raw.components(separatedBy: "\r\n\r\n")
            let oldHead = parts[0].lowercased()
            #expect(oldHead.hasPrefix("http/1.1 200"))
            #expect(!oldHead.contains("transfer-encoding") && oldHead.contains("connection: close"))
            let lines = parts.dropFirst().joined(separator: "\r\n\r\n").split(separator: "\n")
            #expect(lines.count == 2 && lines.allSatisfy { (try? JSON.parse(Array($0.utf8))) != nil })
            #expect(lines.last?.contains(#""last_seq":"#) == true)

            let kept = try RawHTTPConnection(port: server.port)
            for _ in 0..<2 {
                try kept.send(Array("GET /db/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".utf8))
                let response = try #require(try kept.readResponse())
                #expect(response.status == 200 && response.body == get.body)
                #expect(response.headers["connection"]?.lowercased() == "keep-alive")
            }
        }
    }

    /// A client that half-closes after its request still gets the response, then the connection closes.
    @Test func halfClosedClientGetsItsResponse() async throws {
        try await offThePool {
            let dir = TempDir()
            let server = try ServerProcess(dataDirectory: dir.path, admin: nil)
            defer { server.stop() }
            let conn = try RawHTTPConnection(port: server.port)
            try conn.send(Self.request("GET", "/"))
            conn.shutdownWrite()
            let response = try #require(try conn.readResponse())
            #expect(response.status == 200)
            #expect((try? JSON.parse(response.body))?["couchdb"]?.stringValue == "Welcome")
            #expect(conn.closedByServer())
        }
    }

    /// A body over --max-request-size is answered 413 whether its length is declared or chunked, the store is
    /// untouched, and the connection serves the next request.
    @Test func oversizedBodiesGet413AndTheConnectionLivesOn() async throws {
        try await offThePool {
            let (dir, server, conn) = try Self.nodeWithDatabase(["--max-request-size", "2000"])
            defer { server.stop(); _ = dir }
            let doc = #"{"docs":[{"_id":"big","pad":"\#(String(repeating: "x", count: 5000))"}]}"#
            try conn.send(Self.request("POST", "/db/_bulk_docs", body: doc))
            let declared = try #require(try conn.readResponse())
            #expect(declared.status == 413)
            #expect((try? JSON.parse(declared.body))?["error"]?.stringValue == "too_large")

            var chunked = "POST /db/_bulk_docs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            for piece in stride(from: 0, to: doc.utf8.count, by: 700) {
                let bytes = Array(doc.utf8)[piece..<min(piece + 700, doc.utf8.count)]
                chunked += String(bytes.count, radix: 16) + "\r\n" + String(decoding: bytes, as: UTF8.self) + "\r\n"
            }
            chunked += "0\r\n\r\n"
            try conn.send(Array(chunked.utf8))
            #expect(try conn.readResponse()?.status == 413)

            try conn.send(Self.request("GET", "/db"))
            let info = try #require(try conn.readResponse())
            #expect(info.status == 200)
            #expect((try? JSON.parse(info.body))?["doc_count"]?.intValue == 0)
            // A body under the limit on the same connection is accepted.
            try conn.send(Self.request("POST", "/db/_bulk_docs", body: #"{"docs":[{"_id":"small"}]}"#))
            #expect(try conn.readResponse()?.status == 201)
        }
    }

    /// --idle-timeout closes a connection that sends nothing, and one that stalls in the middle of a request; a
    /// request that takes longer than the timeout to answer (a longpoll feed) is not cut off.
    @Test func idleAndStalledConnectionsAreClosed() async throws {
        try await offThePool {
            let dir = TempDir()
            let server = try ServerProcess(dataDirectory: dir.path, admin: nil, extraArguments: ["--idle-timeout", "0.5"])
            defer { server.stop() }
            let idle = try RawHTTPConnection(port: server.port)
            #expect(idle.closedByServer(within: 5))

            let stalled = try RawHTTPConnection(port: server.port)
            try stalled.send(Array("PUT /db HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{\"a".utf8))
            #expect(stalled.closedByServer(within: 5))

            let conn = try RawHTTPConnection(port: server.port)
            try conn.send(Self.request("PUT", "/db"))
            #expect(try conn.readResponse()?.status == 201)
            let started = Date()
            try conn.send(Self.request("GET", "/db/_changes?feed=longpoll&since=now&timeout=1500"))
            let feed = try #require(try conn.readResponse())
            #expect(feed.status == 200)
            #expect(Date().timeIntervalSince(started) >= 1.2)
            #expect((try? JSON.parse(feed.body))?["results"] != nil)
        }
    }

    /// SIGTERM with a continuous feed, a longpoll and an idle keep-alive connection open: the feeds end with their
    /// `last_seq`, every connection closes, and the process exits promptly.
    @Test func gracefulShutdownEndsOpenFeeds() async throws {
        try await offThePool {
            let (dir, server, conn) = try Self.nodeWithDatabase()
            defer { server.stop(); _ = dir }
            let feed = try RawHTTPConnection(port: server.port)
            try feed.send(Self.request("GET", "/db/_changes?feed=continuous&heartbeat=30000"))
            let longpoll = try RawHTTPConnection(port: server.port)
            try longpoll.send(Self.request("GET", "/db/_changes?feed=longpoll&since=now&timeout=60000"))
            Thread.sleep(forTimeInterval: 0.5)
            let started = Date()
            server.process.terminate()
            let continuous = try #require(try feed.readResponse())
            #expect(String(decoding: continuous.body, as: UTF8.self).contains("\"last_seq\""))
            let polled = try #require(try longpoll.readResponse())
            #expect((try? JSON.parse(polled.body))?["last_seq"] != nil)
            server.process.waitUntilExit()
            #expect(Date().timeIntervalSince(started) < 10)
            #expect(conn.closedByServer(within: 1))
            #expect(feed.closedByServer(within: 1))
        }
    }
}
