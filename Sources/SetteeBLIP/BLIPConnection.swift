/// One end of a BLIP connection, as a state machine: frames in, complete messages out; messages in, frames out.
///
/// It does no I/O. The owner feeds every binary WebSocket message it receives to ``receive(_:)``, which returns the
/// message that frame completed (if any), and writes the frames ``nextFrame()`` hands out until it returns `nil`,
/// after every ``send(_:)`` and every ``receive(_:)`` (which may queue acknowledgements or error replies).
///
/// ```swift
/// var connection = BLIPConnection()
/// if let message = try connection.receive(frame), message.type == .request {
///     connection.send(.response(to: message.number, body: Array("{}".utf8)))
/// }
/// while let frame = connection.nextFrame() { try await outbound.write(.binary(frame)) }
/// ```
///
/// What it enforces (BLIP 3, "Protocol Error Handling"): requests begin in order (a new request's number is the
/// last one's plus one), replies answer requests this side sent, checksums match, compressed frames inflate with
/// the direction's stream, and no message exceeds ``Configuration/maxMessageSize``. A fatal ``BLIPError`` (see
/// ``BLIPError/isFatal``) closes the connection: later calls throw `.closed`. A frame error drops that message; for a
/// request that wants a reply, a BLIP 400 error response is queued.
///
/// Outgoing messages are cut into frames of ``Configuration/frameSize`` and multiplexed round-robin (acknowledgements
/// and urgent messages first). Flow control counts a frame's payload bytes as they travel — compressed, with the
/// checksum, without the frame header (message number and flags) — as LiteCore counts them on both sides: a
/// multi-frame message pauses once ``Configuration/maxUnackedBytes`` of it are unacknowledged, and this side
/// acknowledges every ``Configuration/ackInterval`` bytes it receives of a message. (LiteCore ignores an ACK that
/// counts more than it sent; one that counted headers too would leave a paused message paused for good.)
///
/// A value type, but its compression streams are shared by copies: use one copy per connection.
package struct BLIPConnection: Sendable {
    /// Limits and sizes; the defaults are LiteCore's but for the compression level.
    public struct Configuration: Sendable {
        /// The largest message accepted, properties and body, after decompression.
        public var maxMessageSize: Int = 64 << 20
        /// The payload bytes in a frame this side sends.
        public var frameSize: Int = 16384
        /// Acknowledge a message being received every this many bytes.
        public var ackInterval: Int = 50_000
        /// Pause sending a message once this many of its bytes are unacknowledged.
        public var maxUnackedBytes: Int = 128_000
        /// Compress messages of at least this many bytes (properties and body); `nil` never compresses.
        public var compressionThreshold: Int? = 500
        /// zlib's compression level: 1, zlib's fastest. Every revision of a push or pull and every `changes` list
        /// is deflated, and at level 6 (LiteCore's) deflate alone took a tenth of a pushing client's CPU; level 1
        /// makes JSON about 15 % larger on the wire than level 6 (0.34 of its size against 0.29) at under half the cost.
        public var compressionLevel: Int32 = 1

        /// LiteCore's sizes and limits.
        public init() {}
    }

    /// A message being received.
    struct Incoming {
        var type: BLIPMessageType
        var flags: BLIPFrameFlags
        var data: [UInt8] = []
        /// Payload bytes received so far (after frame headers, checksums included): what acknowledgements count.
        var rawBytes = 0
        var lastAck = 0
    }

    /// A message being sent.
    struct Outgoing {
        var type: BLIPMessageType
        var number: UInt64
        var flags: BLIPFrameFlags
        var data: [UInt8]
        /// Bytes of `data` framed so far.
        var sent = 0
        /// Payload bytes of this message's frames sent so far (after frame headers, checksums included): what
        /// acknowledgements count.
        var wireBytes = 0
        var acked = 0
    }

    /// The sizes and limits this connection uses.
    public let configuration: Configuration
    private var nextRequestNumber: UInt64 = 1
    private var lastIncomingRequest: UInt64 = 0
    private var incomingRequests: [UInt64: Incoming] = [:]
    private var incomingReplies: [UInt64: Incoming] = [:]
    /// Requests this side sent that await a reply.
    private var awaitingReply: Set<UInt64> = []
    /// Requests received that want a reply and have not had one.
    private var owedReplies: Set<UInt64> = []
    /// Messages being sent, in turn order from ``outboxStart`` (entries before it are spent). A batch of requests
    /// queued at once is taken from the front one frame at a time; removing each from an array's front would cost
    /// quadratic time in the batch.
    private var outbox: [Outgoing] = []
    private var outboxStart = 0
    private var closed = false
    private let deflater: BLIPDeflater
    private let inflater: BLIPInflater

    /// A connection before its first frame, with fresh compression streams.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        deflater = BLIPDeflater(level: configuration.compressionLevel)
        inflater = BLIPInflater()
    }

    /// Whether a fatal error closed the connection.
    public var isClosed: Bool { closed }
    /// Whether frames are waiting to be sent (some may be held back by flow control).
    public var hasPendingFrames: Bool { outboxStart < outbox.endIndex }
    /// Requests sent that have not been answered.
    public var pendingReplies: Int { awaitingReply.count }

    // MARK: Receiving

    /// Takes one frame (one binary WebSocket message) and returns the message it completed, if any.
    /// - Throws: ``BLIPError``; after a fatal one, the connection is closed.
    public mutating func receive(_ frame: [UInt8]) throws(BLIPError) -> BLIPMessage? {
        guard !closed else { throw BLIPError(.closed, "the connection was closed by an earlier error") }
        do throws(BLIPError) {
            return try receiveFrame(frame[...])
        } catch {
            if error.isFatal { closed = true; outbox.removeAll(); outboxStart = 0 }
            throw error
        }
    }

    private mutating func receiveFrame(_ frame: ArraySlice<UInt8>) throws(BLIPError) -> BLIPMessage? {
        guard !frame.isEmpty else { throw BLIPError(.malformedFrame, "empty frame") }
        let header: BLIPFrameHeader, start: Int
        do throws(BLIPError) {
            (header, start) = try BLIPFrameHeader.parse(frame)
        } catch where error.kind == .unknownMessageType {
            // Unknown types are frame errors; the frame's data cannot be checked, so the checksum is lost too.
            throw BLIPError(.badChecksum, "\(error.message); the frame's checksum can't be followed")
        }
        if header.type.isAck {
            var index = start
            let count = try Varint.read(frame, at: &index)
            let replyType = header.type == .ackRequest
            if let i = outbox[outboxStart...].firstIndex(where: { $0.number == header.number && ($0.type == .request) == replyType }) {
                outbox[i].acked = max(outbox[i].acked, Int(clamping: count))
            }
            return nil
        }
        guard frame.endIndex - start >= 4 else { throw BLIPError(.malformedFrame, "frame has no checksum") }
        let payload = frame[start..<(frame.endIndex - 4)]
        let trailer = frame.suffix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }

        // Where the frame belongs, checked before its data (a frame of an unknown message is a protocol error).
        var incoming: Incoming
        switch header.type {
        case .request:
            if let existing = incomingRequests[header.number] {
                incoming = existing
            } else if header.number == lastIncomingRequest + 1 {
                incoming = Incoming(type: .request, flags: header.flags)
                lastIncomingRequest = header.number
            } else {
                throw BLIPError(.unexpectedMessageNumber,
                                "request #\(header.number) is out of order (the next new request is #\(lastIncomingRequest + 1))")
            }
        case .response, .error:
            if let existing = incomingReplies[header.number] {
                incoming = existing
            } else if awaitingReply.contains(header.number) {
                incoming = Incoming(type: header.type, flags: header.flags)
            } else {
                throw BLIPError(.unexpectedMessageNumber, "reply #\(header.number) answers no pending request")
            }
        case .ackRequest, .ackResponse:
            return nil
        }

        let room = configuration.maxMessageSize - incoming.data.count
        if header.flags.contains(.compressed) {
            let data = try inflater.decompress(payload, limit: room)
            guard inflater.checksum == trailer else {
                throw BLIPError(.badChecksum, "frame of message #\(header.number) fails its checksum")
            }
            if incoming.data.isEmpty { incoming.data = data } else { incoming.data.append(contentsOf: data) }
        } else {
            guard payload.count <= room else { throw BLIPError(.messageTooLarge, "message over \(configuration.maxMessageSize) bytes") }
            inflater.addToChecksum(payload)
            guard inflater.checksum == trailer else {
                throw BLIPError(.badChecksum, "frame of message #\(header.number) fails its checksum")
            }
            incoming.data.append(contentsOf: payload)
        }
        incoming.rawBytes += frame.endIndex - start
        guard header.flags.contains(.moreComing) else {
            if header.type == .request { incomingRequests[header.number] = nil } else {
                incomingReplies[header.number] = nil
                awaitingReply.remove(header.number)
            }
            return try complete(incoming, number: header.number)
        }
        if incoming.rawBytes - incoming.lastAck >= configuration.ackInterval {
            incoming.lastAck = incoming.rawBytes
            var body: [UInt8] = []
            Varint.write(UInt64(incoming.rawBytes), into: &body)
            enqueue(Outgoing(type: header.type == .request ? .ackRequest : .ackResponse, number: header.number,
                             flags: [.urgent, .noReply], data: body))
        }
        if header.type == .request { incomingRequests[header.number] = incoming } else { incomingReplies[header.number] = incoming }
        return nil
    }

    /// Decodes a message whose last frame arrived; a request with bad properties is answered with a BLIP 400.
    private mutating func complete(_ incoming: Incoming, number: UInt64) throws(BLIPError) -> BLIPMessage {
        if incoming.type == .request && !incoming.flags.contains(.noReply) { owedReplies.insert(number) }
        do throws(BLIPError) {
            let (properties, bodyStart) = try BLIPProperties.read(incoming.data[...])
            return BLIPMessage(type: incoming.type, number: number,
                               flags: incoming.flags.intersection([.urgent, .noReply, .compressed]),
                               properties: properties, body: Array(incoming.data[bodyStart...]))
        } catch {
            if incoming.type == .request && !incoming.flags.contains(.noReply) {
                send(.error(to: number, domain: .blip, code: 400, message: error.message))
            }
            throw error
        }
    }

    // MARK: Sending

    /// Queues a message. A request gets the next request number (returned); a response or error keeps its number,
    /// and is dropped unless it answers a received request that wants a reply and has none yet.
    @discardableResult
    public mutating func send(_ message: BLIPMessage) -> UInt64 {
        guard !closed else { return 0 }
        var number = message.number
        var flags = message.flags.intersection([.urgent, .noReply])
        if message.type == .request {
            number = nextRequestNumber
            nextRequestNumber += 1
            if !flags.contains(.noReply) { awaitingReply.insert(number) }
        } else {
            // One reply per request that wants one: a reply to a no-reply request, to no request, or a second
            // reply would be a protocol error at the peer (LiteCore closes the connection), so it is dropped.
            guard owedReplies.remove(number) != nil else { return number }
            flags.remove(.noReply)
        }
        let data = message.encoded()
        if message.compressible, let threshold = configuration.compressionThreshold, data.count >= threshold {
            flags.insert(.compressed)
        }
        enqueue(Outgoing(type: message.type, number: number, flags: flags, data: data))
        return number
    }

    private mutating func enqueue(_ message: Outgoing) {
        if message.type.isAck {
            // Acknowledgements go ahead of everything but other acknowledgements.
            let index = outbox[outboxStart...].firstIndex { !$0.type.isAck } ?? outbox.endIndex
            outbox.insert(message, at: index)
        } else {
            outbox.append(message)
        }
    }

    /// The next frame to send, or `nil` when nothing can be sent now (all sent, or held by flow control).
    ///
    /// Frames must be sent in the order they are returned: compression and checksums run across them.
    public mutating func nextFrame() -> [UInt8]? {
        guard !closed else { return nil }
        // Round-robin over the messages flow control lets through; new messages join at the back, so requests
        // begin in order.
        guard let index = outbox[outboxStart...].firstIndex(where: { $0.wireBytes - $0.acked < configuration.maxUnackedBytes })
        else { return nil }
        var message = outbox[index]
        if index == outboxStart {
            outbox[index].data = []  // spent: its bytes are not held until the front is compacted
            outboxStart += 1
            if outboxStart == outbox.endIndex {
                outbox.removeAll(keepingCapacity: true)
                outboxStart = 0
            } else if outboxStart >= 256 && outboxStart * 2 >= outbox.count {
                outbox.removeFirst(outboxStart)
                outboxStart = 0
            }
        } else {
            outbox.remove(at: index)
        }
        let end = min(message.data.count, message.sent + configuration.frameSize)
        let chunk = message.data[message.sent..<end]
        var flags = message.flags
        if end < message.data.count { flags.insert(.moreComing) }
        var frame: [UInt8] = []
        frame.reserveCapacity(chunk.count + 16)
        var headerLength = 0
        if message.type.isAck {
            flags.remove(.compressed)
            BLIPFrameHeader(number: message.number, type: message.type, flags: flags).write(into: &frame)
            frame.append(contentsOf: chunk)
        } else {
            let compressed = flags.contains(.compressed) ? try? deflater.compress(chunk) : nil
            if compressed == nil {
                flags.remove(.compressed)
                deflater.addToChecksum(chunk)
            }
            BLIPFrameHeader(number: message.number, type: message.type, flags: flags).write(into: &frame)
            headerLength = frame.count
            if let compressed { frame.append(contentsOf: compressed) } else { frame.append(contentsOf: chunk) }
            let checksum = deflater.checksum
            frame.append(UInt8(checksum >> 24))
            frame.append(UInt8(truncatingIfNeeded: checksum >> 16))
            frame.append(UInt8(truncatingIfNeeded: checksum >> 8))
            frame.append(UInt8(truncatingIfNeeded: checksum))
        }
        message.sent = end
        message.wireBytes += frame.count - headerLength
        if message.sent < message.data.count {
            // Back of the queue; an urgent message goes ahead of the first normal one that is not acknowledgement.
            if message.flags.contains(.urgent),
               let i = outbox[outboxStart...].firstIndex(where: { !$0.type.isAck && !$0.flags.contains(.urgent) }) {
                outbox.insert(message, at: min(i + 1, outbox.endIndex))
            } else {
                outbox.append(message)
            }
        }
        return frame
    }

    /// Every frame that can be sent now.
    public mutating func drainFrames() -> [[UInt8]] {
        var frames: [[UInt8]] = []
        while let frame = nextFrame() { frames.append(frame) }
        return frames
    }
}
