import Foundation
import SetteeCore
import SetteeTestSupport
import Testing

/// A keep-alive HTTP/1.1 connection over a raw POSIX socket: sends bytes exactly as given (malformed requests
/// included) and reads one response (Content-Length or chunked).
final class RawHTTPConnection {
    private var fd: Int32 = -1
    private var buffer: [UInt8] = []
    let port: Int

    init(port: Int) throws {
        self.port = port
        try connect()
    }

    deinit { if fd >= 0 { close(fd) } }

    func connect() throws {
        if fd >= 0 { close(fd) }
        buffer = []
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw ServerProcessError(message: "connect failed: \(errno)") }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw ServerProcessError(message: "send failed: \(errno)") }
            sent += n
        }
    }

    /// How long a read waits for the server's next bytes (20 s unless set).
    func setReceiveTimeout(seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Half-closes the connection: the server sees end of input, this side can still read.
    func shutdownWrite() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// Whether the server closed the connection (end of input within `seconds`, nothing unread).
    func closedByServer(within seconds: Int = 10) -> Bool {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var byte: UInt8 = 0
        return buffer.isEmpty && recv(fd, &byte, 1, 0) == 0
    }

    /// Everything the server sends until it closes the connection (a body delimited by the close).
    func readUntilClosed(within seconds: Int = 10) throws -> [UInt8] {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while try fill() {}
        defer { buffer = [] }
        return buffer
    }

    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { return false }
        buffer += chunk[..<n]
        return true
    }

    /// The status, headers (lowercased names) and body of the next response; nil when the server closed the
    /// connection first.
    func readResponse(expectBody: Bool = true) throws -> (status: Int, headers: [String: String], body: [UInt8])? {
        let crlf2: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int?
        while headerEnd == nil {
            if let i = find(crlf2, from: 0) { headerEnd = i; break }
            guard try fill() else { return nil }
        }
        let head = String(decoding: buffer[..<headerEnd!], as: UTF8.self)
        buffer.removeFirst(headerEnd! + 4)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw ServerProcessError(message: "bad status line: \(head.prefix(100))")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body: [UInt8] = []
        if !expectBody || status == 204 || status == 304 {
            return (status, headers, body)
        }
        if let length = headers["content-length"].flatMap(Int.init) {
            while buffer.count < length { guard try fill() else { return nil } }
            body = Array(buffer[..<length])
            buffer.removeFirst(length)
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            while true {
                var lineEnd: Int?
                while lineEnd == nil {
                    lineEnd = find([13, 10], from: 0)
                    if lineEnd == nil { guard try fill() else { return nil } }
                }
                let sizeText = String(decoding: buffer[..<lineEnd!], as: UTF8.self).split(separator: ";").first ?? ""
                let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) ?? 0
                buffer.removeFirst(lineEnd! + 2)
                while buffer.count < size + 2 { guard try fill() else { return nil } }
                body += buffer[..<size]
                buffer.removeFirst(size + 2)
                if size == 0 { break }
            }
        }
        return (status, headers, body)
    }

    private func find(_ pattern: [UInt8], from start: Int) -> Int? {
        guard buffer.count >= pattern.count else { return nil }
        var i = start
        while i <= buffer.count - pattern.count {
            if buffer[i] == pattern[0] && Array(buffer[i..<(i + pattern.count)]) == pattern { return i }
            i += 1
        }
        return nil
    }
}

/// Randomized malformed requests, reproducible from a seed.
struct HostileRequests {
    var rng: SeededGenerator

    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &rng)] }

    static let segments = ["db", "soak", "_all_docs", "_bulk_docs", "_bulk_get", "_revs_diff", "_changes", "_local", "_design",
                           "_view", "_query", "_index", "_security", "_compact", "_purge", "_revs_limit", "_session", "_users",
                           "_all_dbs", "_uuids", "control", "doc", "org.couchdb.user:x", "%00", "..", "%2e%2e", "%2F", "%",
                           "%zz", "a%00b", "_", "__", "_nope", "UPPER", "db.scope.coll", "db..x", "x.y.z.w", "😀",
                           "%F0%9F%98", String(repeating: "a", count: 300), "att.bin", "_replicator", "_scheduler", "jobs",
                           "_metrics", "_active_tasks", "_utils", "_design_docs", "_info", "_explain", "_find"]
    static let queries = ["", "?rev=garbage", "?rev=1-", "?rev=0-abc", "?revs=maybe", "?limit=-1", "?limit=abc",
                          "?skip=-5", "?since=abc", "?since=%00", "?open_revs=[bad", "?open_revs=all", "?open_revs=[\"1-x\"]",
                          "?keys=[", "?keys=%5B1%2C2", "?key=%7B", "?startkey=[", "?descending=yes", "?include_docs=2",
                          "?new_edits=nope", "?conflicts=true&revs_info=true", "?feed=bogus", "?style=weird",
                          "?atts_since=[1]", "?count=100000", "?count=-1", "?heartbeat=-1", "?timeout=abc",
                          "?group_level=-2", "?reduce=maybe", "?batch=ok", "?latest=x", "?filter=_doc_ids",
                          "?filter=nope/nope", "?%zz=1", "?a=%", "?stale=ok", "?update=wat", "?explain=true"]
    static let bodies = ["", "{", "}", "[", "nul", "null", "true", "1e999999", "-", "\"unterminated", "{\"a\":}",
                         "{\"_id\":5}", "{\"_id\":\"\"}", "{\"_id\":\"_bad\"}", "{\"_rev\":\"x\"}", "{\"_rev\":5}",
                         "{\"docs\":5}", "{\"docs\":[5,\"x\",null,{\"_id\":{}}]}", "{\"docs\":[{\"_revisions\":{\"start\":-1,\"ids\":[]}}]}",
                         "{\"_revisions\":{\"start\":2,\"ids\":[\"a\",\"b\",\"c\"]}}", "{\"_attachments\":{\"a\":{\"data\":\"!!!\"}}}",
                         "{\"_attachments\":{\"a\":{\"stub\":true}}}", "{\"_attachments\":5}", "{\"_deleted\":\"yes\"}",
                         "{\"query\":\"SELECT\"}", "{\"query\":\"SELECT * FROM _ WHERE\"}", "{\"query\":5}",
                         "{\"query\":\"SELECT MATCH(nope, 'x') FROM _\"}", "{\"selector\":5}", "{\"keys\":\"x\"}",
                         "{\"index\":{\"fields\":5}}", "{\"type\":\"vector\"}", "{\"members\":[]}", "{\"admins\":{\"names\":\"x\"}}",
                         "{\"name\":5,\"password\":[]}", "\u{0}\u{1}\u{2}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\u00zz\"}",
                         String(repeating: "[", count: 5000), String(repeating: "{\"a\":", count: 3000),
                         "{\"a\":" + String(repeating: "9", count: 5000) + "}", "{\"docs\":[" + String(repeating: "{},", count: 200) + "{}]}",
                         "{\"source\":\"nowhere\",\"target\":5}", "{\"source\":\"http://127.0.0.1:1/x\",\"target\":\"y\"}",
                         "{\"map\":{\"key\":\"(\"}}", "{\"views\":{\"v\":{\"map\":\"function(doc){emit(1)}\"}}}",
                         "{\"views\":{\"v\":{\"map\":{\"key\":\"a\"},\"reduce\":\"_wat\"}}}", "\u{FEFF}{}", "{\"a\":1}garbage"]
    static let methods = ["GET", "PUT", "POST", "DELETE", "HEAD", "COPY", "OPTIONS", "PATCH"]
    static let contentTypes = ["application/json", "text/plain", "multipart/related; boundary=xyz", "multipart/related",
                               "application/x-www-form-urlencoded", "application/octet-stream", "garbage/;;;", ""]

    /// A well-framed request (correct Content-Length) with malformed content.
    mutating func next(auth: String) -> [UInt8] {
        let method = pick(Self.methods)
        let depth = Int.random(in: 1...4, using: &rng)
        var path = ""
        for _ in 0..<depth { path += "/" + pick(Self.segments) }
        path += pick(Self.queries)
        var body = method == "GET" || method == "HEAD" ? "" : pick(Self.bodies)
        if Int.random(in: 0..<10, using: &rng) == 0 {
            // Random bytes, sometimes invalid UTF-8.
            body = String(decoding: (0..<Int.random(in: 1...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }, as: UTF8.self)
        }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if Int.random(in: 0..<4, using: &rng) != 0 { head += "Authorization: \(auth)\r\n" }
        switch Int.random(in: 0..<12, using: &rng) {
        case 0: head += "Authorization: Basic !!!notbase64\r\n"
        case 1: head += "Authorization: Bearer a.b.c\r\n"
        case 2: head += "Cookie: AuthSession=\(String(repeating: "A", count: 300))\r\n"
        case 3: head += "If-Match: \"garbage\r\n"
        case 4: head += "Accept: multipart/mixed\r\n"
        case 5: head += "X-Junk: \(String(repeating: "x", count: 4000))\r\n"
        default: break
        }
        let ct = pick(Self.contentTypes)
        if !ct.isEmpty { head += "Content-Type: \(ct)\r\n" }
        let bytes = Array(body.utf8)
        head += "Content-Length: \(bytes.count)\r\n\r\n"
        return Array(head.utf8) + bytes
    }
}

@Suite("Hostile input soak") struct HostileInputSoakTests {
    /// ≥ 10,000 randomized malformed requests against a live node: no 5xx, no crash, no dropped connection, and a
    /// control document unchanged.
    @Test func tenThousandMalformedRequests() async throws {
        try await offThePool { try Self.soak() }
    }

    static func soak() throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let auth = "Basic " + Base64.encode(Array("admin:secret".utf8))
        let conn = try RawHTTPConnection(port: server.port)
        func request(_ raw: String) throws -> (status: Int, headers: [String: String], body: [UInt8]) {
            try conn.send(Array(raw.utf8))
            return try #require(try conn.readResponse())
        }
        let setup = #"{"v":"control","n":[1,2,3]}"#
        #expect(try request("PUT /db HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\nContent-Length: 0\r\n\r\n").status == 201)
        // The control document lives in a database the random paths never name (they may legitimately delete `db`).
        #expect(try request("PUT /ctl HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\nContent-Length: 0\r\n\r\n").status == 201)
        #expect(try request("PUT /soak HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\nContent-Length: 0\r\n\r\n").status == 201)
        let created = try request("PUT /ctl/control HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\nContent-Type: application/json\r\nContent-Length: \(setup.utf8.count)\r\n\r\n\(setup)")
        #expect(created.status == 201)
        let controlBefore = try request("GET /ctl/control HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\n\r\n").body

        var generator = HostileRequests(rng: SeededGenerator(seed: UInt64(ProcessInfo.processInfo.environment["SETTEE_SOAK_SEED"].flatMap(UInt64.init) ?? 20261122)))
        var statuses: [Int: Int] = [:]
        var serverErrors: [String] = []
        var reconnects = 0
        let total = 10_000
        for i in 0..<total {
            let raw = generator.next(auth: auth)
            let isHead = raw.starts(with: Array("HEAD ".utf8))
            try conn.send(raw)
            let response: (status: Int, headers: [String: String], body: [UInt8])?
            // A HEAD response has headers only.
            response = try conn.readResponse(expectBody: !isHead)
            guard let response else {
                Issue.record("connection dropped at request \(i): \(String(decoding: raw.prefix(200), as: UTF8.self))")
                reconnects += 1
                try conn.connect()
                if reconnects > 20 { break }
                continue
            }
            statuses[response.status, default: 0] += 1
            if response.status >= 500 {
                serverErrors.append("\(response.status) for \(String(decoding: raw.prefix(160), as: UTF8.self)) → \(String(decoding: response.body.prefix(200), as: UTF8.self))")
            }
            if response.status >= 400, !response.body.isEmpty, !isHead {
                let json = try? JSON.parse(response.body)
                if json?["error"]?.stringValue == nil || json?["reason"]?.stringValue == nil {
                    serverErrors.append("not CouchDB's error shape (\(response.status)): \(String(decoding: response.body.prefix(200), as: UTF8.self)) for \(String(decoding: raw.prefix(120), as: UTF8.self))")
                }
            }
            if response.headers["connection"]?.lowercased() == "close" { try conn.connect() }
        }
        #expect(serverErrors.isEmpty, "\(serverErrors.count) bad answers, e.g.:\n\(serverErrors.prefix(10).joined(separator: "\n"))")
        #expect(reconnects == 0)
        #expect(statuses.values.reduce(0, +) >= total - reconnects)
        // The server is alive and the control document is byte-for-byte unchanged.
        #expect(server.process.isRunning)
        let fresh = try RawHTTPConnection(port: server.port)
        try fresh.send(Array("GET /ctl/control HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\n\r\n".utf8))
        let after = try #require(try fresh.readResponse())
        #expect(after.status == 200)
        #expect(after.body == controlBefore)
        print("soak: \(total) requests, statuses \(statuses.sorted { $0.key < $1.key })")
    }

    /// Requests broken at the protocol level (request line, headers, framing): each answered with a 4xx or a clean
    /// close, never a 5xx; the node keeps serving.
    @Test func protocolLevelGarbage() async throws {
        try await offThePool { try Self.garbage() }
    }

    static func garbage() throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let garbage: [String] = [
            "GARBAGE\r\n\r\n", "GET\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET / HTTP/1.1\r\nNoColonHeader\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", "GET / HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
            "POST /db HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nxx\r\n0\r\n\r\n",
            "POST /db HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabc",
            "GET /\u{0}/x HTTP/1.1\r\nHost: x\r\n\r\n", "GET /%00 HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "h", count: 200_000))\r\n\r\n",
            "GET /\(String(repeating: "p", count: 100_000)) HTTP/1.1\r\nHost: x\r\n\r\n",
            "\r\n\r\n\r\n", "GET / HTTP/1.1\r\n" + String(repeating: "X-A: b\r\n", count: 5000) + "\r\n",
            "PUT /db HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
        ]
        for raw in garbage {
            let conn = try RawHTTPConnection(port: server.port)
            try? conn.send(Array(raw.utf8))
            if let response = try? conn.readResponse() {
                #expect(response.status < 500, "\(response.status) for \(raw.prefix(80))")
            }
        }
        #expect(server.process.isRunning)
        let conn = try RawHTTPConnection(port: server.port)
        try conn.send(Array("GET /_up HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(try conn.readResponse()?.status == 200)
    }
}
