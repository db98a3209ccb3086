import NIOCore
import NIOHTTP1
import NIOWebSocket
import SetteeReplication

/// Turning one of Settee's HTTP/1.1 connections (``SetteeHTTP1Channel``) into a WebSocket after a route answered
/// an upgrade request with `101 Switching Protocols`.
///
/// NIO's request decoder stops for good after an `Upgrade` request (``HTTP1ConnectionStateMachine``), holding any
/// bytes that follow. Here, on the event loop: the 101 head goes out, ``HTTP1ConnectionHandler`` leaves the
/// pipeline, NIO's WebSocket frame decoder and Settee's frame writer (``WebSocketFrameWriter``) take its place, and the stopped request decoder is removed
/// last so the bytes it held reach the frame decoder. The connection is then an `NIOAsyncChannel` of frames that
/// the route's task owns until it closes it.
extension ChannelResponseWriter {
    func switchToWebSocket(maxFrameSize: Int) async throws -> NIOAsyncChannel<WebSocketFrame, WebSocketOutbound> {
        // The head as encoded (status line and fields), ended here: no Connection field of the HTTP framing's.
        var ended = self.head
        ended?.writeStaticString("\r\n")
        let head = ended
        let connection = self.connection
        let channel = self.channel
        return try await channel.eventLoop.submit {
            let (handler, context) = connection.value
            let pipeline = context.pipeline.syncOperations
            if let head { context.writeAndFlush(handler.wrapOutboundOut(.byteBuffer(head)), promise: nil) }
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            pipeline.removeHandler(context: context, promise: nil)
            try pipeline.addHandlers([WebSocketFrameWriter(masking: false),
                                      ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)),
                                      WebSocketErrorHandler()],
                                     position: .after(decoder))
            pipeline.removeHandler(decoder, promise: nil)
            return try NIOAsyncChannel<WebSocketFrame, WebSocketOutbound>(wrappingChannelSynchronously: channel)
        }.get()
    }
}
