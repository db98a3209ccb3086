package import Logging
package import NIOCore
package import NIOWebSocket
package import SetteeBLIP
import Synchronization

/// One BLIP connection over a WebSocket: the ``BLIPConnection`` state machine behind a lock, a single writer of its
/// frames (compression and checksums run in the order frames leave), and the replies this side awaits.
///
/// Requests from the peer are handed to `onRequest` one at a time, in order; a handler that must wait for the peer
/// (the changes feed) runs in a task of its own. Requests this side sends are answered through ``request(_:)``.
///
/// Both ends use it: the server's `_blipsync` route and a replicator's `ws://` endpoint (whose frames are masked, as
/// RFC 6455 requires of a client, by the ``WebSocketFrameWriter`` in its pipeline).
package final class BLIPSession: Sendable {
    struct State {
        var connection: BLIPConnection
        /// Where the replies to this side's requests go.
        var waiting: [UInt64: @Sendable (Result<BLIPMessage, any Error>) -> Void] = [:]
        var closed = false
        /// Frames made and not yet taken by the writer, in order.
        var pending: [[UInt8]] = []
    }

    private let state: Mutex<State>
    /// Wakes the writer when frames wait in ``State/pending`` (which the writer takes whole: every frame made since
    /// its last write goes out in one write and one flush).
    private let frames: AsyncStream<Void>.Continuation
    private let outgoing: AsyncStream<Void>
    package let logger: Logger

    /// Why a request this side sent got no reply.
    package struct Closed: Error {}

    /// A session; its channel's ``WebSocketFrameWriter`` masks the frames when this side is the client.
    package init(configuration: BLIPConnection.Configuration = .init(), logger: Logger) {
        state = Mutex(State(connection: BLIPConnection(configuration: configuration)))
        (outgoing, frames) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.logger = logger
    }

    /// Whether the session has ended (either side closed, or a fatal error).
    package var isClosed: Bool { state.withLock { $0.closed } }

    /// Queues a message (a response, or a request whose reply is not awaited).
    package func send(_ message: BLIPMessage) {
        state.withLock { state in
            state.connection.send(message)
            flush(&state)
        }
    }

    /// Queues messages (responses, or requests whose replies are not awaited) under one lock and one flush: the
    /// answers to a batch of pushed revisions go out together.
    package func send(contentsOf messages: [BLIPMessage]) {
        guard !messages.isEmpty else { return }
        state.withLock { state in
            for message in messages { state.connection.send(message) }
            flush(&state)
        }
    }

    /// Sends requests under one lock and one flush; `onReply` gets each one's reply with its index in `messages`
    /// (or ``Closed`` when the session ends first), on the reading side (or the closing one), so it must not block.
    package func request(contentsOf messages: [BLIPMessage],
                         onReply: @escaping @Sendable (Int, Result<BLIPMessage, any Error>) -> Void) {
        let accepted = state.withLock { state in
            guard !state.closed else { return false }
            for (i, message) in messages.enumerated() {
                let number = state.connection.send(message)
                state.waiting[number] = { onReply(i, $0) }
            }
            flush(&state)
            return true
        }
        if !accepted { for i in messages.indices { onReply(i, .failure(Closed())) } }
    }

    /// Sends a request and waits for its reply (a response or an error response).
    package func request(_ message: BLIPMessage) async throws -> BLIPMessage {
        try await withCheckedThrowingContinuation { continuation in
            request(message) { continuation.resume(with: $0) }
        }
    }

    /// Sends a request; `onReply` gets its reply (a response or an error response), or ``Closed`` when the session
    /// ends first. It runs on the reading side (or the closing one), so it must not block.
    package func request(_ message: BLIPMessage, onReply: @escaping @Sendable (Result<BLIPMessage, any Error>) -> Void) {
        let accepted = state.withLock { state in
            guard !state.closed else { return false }
            let number = state.connection.send(message)
            state.waiting[number] = onReply
            flush(&state)
            return true
        }
        if !accepted { onReply(.failure(Closed())) }
    }

    /// Takes one frame; returns the request it completed, resolving replies to this side's requests.
    package func receive(_ frame: [UInt8]) throws(BLIPError) -> BLIPMessage? {
        // The reply's handler runs after the lock is released (it may send).
        var reply: (handler: @Sendable (Result<BLIPMessage, any Error>) -> Void, message: BLIPMessage)?
        defer { if let reply { reply.handler(.success(reply.message)) } }
        let result: Result<BLIPMessage?, BLIPError> = state.withLock { state in
            do throws(BLIPError) {
                let message = try state.connection.receive(frame)
                flush(&state)
                guard let message else { return .success(nil) }
                if message.type == .request { return .success(message) }
                reply = state.waiting.removeValue(forKey: message.number).map { ($0, message) }
                return .success(nil)
            } catch {
                flush(&state)
                return .failure(error)
            }
        }
        return try result.get()
    }

    private func flush(_ state: inout State) {
        let wasEmpty = state.pending.isEmpty
        while let frame = state.connection.nextFrame() { state.pending.append(frame) }
        if wasEmpty && !state.pending.isEmpty { frames.yield() }
    }

    /// Fails every awaited reply and ends the frame stream.
    package func close() {
        let waiting = state.withLock { state in
            state.closed = true
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
        for handler in waiting { handler(.failure(Closed())) }
        frames.finish()
    }

    /// Runs the session over a WebSocket until either side closes: reads frames (a BLIP frame is one binary
    /// WebSocket message), answers pings, and writes this side's frames as they are made. Whichever side ends first
    /// ends the other: the peer's close (or a fatal BLIP error) stops the writer after a close frame, and this side's
    /// ``close()`` (shutdown) sends the close frame and stops reading once the peer answers or two seconds pass.
    package func run(_ channel: NIOAsyncChannel<WebSocketFrame, WebSocketOutbound>,
             onRequest: @escaping @Sendable (BLIPMessage) async -> Void) async {
        do {
            try await channel.executeThenClose { inbound, writer in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await _ in self.outgoing {
                            // Every frame made since the last write, in order: one buffer, one write and one flush.
                            let batch = self.state.withLock { state in
                                defer { state.pending.removeAll(keepingCapacity: true) }
                                return state.pending
                            }
                            guard !batch.isEmpty else { continue }
                            try await writer.write(.binaryMessages(batch))
                        }
                        // Closing: say so before the connection goes.
                        var reason = ByteBuffer()
                        reason.writeInteger(UInt16(1000))  // normal closure
                        try? await writer.write(.frame(self.frame(.connectionClose, reason)))
                    }
                    group.addTask {
                        defer { self.close() }
                        try await self.read(inbound, writer: writer, onRequest: onRequest)
                    }
                    _ = try await group.next()
                    self.close()
                    group.addTask { try await Task.sleep(for: .seconds(2)) }
                    _ = try await group.next()
                    group.cancelAll()
                }
            }
        } catch {
            logger.debug("BLIP connection ended: \(error)")
        }
        close()
    }

    /// Unmasks a client's frame payload in place (RFC 6455 §5.3), eight bytes at a time: a server reads every byte
    /// of a push through here.
    static func unmask(_ bytes: inout [UInt8], from start: Int, key: WebSocketMaskingKey) {
        // Masking is its own inverse: the writer's masking, with the key's bytes as a big-endian word.
        let word = key.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        bytes.withUnsafeMutableBytes { raw in
            WebSocketFrameWriter.mask(UnsafeMutableRawBufferPointer(rebasing: raw[start...]), key: word)
        }
    }

    /// A WebSocket frame this side sends (the channel's ``WebSocketFrameWriter`` masks it when this side is the client).
    private func frame(_ opcode: WebSocketOpcode, _ data: ByteBuffer) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: opcode, data: data)
    }

    /// Reads frames until the peer closes, sends something that is not BLIP, or a fatal BLIP error.
    private func read(_ inbound: NIOAsyncChannelInboundStream<WebSocketFrame>,
                      writer: NIOAsyncChannelOutboundWriter<WebSocketOutbound>,
                      onRequest: @escaping @Sendable (BLIPMessage) async -> Void) async throws {
        var message: [UInt8] = []
        for try await frame in inbound {
            switch frame.opcode {
            case .binary, .continuation:
                let start = message.count
                message.append(contentsOf: frame.data.readableBytesView)
                if let key = frame.maskKey { Self.unmask(&message, from: start, key: key) }
                guard frame.fin else { continue }
                let bytes = message
                message = []
                do {
                    if let request = try receive(bytes) { await onRequest(request) }
                } catch {
                    logger.notice("BLIP: \(error)")
                    if error.isFatal { return }
                }
            case .ping:
                try await writer.write(.frame(self.frame(.pong, frame.unmaskedData)))
            case .connectionClose:
                return
            case .text:
                logger.notice("BLIP: a text WebSocket message (BLIP sends binary only); closing")
                return
            default:
                continue
            }
        }
    }
}
