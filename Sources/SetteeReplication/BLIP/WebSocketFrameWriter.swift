package import NIOCore
import NIOHTTP1
package import NIOWebSocket

/// Writes WebSocket frames (RFC 6455 §5.2) on BLIP connections, in place of NIO's `WebSocketFrameEncoder`: each frame
/// goes out as one buffer (header and payload), and a client's payload is masked eight bytes at a time with a key
/// from a buffered strong random source.
///
/// Every revision of a push over Couchbase Lite's protocol is a frame each way, so per-frame costs count: NIO's
/// encoder writes the header as a buffer of its own when the payload has no room before it, masks a byte at a time,
/// and a key from `WebSocketMaskingKey.random()` is a `getrandom` system call per frame.
///
/// Whether frames are masked is the side's, not the frame's: a client masks every frame and a server none (§5.1),
/// whatever a frame's `maskKey` says. Runs on its channel's event loop only.
package final class WebSocketFrameWriter: ChannelOutboundHandler {
    package typealias OutboundIn = WebSocketFrame
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
        let frame = Self.unwrapOutboundIn(data)
        let extensionLength = frame.extensionData?.readableBytes ?? 0
        let length = extensionLength + frame.data.readableBytes
        var out = context.channel.allocator.buffer(capacity: length + 14)
        var first = UInt8(webSocketOpcode: frame.opcode)
        if frame.fin { first |= 0x80 }
        if frame.rsv1 { first |= 0x40 }
        if frame.rsv2 { first |= 0x20 }
        if frame.rsv3 { first |= 0x10 }
        let maskBit: UInt8 = masking ? 0x80 : 0
        out.writeInteger(first)
        switch length {
        case ..<126: out.writeInteger(UInt8(length) | maskBit)
        case ...0xFFFF: out.writeMultipleIntegers(126 | maskBit, UInt16(length))
        default: out.writeMultipleIntegers(127 | maskBit, UInt64(length))
        }
        let key = masking ? takeKey() : 0
        if masking { out.writeInteger(key) }
        let start = out.writerIndex
        if var extensionData = frame.extensionData { out.writeBuffer(&extensionData) }
        var payload = frame.data
        out.writeBuffer(&payload)
        if masking {
            let offset = start - out.readerIndex
            out.withUnsafeMutableReadableBytes { raw in
                Self.mask(UnsafeMutableRawBufferPointer(rebasing: raw[offset...]), key: key)
            }
        }
        context.write(Self.wrapOutboundOut(out), promise: promise)
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
            try pipeline.addHandler(WebSocketProtocolErrorHandler(isServer: false))
        }.flatMap {
            self.upgradePipelineHandler(channel, upgradeResponse)
        }
    }
}
