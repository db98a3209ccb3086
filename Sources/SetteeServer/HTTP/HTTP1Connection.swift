import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import ServiceLifecycle
import Synchronization

/// Settee's plain HTTP/1.1 connections (TLS and HTTP/2 use Hummingbird's channels).
///
/// Hummingbird's `HTTP1Channel` hands every request part from the event loop to a per-connection task through
/// `NIOAsyncChannel`'s buffered async sequences, every response part back the same way, and runs each part
/// through four more channel handlers (HTTP-types conversion, connection state, pipelining, protocol errors);
/// on a small machine that costs several times the request itself. Here NIO's HTTP/1.1 decoder is followed by
/// one handler, ``HTTP1ConnectionHandler``, that assembles each request (head and body, up to the node's request
/// limit) on the event loop and starts one task for it; the task runs ``CouchResponder`` (so SQLite is never
/// touched on the event loop), encodes the response's head itself (``ResponseEncoding``: status line, headers
/// and framing straight into one buffer, no NIO `HTTPHeaders` or response encoder in between) and hands the
/// complete response back in one hop — head and body written and flushed together. Streamed responses
/// (`_changes` feeds) are chunk-framed by the task and write through as they come, each write awaited, so a slow
/// reader holds back its writer.
struct SetteeHTTP1Channel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
        let tasks: ConnectionTasks
    }

    let exchange: HTTPExchange
    let idleTimeout: TimeAmount?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            // NIO's request decoder (its limits are NIO's defaults, 80 KiB of headers, as with Hummingbird's
            // channel); responses are encoded by the request's task (``ResponseEncoding``), not by a NIO encoder.
            try pipeline.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
            let tasks = ConnectionTasks()
            try pipeline.addHandler(HTTP1ConnectionHandler(exchange: exchange, tasks: tasks, idleTimeout: idleTimeout))
            return Value(channel: channel, tasks: tasks)
        }
    }

    /// The connection lives in its channel handler; this task outlives it and its last request (the server
    /// waits for it at shutdown before the databases close), tells the node when graceful shutdown begins (the
    /// requests' own tasks are not the server's children, so this is how open feeds hear of it), and closes the
    /// connection if the server is cancelled.
    func handle(value: Value, logger: Logger) async {
        let channel = value.channel
        let notice = exchange.responder.node.shutdownNotice
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                try? await channel.closeFuture.get()
                await value.tasks.current?.value
            } onGracefulShutdown: {
                notice.raise()
            }
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}

/// Tells a connection, on its event loop, that the route reading a streamed body wants more of it, or stopped.
final class UploadDelegate: NIOAsyncSequenceProducerDelegate {
    private let id: Int
    private let connection: NIOLoopBound<(HTTP1ConnectionHandler, ChannelHandlerContext)>

    fileprivate init(id: Int, connection: NIOLoopBound<(HTTP1ConnectionHandler, ChannelHandlerContext)>) {
        self.id = id
        self.connection = connection
    }

    func produceMore() { tell(abandoned: false) }

    func didTerminate() { tell(abandoned: true) }

    private func tell(abandoned: Bool) {
        let (connection, id) = (self.connection, self.id)
        connection.eventLoop.execute {
            let (handler, context) = connection.value
            handler.uploadWantsMore(id: id, abandoned: abandoned, context: context)
        }
    }
}

/// The task answering a connection's current request: cancelled when the connection closes (a client that
/// went away, or a feed cut at shutdown), awaited by the connection before the server finishes.
final class ConnectionTasks: Sendable {
    private let task = Mutex<Task<Void, Never>?>(nil)
    private let closingFlag = Atomic<Bool>(false)

    /// Set by the connection when it will close after the pending response (graceful shutdown, the client's
    /// half-close), so the response's head can say `Connection: close`.
    var closing: Bool { closingFlag.load(ordering: .relaxed) }

    func markClosing() { closingFlag.store(true, ordering: .relaxed) }

    var current: Task<Void, Never>? { task.withLock { $0 } }

    func start(_ task: Task<Void, Never>) { self.task.withLock { $0 = task } }

    func cancel() { task.withLock { $0?.cancel() } }
}

/// One HTTP/1.1 connection, on its event loop.
///
/// - One request at a time: parts of pipelined requests that arrive while a response is pending are queued, and
///   the socket is not read until it is written (as NIO's `HTTPServerPipelineHandler`).
/// - A body up to ``streamingThreshold`` (by its `Content-Length`) is assembled before the route runs, kept up to
///   one byte past the node's request limit: the route that reads it (``Call/bodyBytes()``) then answers 413
///   `too_large`; the rest of an oversized body is read and dropped. A larger body, or one of unknown length
///   (`Transfer-Encoding: chunked`), is handed to the route as it arrives (an attachment goes to disk that way,
///   never whole in memory), with backpressure: past a few buffers the route hasn't taken, the socket isn't read.
///   If the response ends before such a body does, the connection closes after it. A client that stalls
///   mid-body while the route waits for it is closed after the idle timeout.
/// - `Expect: 100-continue` is answered `100 Continue` at once (as CouchDB's mochiweb does).
/// - Keep-alive as the request asks (`Connection: close`, HTTP/1.0). A connection with no request part for the
///   idle timeout while no response is pending closes (idle between requests, or stalled mid-request).
/// - Graceful shutdown (`ChannelShouldQuiesceEvent`) or a client's half-close: an idle connection closes at once,
///   a busy one after its response, which says `Connection: close` (open feeds end at shutdown by the node's
///   ``ShutdownNotice``).
/// - When the connection closes, the task of its pending request is cancelled (a client that went away ends
///   its feed).
/// - A request NIO's parser rejects gets a 400 and the connection closes (as NIO's `HTTPServerProtocolErrorHandler`).
final class HTTP1ConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private enum State {
        case idle
        /// Assembling a request's body (in ``body``) before its route runs.
        case reading(HTTPRequestHead)
        case responding(keepAlive: Bool)
        case closed
    }

    /// A request body streamed to its route as it arrives.
    private struct Upload {
        typealias Producer = NIOThrowingAsyncSequenceProducer<ByteBuffer, any Error,
                                                              NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark,
                                                              UploadDelegate>
        let id: Int
        let source: Producer.Source
        /// The route has enough unread buffers: the socket isn't read until it asks for more.
        var paused = false
        /// The route stopped reading: the rest of the body is dropped.
        var abandoned = false
    }

    /// Bodies larger than this (by `Content-Length`), and chunked ones, stream to their route.
    static let streamingThreshold = 1 << 20

    private let exchange: HTTPExchange
    private let tasks: ConnectionTasks
    private let keep: Int
    private let idleTimeout: TimeAmount?
    private var state = State.idle
    /// The body being assembled while ``State/reading(_:)`` (kept out of the state so it grows in place).
    private var body: ByteBuffer?
    private var upload: Upload?
    private var uploads = 0
    private var queued: [HTTPServerRequestPart] = []
    private var readPending = false
    private var closeWhenDone = false
    private var idleTask: Scheduled<Void>?
    private var lastActivity = NIODeadline.now()
    /// The peer's IP address, read on the first request.
    private var clientAddress: String?

    init(exchange: HTTPExchange, tasks: ConnectionTasks, idleTimeout: TimeAmount?) {
        self.exchange = exchange
        self.tasks = tasks
        self.idleTimeout = idleTimeout
        let limit = exchange.responder.node.configuration.maxRequestSize
        self.keep = limit == .max ? limit : limit + 1
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { scheduleIdle(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        scheduleIdle(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        state = .closed
        queued = []
        body = nil
        upload?.source.finish(ChannelError.eof)
        upload = nil
        cancelIdle()
        tasks.cancel()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // A body cut short fails its route's read (it must not look complete).
        upload?.source.finish(ChannelError.eof)
        upload = nil
        cancelIdle()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        lastActivity = .now()
        if upload != nil {
            receiveUpload(part, context: context)
        } else if isResponding {
            queued.append(part)
        } else {
            receive(part, context: context)
        }
    }

    private func receive(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch (part, state) {
        case (.head(let head), .idle):
            if head.version == .http1_1, head.headers.first(name: "expect")?.lowercased() == "100-continue" {
                // The client waits for this before it sends the body (curl does for bodies over 1 MB, for a second).
                var interim = context.channel.allocator.buffer(capacity: 25)
                interim.writeStaticString("HTTP/1.1 100 Continue\r\n\r\n")
                context.writeAndFlush(wrapOutboundOut(.byteBuffer(interim)), promise: nil)
            }
            let length = head.headers.first(name: "content-length").flatMap { Int($0) }
            if length.map({ $0 > Self.streamingThreshold }) ?? head.headers.contains(name: "transfer-encoding") {
                let keepAlive = head.isKeepAlive
                state = .responding(keepAlive: keepAlive)
                startStreaming(head, keepAlive: keepAlive, context: context)
            } else {
                state = .reading(head)
                if let length, length > 0 { body = context.channel.allocator.buffer(capacity: min(length, keep)) }
            }
        case (.body(var chunk), .reading):
            let held = body?.readableBytes ?? 0
            guard held < keep else { return }
            if chunk.readableBytes > keep - held { chunk = chunk.getSlice(at: chunk.readerIndex, length: keep - held)! }
            if body == nil { body = chunk } else { body!.writeBuffer(&chunk) }
        case (.end, .reading(let head)):
            let keepAlive = head.isKeepAlive
            state = .responding(keepAlive: keepAlive)
            let assembled = body ?? ByteBuffer()
            body = nil
            start(head, body: RequestBody(buffer: assembled), keepAlive: keepAlive, context: context)
        case (_, .closed):
            return
        default:
            // NIO's decoder delivers head, body…, end in order; anything else is a broken connection.
            context.close(promise: nil)
        }
    }

    /// Starts a request whose body streams to its route (``Upload``).
    private func startStreaming(_ head: HTTPRequestHead, keepAlive: Bool, context: ChannelHandlerContext) {
        uploads += 1
        let delegate = UploadDelegate(id: uploads, connection: NIOLoopBound((self, context), eventLoop: context.eventLoop))
        let producer = Upload.Producer.makeSequence(backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8),
                                                    finishOnDeinit: false, delegate: delegate)
        upload = Upload(id: uploads, source: producer.source)
        start(head, body: RequestBody(asyncSequence: producer.sequence), keepAlive: keepAlive, context: context)
    }

    /// A part of a streamed body: passed on (or dropped, if the route stopped reading); the end finishes it.
    private func receiveUpload(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        guard var current = upload else { return }
        switch part {
        case .body(let chunk):
            guard !current.abandoned else { return }
            if current.source.yield(chunk) == .stopProducing { current.paused = true }
            upload = current
        case .end:
            current.source.finish()
            upload = nil
            resumeReading(context)
        case .head:
            // NIO's decoder ends a body before the next head; anything else is a broken connection.
            state = .closed
            context.close(promise: nil)
        }
    }

    /// The route wants more of its streamed body (`abandoned`: it stopped reading, the rest is dropped).
    fileprivate func uploadWantsMore(id: Int, abandoned: Bool, context: ChannelHandlerContext) {
        guard var current = upload, current.id == id else { return }
        current.paused = false
        if abandoned { current.abandoned = true }
        upload = current
        resumeReading(context)
    }

    private func resumeReading(_ context: ChannelHandlerContext) {
        if readPending && queued.isEmpty && !(upload?.paused ?? false) {
            readPending = false
            context.read()
        }
    }

    private func start(_ head: HTTPRequestHead, body: RequestBody, keepAlive: Bool, context: ChannelHandlerContext) {
        let request: Request
        do {
            request = Request(head: try Self.httpRequest(head), body: body)
        } catch {
            writeBadRequest(context)
            return
        }
        let exchange = self.exchange
        if clientAddress == nil { clientAddress = context.channel.remoteAddress?.ipAddress ?? "unknown" }
        let framing = ResponseEncoding.RequestFraming(method: head.method, http11: head.version.minor >= 1,
                                                      keepAlive: keepAlive)
        let writer = ChannelResponseWriter(connection: NIOLoopBound((self, context), eventLoop: context.eventLoop),
                                           tasks: tasks, clientAddress: clientAddress!, framing: framing)
        tasks.start(Task { await exchange.serve(request, writer: writer) })
    }

    /// The request head as HTTP types, as `HTTPRequest(head, secure: false, splitCookie: true)` makes it. A target
    /// in origin form (`/path?query`, what clients send to a server that is not a proxy) is the request's path as
    /// is — that conversion parses every target with `URLComponents` only to find the path of an absolute-form one
    /// (`http://host/path`), which is left to it.
    static func httpRequest(_ head: HTTPRequestHead) throws -> HTTPRequest {
        guard head.uri.utf8.first == UInt8(ascii: "/") else { return try HTTPRequest(head, secure: false, splitCookie: true) }
        return HTTPRequest(method: try HTTPRequest.Method(head.method), scheme: "http",
                           authority: head.headers.first(name: "Host"),
                           path: head.uri, headerFields: HTTPFields(head.headers, splitCookie: true))
    }

    /// Writes an encoded response, or the next part of one (on the loop, from ``ChannelResponseWriter``). After
    /// the end, the connection reads the next request or closes (after the response if its head said so, the
    /// request wasn't keep-alive, or the connection was told to close meanwhile).
    fileprivate func write(_ output: ResponseOutput, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        guard case .responding(let keepAlive) = state else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        if output.closes { closeWhenDone = true }
        // (A streamed body the route didn't read to its end: the connection can't find the next request.)
        let closes = output.ends && (!keepAlive || closeWhenDone || upload != nil)
        let count = (output.first == nil ? 0 : 1) + output.more.count
        if count == 0 {
            // Nothing to send (the end of an unframed body): still complete the promise in order.
            send(context.channel.allocator.buffer(capacity: 0), last: true, closes: closes, context: context,
                 promise: promise)
        }
        var sent = 0
        if let first = output.first {
            sent += 1
            send(first, last: sent == count, closes: closes, context: context, promise: promise)
        }
        for buffer in output.more {
            sent += 1
            send(buffer, last: sent == count, closes: closes, context: context, promise: promise)
        }
        guard output.ends else { return }
        if closes {
            state = .closed
            return
        }
        state = .idle
        while !queued.isEmpty {
            if upload != nil {
                receiveUpload(queued.removeFirst(), context: context)
            } else if !isResponding {
                receive(queued.removeFirst(), context: context)
            } else {
                break
            }
        }
        if isResponding { return }  // a queued request is being answered
        lastActivity = .now()
        scheduleIdle(context)
        if readPending {
            readPending = false
            context.read()
        }
    }

    private func send(_ buffer: ByteBuffer, last: Bool, closes: Bool, context: ChannelHandlerContext,
                      promise: EventLoopPromise<Void>?) {
        if !last {
            context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: nil)
        } else if closes {
            // Close once the response is on the wire, not before its last bytes left the send buffer.
            let written = context.writeAndFlush(wrapOutboundOut(.byteBuffer(buffer)))
            if let promise { written.cascade(to: promise) }
            // The future completes on the context's event loop, where the context may be used.
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            written.whenComplete { _ in bound.value.close(promise: nil) }
        } else {
            context.writeAndFlush(wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
        }
    }

    private var isResponding: Bool {
        if case .responding = state { true } else { false }
    }

    // Reads go on while a response is pending until a part of a next (pipelined) request is queued; then they
    // wait for the response's end (backpressure). Holding every read while responding would make NIO drop and
    // re-add the socket's read interest (two epoll_ctl calls) on each request of an ordinary keep-alive client.
    func read(context: ChannelHandlerContext) {
        if (isResponding && !queued.isEmpty) || (upload?.paused ?? false) {
            readPending = true
        } else {
            context.read()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is ChannelShouldQuiesceEvent, ChannelEvent.inputClosed:
            // Shutdown (feeds end by the node's ShutdownNotice) or the client's half-close: close when idle.
            closeWhenDone = true
            tasks.markClosing()
            if !isResponding { state = .closed; context.close(promise: nil) }
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is HTTPParserError, !isResponding {
            writeBadRequest(context)
            return
        }
        state = .closed
        context.close(promise: nil)
    }

    private func writeBadRequest(_ context: ChannelHandlerContext) {
        state = .closed
        var response = context.channel.allocator.buffer(capacity: 80)
        response.writeStaticString("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(response))).whenComplete { _ in bound.value.close(promise: nil) }
    }

    /// Starts the idle clock (no-op when it runs): the connection closes once `idleTimeout` passes without a
    /// request part while no response is pending — between requests, and for a client that stalls mid-request.
    /// One timer per connection that re-arms itself when it fires early, rather than one per request.
    private func scheduleIdle(_ context: ChannelHandlerContext, after delay: TimeAmount? = nil) {
        guard let idleTimeout, idleTask == nil else { return }
        let connection = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleTask = context.eventLoop.scheduleTask(in: delay ?? idleTimeout) {
            let (handler, context) = connection.value
            handler.idleTask = nil
            switch handler.state {
            case .closed:
                return
            case .responding where handler.upload.map({ $0.paused }) ?? true:
                handler.scheduleIdle(context)  // a response of any length is not idleness
            case .idle, .reading, .responding:
                // Between requests, stalled mid-request, or stalled mid-body while the route waits for the rest.
                let quiet = NIODeadline.now() - handler.lastActivity
                if quiet < idleTimeout {
                    handler.scheduleIdle(context, after: idleTimeout - quiet)
                } else {
                    handler.state = .closed
                    context.close(promise: nil)
                }
            }
        }
    }

    private func cancelIdle() {
        idleTask?.cancel()
        idleTask = nil
    }
}

/// Runs one request through the responder and writes its response to the connection.
struct HTTPExchange: Sendable {
    let responder: CouchResponder
    let logger: Logger
    let serverName: String
    let dates = HTTPDateCache()

    func serve(_ request: Request, writer: ChannelResponseWriter) async {
        let channel = writer.channel
        var logger = self.logger
        // The request id (named as Hummingbird names it on TLS connections) is for the access log; skip making
        // one when nothing at info level is written.
        if logger.logLevel <= .info { logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID()) }
        let context = SetteeRequestContext(source: ApplicationRequestContextSource(channel: channel, logger: logger),
                                           clientAddress: writer.clientAddress)
        var response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            // CouchResponder renders its own errors; this is the last resort.
            logger.error("unhandled error", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            response = Response(status: .internalServerError)
        }
        response.headers.add(.date, dates.now())
        response.headers.add(.server, serverName)
        var writer = writer
        // (Hummingbird's `Response` keeps `Content-Length` in step with a body of known length.)
        writer.encodeHead(response.head)
        // A body of known length (a buffer, almost always) can wait for its end; a feed must go out as it comes.
        writer.holdFirst = response.body.contentLength != nil
        do {
            try await response.body.write(writer)
        } catch {
            logger.debug("response not written", metadata: ["error": "\(error)"])
            channel.close(promise: nil)
        }
    }
}

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
    fileprivate let connection: NIOLoopBound<(HTTP1ConnectionHandler, ChannelHandlerContext)>
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

    fileprivate init(connection: NIOLoopBound<(HTTP1ConnectionHandler, ChannelHandlerContext)>, tasks: ConnectionTasks,
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
