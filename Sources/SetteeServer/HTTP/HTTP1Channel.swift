import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

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
/// reader holds back its writer. The connection's decisions are a value, ``HTTP1ConnectionStateMachine``, that the
/// handler feeds events to. ``ServerConfiguration/http1Channel`` `.hummingbird` serves plain HTTP/1.1 with
/// Hummingbird's own channel instead (``ShutdownNoticeChannel``).
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
            try pipeline.addHandler(Self.requestDecoder())
            let tasks = ConnectionTasks()
            try pipeline.addHandler(HTTP1ConnectionHandler(exchange: exchange, tasks: tasks, idleTimeout: idleTimeout))
            return Value(channel: channel, tasks: tasks)
        }
    }

    /// NIO's request decoder. Its left-over bytes are forwarded when it is removed: only
    /// ``HTTP1ConnectionHandler`` removes it, to replace it after a request that stopped it (a `CONNECT`).
    static func requestDecoder() -> ByteToMessageHandler<HTTPRequestDecoder> {
        ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes))
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

/// Another server child channel (Hummingbird's `HTTP1Channel` for ``HTTP1ChannelKind/hummingbird``) that also
/// tells the node when graceful shutdown begins, as ``SetteeHTTP1Channel`` does, so that open feeds end.
struct ShutdownNoticeChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let notice: ShutdownNotice

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        let notice = self.notice
        await withGracefulShutdownHandler {
            await base.handle(value: value, logger: logger)
        } onGracefulShutdown: {
            notice.raise()
        }
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

