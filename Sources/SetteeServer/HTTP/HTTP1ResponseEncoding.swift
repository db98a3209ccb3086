import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import Synchronization

/// What the request's task hands its connection: buffers ready for the wire — the first holds the whole head and,
/// for a response of known length, its body too — and whether the response ends here.
struct ResponseOutput {
    var first: ByteBuffer?
    /// Further buffers (a large body, chunk framing); empty for an ordinary response.
    var more: [ByteBuffer] = []
    var ends = false
    /// The head said `Connection: close`: the connection closes after this response.
    var closes = false
}

/// Writes a response from the request's task: a body of known length has its first buffer held back, so a body
/// of one buffer goes out in the same buffer as its head, in one hop to the event loop, not awaited (the
/// connection reads its next request once the end is written); other writes — a streamed feed from its first
/// line — go out as they come, each awaited.
struct ChannelResponseWriter: ResponseBodyWriter, Sendable {
    let connection: NIOLoopBound<(HTTP1ConnectionHandler, ChannelHandlerContext)>
    let channel: any Channel
    let tasks: ConnectionTasks
    let clientAddress: String
    let framing: ResponseEncoding.RequestFraming
    /// The encoded status line and header fields, until they are sent.
    var head: ByteBuffer?
    var held: ByteBuffer?
    var holdFirst = true
    /// How the body goes on the wire (decided when the head is encoded).
    var body = ResponseEncoding.BodyFraming.none
    var mustClose = false

    /// A body up to this size is copied into the head's buffer (one buffer, one iovec); a larger one follows it.
    static let inlineBodyLimit = 16 * 1024

    init(connection: NIOLoopBound<(HTTP1ConnectionHandler, ChannelHandlerContext)>, tasks: ConnectionTasks,
                     clientAddress: String, framing: ResponseEncoding.RequestFraming) {
        self.connection = connection
        self.channel = connection.value.1.channel
        self.tasks = tasks
        self.clientAddress = clientAddress
        self.framing = framing
    }

    /// Encodes the response's status line and headers, and decides the body's framing.
    mutating func encodeHead(_ response: HTTPResponse) {
        var buffer = channel.allocator.buffer(capacity: 512)
        let encoded = ResponseEncoding.head(response, request: framing, into: &buffer)
        head = buffer
        body = encoded.body
        mustClose = encoded.mustClose
    }

    mutating func write(_ buffer: ByteBuffer) async throws {
        if holdFirst && head != nil && held == nil {
            held = buffer
            return
        }
        var output = takeStart()
        frame(buffer, into: &output)
        let promise = channel.eventLoop.makePromise(of: Void.self)
        send(output, promise: promise)
        try await promise.futureResult.get()
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        var output = takeStart()
        if body == .chunked {
            var last = channel.allocator.buffer(capacity: 8)
            last.writeStaticString("0\r\n")
            if let trailingHeaders { ResponseEncoding.writeFields(trailingHeaders, into: &last) }
            last.writeStaticString("\r\n")
            output.append(last)
        }
        output.ends = true
        send(output, promise: nil)
    }

    /// The head, ended here, and the held first buffer, if not sent yet.
    private mutating func takeStart() -> ResponseOutput {
        var output = ResponseOutput()
        guard var start = head else { return output }
        // The connection closes after this response if the request asked, the body is delimited by the close, or
        // the connection is shutting down (if that happens only after this, it still closes after the response).
        let closes = !framing.keepAlive || mustClose || tasks.closing
        if closes {
            start.writeStaticString("Connection: close\r\n\r\n")
        } else if !framing.http11 {
            start.writeStaticString("Connection: keep-alive\r\n\r\n")
        } else {
            start.writeStaticString("\r\n")
        }
        output.closes = closes
        if var held, body == .raw, held.readableBytes <= Self.inlineBodyLimit {
            start.writeBuffer(&held)
            self.held = nil
        }
        output.first = start
        if let held { frame(held, into: &output) }
        head = nil
        held = nil
        return output
    }

    /// A body buffer as it goes on the wire: as is, inside a chunk, or nothing (HEAD, 204, 304).
    private func frame(_ buffer: ByteBuffer, into output: inout ResponseOutput) {
        switch body {
        case .none:
            return
        case .raw:
            output.append(buffer)
        case .chunked:
            // An empty chunk would end the body: skip it.
            guard buffer.readableBytes > 0 else { return }
            var size = channel.allocator.buffer(capacity: 12)
            ResponseEncoding.writeHex(buffer.readableBytes, into: &size)
            size.writeStaticString("\r\n")
            output.append(size)
            output.append(buffer)
            output.append(ResponseEncoding.crlf)
        }
    }

    private func send(_ output: ResponseOutput, promise: EventLoopPromise<Void>?) {
        let connection = self.connection
        channel.eventLoop.execute {
            let (handler, context) = connection.value
            handler.write(output, context: context, promise: promise)
        }
    }
}

extension ResponseOutput {
    mutating func append(_ buffer: ByteBuffer) {
        if first == nil { first = buffer } else { more.append(buffer) }
    }
}

/// HTTP/1.1 response heads, encoded straight into a buffer with NIO's framing rules: no body for 1xx, 204 and 304
/// (their `content-length`/`transfer-encoding` removed) nor for a HEAD request (its headers kept, as a GET would
/// have them); a declared `content-length` sends the body as is; otherwise an HTTP/1.1 request gets
/// `transfer-encoding: chunked` and an HTTP/1.0 one an unframed body ended by closing the connection. The
/// `connection` header is the writer's (``ChannelResponseWriter``), which ends the header block with it.
enum ResponseEncoding {
    struct RequestFraming: Sendable {
        let isHead: Bool
        let http11: Bool
        let keepAlive: Bool

        init(method: HTTPMethod, http11: Bool, keepAlive: Bool) {
            self.isHead = method == .HEAD
            self.http11 = http11
            self.keepAlive = keepAlive
        }
    }

    enum BodyFraming: Sendable {
        /// No body bytes go on the wire.
        case none
        /// Bytes as they are (a declared length, or HTTP/1.0 ended by the close).
        case raw
        case chunked
    }

    static let crlf: ByteBuffer = {
        var b = ByteBuffer()
        b.writeStaticString("\r\n")
        return b
    }()

    /// Writes the status line and header fields (without the blank line that ends them).
    static func head(_ response: HTTPResponse, request: RequestFraming, into buffer: inout ByteBuffer)
        -> (body: BodyFraming, mustClose: Bool) {
        let code = response.status.code
        buffer.writeStaticString("HTTP/1.1 ")
        buffer.writeString(String(code))
        buffer.writeInteger(UInt8(ascii: " "))
        buffer.writeString(response.status.reasonPhrase)
        buffer.writeStaticString("\r\n")
        let statusAllowsBody = !((100..<200).contains(code) || code == 204 || code == 304)
        var hasLength = false
        for field in response.headerFields {
            switch field.name {
            case .connection where code == 101:
                // A protocol switch (`_blipsync`'s WebSocket) says `Connection: Upgrade`; otherwise the
                // connection's framing decides this field.
                writeField(field, into: &buffer)
            case .connection, .transferEncoding:
                continue
            case .contentLength:
                // A 304 may say `Content-Length: 0` (CouchDB's answer does; it frames nothing either way).
                guard statusAllowsBody || (code == 304 && field.value == "0") else { continue }
                hasLength = statusAllowsBody
                writeField(field, into: &buffer)
            default:
                writeField(field, into: &buffer)
            }
        }
        let chunked = statusAllowsBody && !hasLength && request.http11
        if chunked { buffer.writeStaticString("Transfer-Encoding: chunked\r\n") }
        if request.isHead || !statusAllowsBody { return (.none, false) }
        if hasLength { return (.raw, false) }
        return chunked ? (.chunked, false) : (.raw, true)
    }

    /// Header fields as `name: value` lines (also the trailer of a chunked body).
    static func writeFields(_ fields: HTTPFields, into buffer: inout ByteBuffer) {
        for field in fields { writeField(field, into: &buffer) }
    }

    @inline(__always)
    private static func writeField(_ field: HTTPField, into buffer: inout ByteBuffer) {
        buffer.writeString(field.name.rawName)
        buffer.writeStaticString(": ")
        buffer.writeString(field.value)
        buffer.writeStaticString("\r\n")
    }

    static func writeHex(_ n: Int, into buffer: inout ByteBuffer) {
        precondition(n >= 0)
        var shift = 60
        while shift > 0 && (n >> shift) & 0xf == 0 { shift -= 4 }
        while shift >= 0 {
            let digit = UInt8((n >> shift) & 0xf)
            buffer.writeInteger(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10)
            shift -= 4
        }
    }
}

/// The `Date` header's value (RFC 9110 IMF-fixdate), formatted once per second.
final class HTTPDateCache: Sendable {
    private let cached = Mutex<(second: Int, text: String)>((-1, ""))

    func now() -> String {
        let second = Int(Date().timeIntervalSince1970)
        return cached.withLock { entry in
            if entry.second != second { entry = (second, Self.format(second)) }
            return entry.text
        }
    }

    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func format(_ second: Int) -> String {
        var t = time_t(second)
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(days[Int(tm.tm_wday)]), \(two(tm.tm_mday)) \(months[Int(tm.tm_mon)]) \(tm.tm_year + 1900) "
            + "\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)) GMT"
    }
}
