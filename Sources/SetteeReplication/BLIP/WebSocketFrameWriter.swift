package import NIOCore
import NIOHTTP1
package import NIOWebSocket

/// What a BLIP connection writes: a WebSocket frame (close, pong), or a batch of BLIP frames, each one binary
/// WebSocket message, encoded together into one buffer.
package enum WebSocketOutbound: Sendable {
    case frame(WebSocketFrame)
    case binaryMessages([[UInt8]])
}

/// Writes WebSocket frames (RFC 6455 §5.2) on BLIP connections, in place of NIO's `WebSocketFrameEncoder`: a batch of
/// BLIP frames goes out as one buffer (each frame's header and payload one after another), and a client's payloads
/// are masked eight bytes at a time with keys from a buffered strong random source.
///
/// Every revision of a push over Couchbase Lite's protocol is a frame each way, so per-frame costs count: NIO's
/// encoder takes a `WebSocketFrame` (and a buffer) per message through the pipeline, writes the header as a buffer
/// of its own when the payload has no room before it, masks a byte at a time, and a key from
/// `WebSocketMaskingKey.random()` is a `getrandom` system call per frame.
///
/// Whether frames are masked is the side's, not the frame's: a client masks every frame and a server none (§5.1),
/// whatever a frame's `maskKey` says. Runs on its channel's event loop only.
package final class WebSocketFrameWriter: ChannelOutboundHandler {
    package typealias OutboundIn = WebSocketOutbound
    package typealias OutboundOut = ByteBuffer

    private let masking: Bool
    /// Random bytes for masking keys, drawn from the system's generator 4 KiB at a time.
    private var keys: [UInt8] = []
    private var nextKey = 0

    /// A writer for the client side (`masking: true`) or the server side.
    package init(masking: Bool) {
        self.masking = masking
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case .frame(let frame):
            let extensionLength = frame.extensionData?.readableBytes ?? 0
            var out = context.channel.allocator.buffer(capacity: extensionLength + frame.data.readableBytes + 14)
            var first = UInt8(webSocketOpcode: frame.opcode)
            if frame.fin { first |= 0x80 }
            if frame.rsv1 { first |= 0x40 }
            if frame.rsv2 { first |= 0x20 }
            if frame.rsv3 { first |= 0x10 }
            var payload = frame.extensionData ?? ByteBuffer()
            var data = frame.data
            payload.writeBuffer(&data)
            payload.withUnsafeReadableBytes { append(first: first, payload: $0, to: &out) }
            context.write(Self.wrapOutboundOut(out), promise: promise)
        case .binaryMessages(let messages):
            var out = context.channel.allocator.buffer(capacity: messages.reduce(0) { $0 + $1.count + 14 })
            let first = 0x80 | UInt8(webSocketOpcode: .binary)
            for message in messages {
                message.withUnsafeBytes { append(first: first, payload: $0, to: &out) }
            }
            context.write(Self.wrapOutboundOut(out), promise: promise)
        }
    }

    /// Appends one frame: its first byte, the length (with the mask bit and key when masking), the payload.
    private func append(first: UInt8, payload: UnsafeRawBufferPointer, to out: inout ByteBuffer) {
        let length = payload.count
        let maskBit: UInt8 = masking ? 0x80 : 0
        out.writeInteger(first)
        switch length {
        case ..<126: out.writeInteger(UInt8(length) | maskBit)
        case ...0xFFFF: out.writeMultipleIntegers(126 | maskBit, UInt16(length))
        default: out.writeMultipleIntegers(127 | maskBit, UInt64(length))
        }
        guard masking else {
            out.writeBytes(payload)
            return
        }
        let key = takeKey()
        out.writeInteger(key)
        let start = out.writerIndex - out.readerIndex
        out.writeBytes(payload)
        out.withUnsafeMutableReadableBytes { raw in
            Self.mask(UnsafeMutableRawBufferPointer(rebasing: raw[start...]), key: key)
        }
    }

    /// XORs `bytes` with `key` (big-endian: its first byte masks the first payload byte), eight bytes at a time.
    static func mask(_ bytes: UnsafeMutableRawBufferPointer, key: UInt32) {
        let k = withUnsafeBytes(of: key.bigEndian) { Array($0) }
        let pattern = (k + k).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        var i = 0
        while i + 8 <= bytes.count {
            let word = bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            bytes.storeBytes(of: word ^ pattern, toByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            bytes[i] ^= k[i & 3]
            i += 1
        }
    }

    /// The next masking key: unpredictable (§10.3), from the system's cryptographically secure generator.
    private func takeKey() -> UInt32 {
        if nextKey + 4 > keys.count {
            var generator = SystemRandomNumberGenerator()
            keys = (0..<512).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
            nextKey = 0
        }
        defer { nextKey += 4 }
        return keys.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: nextKey, as: UInt32.self) }
    }
}

/// NIO's WebSocket client upgrader (its request key, its check of the server's `Sec-WebSocket-Accept`), with
/// ``WebSocketFrameWriter`` writing the frames once upgraded.
struct BLIPWebSocketClientUpgrader<UpgradeResult: Sendable>: NIOTypedHTTPClientProtocolUpgrader {
    private let base: NIOTypedWebSocketClientUpgrader<UpgradeResult>
    private let maxFrameSize: Int
    private let upgradePipelineHandler: @Sendable (any Channel, HTTPResponseHead) -> EventLoopFuture<UpgradeResult>

    init(maxFrameSize: Int, upgradePipelineHandler: @escaping @Sendable (any Channel, HTTPResponseHead) -> EventLoopFuture<UpgradeResult>) {
        base = NIOTypedWebSocketClientUpgrader(maxFrameSize: maxFrameSize, upgradePipelineHandler: upgradePipelineHandler)
        self.maxFrameSize = maxFrameSize
        self.upgradePipelineHandler = upgradePipelineHandler
    }

    var supportedProtocol: String { base.supportedProtocol }
    var requiredUpgradeHeaders: [String] { base.requiredUpgradeHeaders }

    func addCustom(upgradeRequestHeaders: inout HTTPHeaders) {
        base.addCustom(upgradeRequestHeaders: &upgradeRequestHeaders)
    }

    func shouldAllowUpgrade(upgradeResponse: HTTPResponseHead) -> Bool {
        base.shouldAllowUpgrade(upgradeResponse: upgradeResponse)
    }

    func upgrade(channel: any Channel, upgradeResponse: HTTPResponseHead) -> EventLoopFuture<UpgradeResult> {
        let maxFrameSize = self.maxFrameSize
        return channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(WebSocketFrameWriter(masking: true))
            try pipeline.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)))
            try pipeline.addHandler(WebSocketErrorHandler())
        }.flatMap {
            self.upgradePipelineHandler(channel, upgradeResponse)
        }
    }
}

/// NIO's `WebSocketProtocolErrorHandler` for a pipeline whose writer is ``WebSocketFrameWriter``: a frame the decoder
/// refuses (too large, a fragmented or oversized control frame) is answered with a close frame carrying the
/// matching status code (§7.4.1), and the connection closes.
package final class WebSocketErrorHandler: ChannelInboundHandler {
    package typealias InboundIn = Never
    package typealias OutboundOut = WebSocketOutbound

    package init() {}

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOWebSocketError {
            // 1009 message too big, 1002 protocol error.
            var data = context.channel.allocator.buffer(capacity: 2)
            data.writeInteger(UInt16(error == .invalidFrameLength ? 1009 : 1002))
            let loopBound = context.loopBound
            context.writeAndFlush(Self.wrapOutboundOut(.frame(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))))
                .whenComplete { _ in loopBound.value.close(promise: nil) }
        }
        context.fireErrorCaught(error)
    }
}
