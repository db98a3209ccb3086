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

/// One HTTP/1.1 connection, on its event loop: a thin shell around ``HTTP1ConnectionStateMachine``, which decides
/// (one request at a time, bodies assembled or streamed, keep-alive, half-close, the idle timer); this handler
/// feeds it the channel's events and performs the actions it returns.
///
/// - `Expect: 100-continue` is answered `100 Continue` at once (as CouchDB's mochiweb does).
/// - Graceful shutdown (`ChannelShouldQuiesceEvent`) and a client's half-close are the same event to the state
///   machine: an idle connection closes at once, a busy one after its response, which says `Connection: close`
///   (open feeds end at shutdown by the node's ``ShutdownNotice``).
/// - When the connection closes, the task of its pending request is cancelled (a client that went away ends
///   its feed).
/// - A request NIO's parser rejects gets a 400 and the connection closes (as NIO's `HTTPServerProtocolErrorHandler`).
final class HTTP1ConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// The route's side of a streamed body.
    typealias UploadProducer = NIOThrowingAsyncSequenceProducer<ByteBuffer, any Error,
                                                                NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark,
                                                                UploadDelegate>

    /// Bodies larger than this (by `Content-Length`), and chunked ones, stream to their route.
    static let streamingThreshold = HTTP1ConnectionStateMachine.streamingThreshold

    private let exchange: HTTPExchange
    private let tasks: ConnectionTasks
    private var machine: HTTP1ConnectionStateMachine
    /// The route's sequence of the body streaming in (the state machine's ``HTTP1ConnectionStateMachine/upload``).
    private var uploadSource: UploadProducer.Source?
    private var idleTask: Scheduled<Void>?
    /// The peer's IP address, read on the first request.
    private var clientAddress: String?

    init(exchange: HTTPExchange, tasks: ConnectionTasks, idleTimeout: TimeAmount?) {
        self.exchange = exchange
        self.tasks = tasks
        self.machine = HTTP1ConnectionStateMachine(maxRequestSize: exchange.responder.node.configuration.maxRequestSize,
                                                   idleTimeout: idleTimeout)
    }

    // MARK: Events in

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { perform(machine.channelActive(now: context.eventLoop.now), context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        perform(machine.channelActive(now: context.eventLoop.now), context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        perform(machine.channelClosed(cancelRequest: true), context: context)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // A body cut short fails its route's read (it must not look complete).
        perform(machine.channelClosed(cancelRequest: false), context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        perform(machine.partReceived(unwrapInboundIn(data), now: context.eventLoop.now), context: context)
    }

    func read(context: ChannelHandlerContext) {
        perform(machine.readRequested(), context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is ChannelShouldQuiesceEvent, ChannelEvent.inputClosed:
            // Shutdown (feeds end by the node's ShutdownNotice) or the client's half-close: close when idle.
            tasks.markClosing()
            perform(machine.inputClosed(), context: context)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        perform(machine.errorCaught(isParserError: error is HTTPParserError), context: context)
    }

    /// The route wants more of its streamed body (`abandoned`: it stopped reading, the rest is dropped).
    fileprivate func uploadWantsMore(id: Int, abandoned: Bool, context: ChannelHandlerContext) {
        perform(machine.uploadDemand(id: id, abandoned: abandoned), context: context)
    }

    /// Writes an encoded response, or the next part of one (on the loop, from ``ChannelResponseWriter``). After
    /// the end, the connection reads the next request or closes.
    func write(_ output: ResponseOutput, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        guard case .write(let closes) = machine.responsePart(ends: output.ends, closes: output.closes) else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
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
        guard output.ends && !closes else { return }
        // The queued parts of pipelined requests, then waiting for the next one.
        while let action = machine.nextAfterResponse(now: context.eventLoop.now) { perform(action, context: context) }
    }

    // MARK: Actions out

    private func perform(_ action: HTTP1ConnectionStateMachine.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            return
        case .sendContinue:
            sendContinue(context)
        case .startRequest(let head, let body, let keepAlive, let sendContinue):
            if sendContinue { self.sendContinue(context) }
            start(head, body: body, keepAlive: keepAlive, context: context)
        case .forwardBody(let chunk):
            if uploadSource?.yield(chunk) == .stopProducing { machine.uploadBackpressure() }
        case .finishUpload(let read):
            uploadSource?.finish()
            uploadSource = nil
            if read { context.read() }
        case .read:
            context.read()
        case .write, .failWrite:
            preconditionFailure("a response's write is performed by write(_:context:promise:)")
        case .awaitRequest(let delay, let read):
            if let delay { armIdleTimer(after: delay, context: context) }
            if read { context.read() }
        case .closeAfterResponse:
            tasks.markClosing()
        case .armIdleTimer(let delay):
            armIdleTimer(after: delay, context: context)
        case .sendBadRequest:
            var response = context.channel.allocator.buffer(capacity: 80)
            response.writeStaticString("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.byteBuffer(response))).whenComplete { _ in bound.value.close(promise: nil) }
        case .restartDecoder:
            restartDecoder(context)
        case .close:
            context.close(promise: nil)
        case .tearDown(let cancelRequest):
            uploadSource?.finish(ChannelError.eof)
            uploadSource = nil
            idleTask?.cancel()
            idleTask = nil
            if cancelRequest { tasks.cancel() }
        }
    }

    /// Puts a fresh request decoder in the place of the one that stopped after a `CONNECT` or `Upgrade` request
    /// (``HTTP1ConnectionStateMachine/stopsDecoder(_:)``). The new one goes in right after the old, so the bytes
    /// the old one holds, forwarded as it leaves the pipeline (``SetteeHTTP1Channel/requestDecoder()``), reach it.
    private func restartDecoder(_ context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        do {
            let stopped = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(SetteeHTTP1Channel.requestDecoder(), position: .after(stopped))
            pipeline.removeHandler(stopped, promise: nil)
        } catch {
            context.close(promise: nil)
        }
    }

    private func sendContinue(_ context: ChannelHandlerContext) {
        // The client waits for this before it sends the body (curl does for bodies over 1 MB, for a second).
        var interim = context.channel.allocator.buffer(capacity: 25)
        interim.writeStaticString("HTTP/1.1 100 Continue\r\n\r\n")
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(interim)), promise: nil)
    }

    private func start(_ head: HTTPRequestHead, body: HTTP1ConnectionStateMachine.Body, keepAlive: Bool,
                       context: ChannelHandlerContext) {
        let requestBody: RequestBody
        switch body {
        case .collected(let buffer):
            requestBody = RequestBody(buffer: buffer)
        case .streamed(let id):
            let delegate = UploadDelegate(id: id, connection: NIOLoopBound((self, context), eventLoop: context.eventLoop))
            let producer = UploadProducer.makeSequence(backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8),
                                                       finishOnDeinit: false, delegate: delegate)
            uploadSource = producer.source
            requestBody = RequestBody(asyncSequence: producer.sequence)
        }
        let request: Request
        do {
            request = Request(head: try Self.httpRequest(head), body: requestBody)
        } catch {
            perform(machine.requestRejected(), context: context)
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

    /// One timer per connection, re-armed when it fires early (the state machine says when), rather than one per
    /// request.
    private func armIdleTimer(after delay: TimeAmount, context: ChannelHandlerContext) {
        let connection = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleTask = context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = connection.value
            handler.idleTask = nil
            handler.perform(handler.machine.idleTimerFired(now: context.eventLoop.now), context: context)
        }
    }
}
