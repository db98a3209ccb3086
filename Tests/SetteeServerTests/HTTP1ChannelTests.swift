import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import SetteeCore
import SetteeTestSupport
import Synchronization
import Testing

@testable import SetteeServer

/// The real connection pipeline of `SetteeHTTP1Channel` (NIO's `HTTPRequestDecoder`, then
/// ``HTTP1ConnectionHandler``) on a testing channel, answering with a real ``CouchResponder`` over a node on a
/// temporary directory: bytes in, bytes out, time moved by hand.
///
/// The channel is NIO's `NIOAsyncTestingChannel` (NIOEmbedded's thread-safe `EmbeddedChannel`): responses are
/// written by each request's Swift task, from another thread, which `EmbeddedEventLoop` doesn't allow.
@Suite struct HTTP1ChannelTests {
    /// How long a test waits for the server: `seconds` of the wall clock *and* as many 2 ms polls as fit in
    /// them. A request's task runs on the same cooperative threads as the polling task, so on a machine busy
    /// enough to starve those threads (the whole test suite starting at once on two cores) the polls slow down
    /// with the server and a stalled pool is not taken for a missing response.
    struct Wait {
        private let deadline: ContinuousClock.Instant
        private var pollsLeft: Int

        init(seconds: Double) {
            deadline = .now + .seconds(seconds)
            pollsLeft = Int(seconds * 500)
        }

        var isOver: Bool { pollsLeft <= 0 && ContinuousClock.now > deadline }

        mutating func poll() async throws {
            pollsLeft -= 1
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// A response as it came out of the channel.
    struct Response {
        let status: Int
        /// Header names lowercased.
        let headers: [String: String]
        let body: [UInt8]
        var json: JSON? { try? JSON.parse(body) }
    }

    /// One connection of a fresh node.
    final class Connection: Sendable {
        let channel: NIOAsyncTestingChannel
        let node: Node
        let dir: TempDataDir
        /// Bytes written by the server and not yet parsed into a response.
        private let pending = Mutex<[UInt8]>([])

        init(maxRequestSize: Int = 64 << 20, idleTimeout: TimeAmount? = .seconds(60)) async throws {
            dir = TempDataDir()
            node = try Node(configuration: ServerConfiguration(dataDirectory: dir.path, port: 0, maxRequestSize: maxRequestSize))
            let exchange = HTTPExchange(responder: CouchResponder(node: node), logger: .init(label: "test"), serverName: "Settee")
            channel = NIOAsyncTestingChannel()
            let setup = SetteeHTTP1Channel(exchange: exchange, idleTimeout: idleTimeout)
            let channel = self.channel
            _ = try await channel.eventLoop.flatSubmit { setup.setup(channel: channel, logger: .init(label: "test")) }.get()
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 5984)).get()
        }

        deinit { node.closeAll() }

        func send(_ text: String) async throws {
            try await channel.writeInbound(ByteBuffer(string: text))
        }

        static func request(_ method: String, _ path: String, body: String? = nil, headers: [String] = [],
                            version: String = "HTTP/1.1") -> String {
            var text = "\(method) \(path) \(version)\r\nHost: x\r\n"
            for header in headers { text += header + "\r\n" }
            if let body { return text + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body }
            return text + "\r\n"
        }

        /// The next `count` responses, running the loop until they are out (or the wait runs out: then fewer).
        func responses(_ count: Int, within seconds: Double = 20) async throws -> [Response] {
            var responses: [Response] = []
            var wait = Wait(seconds: seconds)
            while true {
                await channel.testingEventLoop.run()
                while let data = try await channel.readOutbound(as: IOData.self) {
                    guard case .byteBuffer(let buffer) = data else { Issue.record("a file region"); continue }
                    pending.withLock { $0 += Array(buffer.readableBytesView) }
                }
                let closed = !channel.isActive
                while responses.count < count, let next = pending.withLock({ Self.parse(&$0, closed: closed) }) {
                    responses.append(next)
                }
                if responses.count >= count || wait.isOver { return responses }
                try await wait.poll()
            }
        }

        func response(within seconds: Double = 20) async throws -> Response {
            try #require(try await responses(1, within: seconds).first)
        }

        /// Whether the server closed the connection within `seconds` (running the loop meanwhile).
        func closes(within seconds: Double = 20) async throws -> Bool {
            var wait = Wait(seconds: seconds)
            while channel.isActive {
                if wait.isOver { return false }
                await channel.testingEventLoop.run()
                try await wait.poll()
            }
            return true
        }

        /// Everything written and not yet read.
        func unreadBytes() async throws -> [UInt8] {
            await channel.testingEventLoop.run()
            while let data = try await channel.readOutbound(as: IOData.self) {
                if case .byteBuffer(let buffer) = data { pending.withLock { $0 += Array(buffer.readableBytesView) } }
            }
            return pending.withLock { $0 }
        }

        /// Takes one complete response off the front of `bytes`: `Content-Length`, chunked, or (once `closed`)
        /// ended by the close.
        static func parse(_ bytes: inout [UInt8], closed: Bool) -> Response? {
            let separator = Array("\r\n\r\n".utf8)
            guard let end = bytes.indices.dropLast(3).first(where: { Array(bytes[$0..<$0 + 4]) == separator }) else { return nil }
            let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
            let statusLine = lines[0].split(separator: " ")
            guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            var at = end + 4
            var body: [UInt8] = []
            if status / 100 == 1 || status == 204 || status == 304 {
                // No body.
            } else if let length = headers["content-length"].flatMap({ Int($0) }) {
                guard bytes.count >= at + length else { return nil }
                body = Array(bytes[at..<at + length])
                at += length
            } else if headers["transfer-encoding"] == "chunked" {
                while true {
                    guard let lineEnd = bytes[at...].indices.dropLast().first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
                          let size = Int(String(decoding: bytes[at..<lineEnd], as: UTF8.self), radix: 16) else { return nil }
                    let dataStart = lineEnd + 2
                    guard bytes.count >= dataStart + size + 2 else { return nil }
                    body += bytes[dataStart..<dataStart + size]
                    at = dataStart + size + 2
                    if size == 0 { break }
                }
            } else {
                guard closed else { return nil }
                body = Array(bytes[at...])
                at = bytes.count
            }
            bytes.removeFirst(at)
            return Response(status: status, headers: headers, body: body)
        }
    }

    // MARK: Pipelining

    /// Requests in one inbound buffer are answered one at a time, in order (a write among them included), and
    /// the connection stays open.
    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        let conn = try await Connection()
        try await conn.send(Connection.request("PUT", "/db"))
        #expect(try await conn.response().status == 201)
        try await conn.send(Connection.request("PUT", "/db/a", body: #"{"n":1}"#)
                            + Connection.request("GET", "/db/a")
                            + Connection.request("GET", "/db/missing")
                            + Connection.request("PUT", "/db/b", body: #"{"n":2}"#)
                            + Connection.request("GET", "/db/b"))
        let answers = try await conn.responses(5)
        try #require(answers.count == 5)
        #expect(answers[0].status == 201 && answers[0].json?["id"]?.stringValue == "a")
        #expect(answers[1].status == 200 && answers[1].json?["_id"]?.stringValue == "a")
        #expect(answers[2].status == 404 && answers[2].json?["error"]?.stringValue == "not_found")
        #expect(answers[3].status == 201)
        #expect(answers[4].status == 200 && answers[4].json?["n"]?.intValue == 2)
        #expect(answers.allSatisfy { $0.headers["connection"] == nil })
        #expect(conn.channel.isActive)
        // Nothing more was written than the five responses.
        #expect(try await conn.unreadBytes().isEmpty)
    }

    // MARK: Half-close

    /// A client that half-closes while its request runs gets the whole response; then the connection closes. One that half-closes while idle is closed at once.
    @Test func halfCloseLetsTheRunningResponseFinishThenCloses() async throws {
        let conn = try await Connection()
        try await conn.send(Connection.request("PUT", "/db"))
        #expect(try await conn.response().status == 201)
        // A longpoll holds its response for a second: the half-close certainly arrives while it runs.
        try await conn.send(Connection.request("GET", "/db/_changes?feed=longpoll&since=now&timeout=1000"))
        let channel = conn.channel
        try await channel.testingEventLoop.executeInContext { channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        #expect(channel.isActive)
        let feed = try await conn.response()
        #expect(feed.status == 200 && feed.json?["results"] != nil)
        // (The feed's head went out when its wait began, before the half-close: it couldn't say `close`.)
        #expect(try await conn.closes())

        let idle = try await Connection()
        let idleChannel = idle.channel
        try await idleChannel.testingEventLoop.executeInContext {
            idleChannel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
        #expect(try await idle.closes(within: 1))
        #expect(try await idle.unreadBytes().isEmpty)
    }

    // MARK: 413

    /// A body over the request limit, declared or chunked, gets CouchDB's 413 and the connection serves the next
    /// request; the database is untouched.
    @Test func oversizedBodiesGet413() async throws {
        let conn = try await Connection(maxRequestSize: 2000)
        try await conn.send(Connection.request("PUT", "/db"))
        #expect(try await conn.response().status == 201)
        let doc = #"{"docs":[{"_id":"big","pad":"\#(String(repeating: "x", count: 5000))"}]}"#
        try await conn.send(Connection.request("POST", "/db/_bulk_docs", body: doc))
        let declared = try await conn.response()
        #expect(declared.status == 413)
        #expect(declared.json?["error"]?.stringValue == "too_large")
        #expect(declared.headers["content-type"]?.hasPrefix("application/json") == true)

        var chunked = "POST /db/_bulk_docs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        for piece in stride(from: 0, to: doc.utf8.count, by: 700) {
            let bytes = Array(doc.utf8)[piece..<min(piece + 700, doc.utf8.count)]
            chunked += String(bytes.count, radix: 16) + "\r\n" + String(decoding: bytes, as: UTF8.self) + "\r\n"
        }
        try await conn.send(chunked + "0\r\n\r\n")
        let streamed = try await conn.response()
        #expect(streamed.status == 413 && streamed.json?["error"]?.stringValue == "too_large")

        try await conn.send(Connection.request("GET", "/db"))
        let info = try await conn.response()
        #expect(info.status == 200 && info.json?["doc_count"]?.intValue == 0)
        try await conn.send(Connection.request("POST", "/db/_bulk_docs", body: #"{"docs":[{"_id":"small"}]}"#))
        #expect(try await conn.response().status == 201)
    }

    // MARK: Idle timeout

    /// With the loop's clock moved by hand: an idle connection closes once the timeout passes, not before; so
    /// does one stalled mid-request; a pending response is not idleness.
    @Test func idleConnectionsCloseAfterTheTimeout() async throws {
        let idle = try await Connection(idleTimeout: .seconds(5))
        await idle.channel.testingEventLoop.advanceTime(by: .seconds(4))
        #expect(idle.channel.isActive)
        await idle.channel.testingEventLoop.advanceTime(by: .seconds(1))
        #expect(try await idle.closes(within: 1))

        let stalled = try await Connection(idleTimeout: .seconds(5))
        await stalled.channel.testingEventLoop.advanceTime(by: .seconds(3))
        try await stalled.send("PUT /db HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{\"a")
        // The part that arrived at 3 s moves the deadline to 8 s (the timer fires at 5 s and re-arms).
        await stalled.channel.testingEventLoop.advanceTime(by: .seconds(4))
        #expect(stalled.channel.isActive)
        await stalled.channel.testingEventLoop.advanceTime(by: .seconds(1))
        #expect(try await stalled.closes(within: 1))
        #expect(try await stalled.unreadBytes().isEmpty)

        let busy = try await Connection(idleTimeout: .seconds(5))
        try await busy.send(Connection.request("PUT", "/db"))
        #expect(try await busy.response().status == 201)
        try await busy.send(Connection.request("GET", "/db/_changes?feed=longpoll&since=now&timeout=1000"))
        await busy.channel.testingEventLoop.advanceTime(by: .seconds(60))
        #expect(busy.channel.isActive)
        #expect(try await busy.response().status == 200)
        #expect(busy.channel.isActive)
        await busy.channel.testingEventLoop.advanceTime(by: .seconds(5))
        #expect(try await busy.closes(within: 1))
    }

    // MARK: HTTP/1.0

    @Test func http10ClosesAfterTheResponseUnlessKeepAlive() async throws {
        let old = try await Connection()
        try await old.send("GET / HTTP/1.0\r\n\r\n")
        let welcome = try await old.response()
        #expect(welcome.status == 200 && welcome.json?["couchdb"]?.stringValue == "Welcome")
        #expect(welcome.headers["connection"] == "close")
        #expect(try await old.closes())

        let kept = try await Connection()
        for _ in 0..<2 {
            try await kept.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            let response = try await kept.response()
            #expect(response.status == 200)
            #expect(response.headers["connection"]?.lowercased() == "keep-alive")
            #expect(kept.channel.isActive)
        }
        // A feed of unknown length to HTTP/1.0 is sent unframed and ended by the close.
        try await kept.send("PUT /db HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        #expect(try await kept.response().status == 201)
        try await kept.send("GET /db/_changes?feed=continuous&since=0&timeout=100 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        #expect(try await kept.closes())
        let unframed = try await kept.response()
        #expect(unframed.status == 200 && unframed.headers["transfer-encoding"] == nil)
        #expect(String(decoding: unframed.body, as: UTF8.self).contains(#""last_seq":"#))
    }

    // MARK: Malformed requests

    @Test func malformedRequestGets400AndTheConnectionCloses() async throws {
        let conn = try await Connection()
        try await conn.send("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
        let response = try await conn.response()
        #expect(response.status == 400)
        #expect(response.headers["connection"] == "close")
        #expect(try await conn.closes())
    }

    /// `Expect: 100-continue` is answered before the body is sent; the request then runs as usual.
    @Test func expectContinueIsAnsweredFirst() async throws {
        let conn = try await Connection()
        try await conn.send(Connection.request("PUT", "/db"))
        #expect(try await conn.response().status == 201)
        try await conn.send("PUT /db/doc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\nExpect: 100-continue\r\n\r\n")
        let interim = try await conn.response()
        #expect(interim.status == 100)
        try await conn.send(#"{"n":1}"#)
        #expect(try await conn.response().status == 201)
    }
}
