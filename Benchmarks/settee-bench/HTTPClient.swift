// A minimal blocking HTTP/1.1 keep-alive client over POSIX sockets, for the HTTP workloads.
//
// One `HTTPConnection` per thread; no locking inside. It speaks just enough HTTP/1.1 for the benchmark:
// a request line, a few headers and an optional body out; a status line, headers and a body framed by
// Content-Length or chunked transfer-encoding in. It reconnects when the server closes the connection
// (after `Connection: close`, or an idle close) and counts the reconnections.
import Glibc

struct HTTPClientError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

struct HTTPResponse {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

final class HTTPConnection: @unchecked Sendable {
    let host: String
    let port: UInt16
    private var fd: Int32 = -1
    /// Read buffer: bytes `[readStart, readEnd)` are received and not yet consumed.
    private var buffer: UnsafeMutableRawBufferPointer
    private var readStart = 0
    private var readEnd = 0
    private(set) var reconnects = 0
    private var hostHeader: [UInt8]
    /// An `Authorization` header value sent with every request (nil: none).
    var authorization: String? {
        didSet { authorizationHeader = authorization.map { Array("Authorization: \($0)\r\n".utf8) } ?? [] }
    }
    private var authorizationHeader: [UInt8] = []

    init(host: String = "127.0.0.1", port: Int, bufferSize: Int = 256 << 10) throws {
        guard let p = UInt16(exactly: port) else { throw HTTPClientError(message: "bad port \(port)") }
        self.host = host
        self.port = p
        buffer = .allocate(byteCount: bufferSize, alignment: 16)
        hostHeader = Array("Host: \(host):\(port)\r\n".utf8)
        try connectSocket()
    }

    deinit {
        if fd >= 0 { Glibc.close(fd) }
        buffer.deallocate()
    }

    private func connectSocket() throws {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
        readStart = 0
        readEnd = 0
        let s = try connectTCP(host: host, port: port)
        fd = s
    }

    func disconnect() {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }

    /// The bytes of a request (request line, Host, Content-Length/Type, blank line, body): prebuild them
    /// with this to keep request formatting out of a timed loop.
    func encodeRequest(method: String, path: String, body: [UInt8]? = nil,
                       contentType: String = "application/json") -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128 + (body?.count ?? 0))
        out.append(contentsOf: "\(method) \(path) HTTP/1.1\r\n".utf8)
        out.append(contentsOf: hostHeader)
        out.append(contentsOf: authorizationHeader)
        out.append(contentsOf: "Accept: application/json\r\n".utf8)
        if let body {
            out.append(contentsOf: "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
            out.append(contentsOf: body)
        } else {
            out.append(contentsOf: "\r\n".utf8)
        }
        return out
    }

    func request(method: String, path: String, body: [UInt8]? = nil) throws -> HTTPResponse {
        try send(encodeRequest(method: method, path: path, body: body))
    }

    /// Sends prebuilt request bytes and reads the response. If the connection turns out to be closed before
    /// any response byte arrives (a keep-alive connection the server dropped), reconnects once and retries.
    func send(_ request: [UInt8], discardBody: Bool = false) throws -> HTTPResponse {
        if fd < 0 { try connectSocket(); reconnects += 1 }
        do {
            try writeAll(request)
            return try readResponse(discardBody: discardBody)
        } catch let e as Closed where e.beforeResponse {
            try connectSocket()
            reconnects += 1
            try writeAll(request)
            return try readResponse(discardBody: discardBody)
        }
    }

    private struct Closed: Error { let beforeResponse: Bool }

    private func writeAll(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EPIPE || errno == ECONNRESET { throw Closed(beforeResponse: true) }
                    throw HTTPClientError(message: "send(): \(String(cString: strerror(errno)))")
                }
                sent += n
            }
        }
    }

    /// Receives more bytes into the buffer (compacting or growing it first); returns false at EOF.
    private func fill() throws -> Bool {
        if readStart > 0 && readStart == readEnd { readStart = 0; readEnd = 0 }
        if readEnd == buffer.count {
            if readStart > 0 {
                let n = readEnd - readStart
                buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + readStart, byteCount: n)
                readStart = 0
                readEnd = n
            } else {
                let bigger = UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count * 2, alignment: 16)
                bigger.baseAddress!.copyMemory(from: buffer.baseAddress!, byteCount: readEnd)
                buffer.deallocate()
                buffer = bigger
            }
        }
        while true {
            let n = recv(fd, buffer.baseAddress! + readEnd, buffer.count - readEnd, 0)
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ECONNRESET { return false }
                throw HTTPClientError(message: "recv(): \(String(cString: strerror(errno)))")
            }
            readEnd += n
            return n > 0
        }
    }

    /// Index of the first CRLF at or after `from` within the unconsumed bytes, or nil.
    private func findCRLF(from: Int) -> Int? {
        var i = from
        while i + 1 < readEnd {
            if buffer[i] == 13 && buffer[i + 1] == 10 { return i }
            i += 1
        }
        return nil
    }

    /// Reads one CRLF-terminated line and consumes it (CRLF excluded from the result).
    private func readLine(firstLine: Bool = false) throws -> String {
        while true {
            if let end = findCRLF(from: readStart) {
                let line = String(decoding: UnsafeRawBufferPointer(rebasing: buffer[readStart..<end]), as: UTF8.self)
                readStart = end + 2
                return line
            }
            let wasEmpty = readStart == readEnd
            guard try fill() else {
                if firstLine && wasEmpty { throw Closed(beforeResponse: true) }
                throw HTTPClientError(message: "connection closed mid-response")
            }
        }
    }

    /// Consumes exactly `n` bytes (appending them to `out` unless discarding).
    private func readBytes(_ n: Int, into out: inout [UInt8], discard: Bool) throws {
        var remaining = n
        while remaining > 0 {
            if readStart == readEnd {
                guard try fill() else { throw HTTPClientError(message: "connection closed mid-body") }
            }
            let take = min(remaining, readEnd - readStart)
            if !discard {
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[readStart..<(readStart + take)]))
            }
            readStart += take
            remaining -= take
        }
    }

    private func readResponse(discardBody: Bool) throws -> HTTPResponse {
        let statusLine = try readLine(firstLine: true)
        // "HTTP/1.1 200 OK"
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw HTTPClientError(message: "bad status line: \(statusLine)")
        }
        var headers: [(name: String, value: String)] = []
        var contentLength: Int?
        var chunked = false
        var closeAfter = parts[0] == "HTTP/1.0"
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { throw HTTPClientError(message: "bad header: \(line)") }
            let name = String(line[..<colon])
            let value = trimmed(line[line.index(after: colon)...])
            headers.append((name, value))
            switch name.lowercased() {
            case "content-length":
                guard let n = Int(value), n >= 0 else { throw HTTPClientError(message: "bad Content-Length: \(value)") }
                contentLength = n
            case "transfer-encoding":
                chunked = value.lowercased().contains("chunked")
            case "connection":
                let v = value.lowercased()
                if v.contains("close") { closeAfter = true } else if v.contains("keep-alive") { closeAfter = false }
            default: break
            }
        }
        var body: [UInt8] = []
        if chunked {
            while true {
                let sizeLine = try readLine()
                let hex = trimmed(sizeLine.prefix { $0 != ";" })
                guard let size = Int(hex, radix: 16), size >= 0 else {
                    throw HTTPClientError(message: "bad chunk size: \(sizeLine)")
                }
                if size == 0 {
                    while try !readLine().isEmpty {}  // trailers
                    break
                }
                if !discardBody { body.reserveCapacity(body.count + size) }
                try readBytes(size, into: &body, discard: discardBody)
                guard try readLine().isEmpty else { throw HTTPClientError(message: "missing CRLF after chunk") }
            }
        } else if let contentLength {
            if !discardBody { body.reserveCapacity(contentLength) }
            try readBytes(contentLength, into: &body, discard: discardBody)
        } else if status != 204 && status != 304 && !(100..<200).contains(status) {
            // No framing: the body runs to the end of the connection.
            while true {
                if readStart < readEnd {
                    try readBytes(readEnd - readStart, into: &body, discard: discardBody)
                }
                guard try fill() else { break }
            }
            closeAfter = true
        }
        if closeAfter { disconnect() }
        return HTTPResponse(status: status, headers: headers, body: body)
    }
}

/// Drops leading and trailing spaces and tabs.
private func trimmed(_ s: Substring) -> String {
    var s = s
    while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
    while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
    return String(s)
}

/// A blocking TCP socket connected to an IPv4 `host:port`, with TCP_NODELAY.
func connectTCP(host: String, port: UInt16) throws -> Int32 {
    let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard s >= 0 else { throw HTTPClientError(message: "socket(): \(String(cString: strerror(errno)))") }
    var one: Int32 = 1
    setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(port).bigEndian
    guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else {
        Glibc.close(s)
        throw HTTPClientError(message: "bad IPv4 address \(host)")
    }
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard rc == 0 else {
        let message = String(cString: strerror(errno))
        Glibc.close(s)
        throw HTTPClientError(message: "connect(\(host):\(port)): \(message)")
    }
    return s
}
