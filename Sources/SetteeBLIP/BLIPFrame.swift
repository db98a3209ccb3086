/// A BLIP message's type: the low three bits of a frame's flags.
package enum BLIPMessageType: UInt8, Sendable, Hashable, CaseIterable {
    /// A request (`MSG`).
    case request = 0
    /// A response (`RPY`).
    case response = 1
    /// An error response (`ERR`).
    case error = 2
    /// An acknowledgement of bytes received of a request (`ACKMSG`).
    case ackRequest = 4
    /// An acknowledgement of bytes received of a response (`ACKRPY`).
    case ackResponse = 5

    /// Whether this is a response or an error response (their numbers are the request's).
    public var isReply: Bool { self == .response || self == .error }
    /// Whether this is an acknowledgement (no properties, no checksum).
    public var isAck: Bool { self == .ackRequest || self == .ackResponse }
}

/// A frame's flags besides the type (BLIP section 3.5).
package struct BLIPFrameFlags: OptionSet, Sendable, Hashable {
    /// The flag bits (the type bits excluded).
    public let rawValue: UInt8
    /// Flags from their bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The frame's body is deflated with the direction's compression stream.
    public static let compressed = BLIPFrameFlags(rawValue: 0x08)
    /// The sender expedites this message.
    public static let urgent = BLIPFrameFlags(rawValue: 0x10)
    /// A request that wants no response.
    public static let noReply = BLIPFrameFlags(rawValue: 0x20)
    /// More frames of this message follow.
    public static let moreComing = BLIPFrameFlags(rawValue: 0x40)

    static let typeMask: UInt8 = 0x07
}

/// One frame as it travels in one WebSocket binary message: varint number, varint flags, body, and (except for
/// acknowledgements) a big-endian CRC32 trailer.
struct BLIPFrameHeader: Sendable, Hashable {
    var number: UInt64
    var type: BLIPMessageType
    var flags: BLIPFrameFlags

    /// The header of `frame`, and the index where its payload starts.
    /// - Throws: ``BLIPError`` `.malformedFrame` (empty frame, cut-off varint), `.unknownMessageType`.
    static func parse(_ frame: ArraySlice<UInt8>) throws(BLIPError) -> (BLIPFrameHeader, Int) {
        var index = frame.startIndex
        let number = try Varint.read(frame, at: &index)
        guard index < frame.endIndex else { throw BLIPError(.malformedFrame, "frame has no flags") }
        let rawFlags = try Varint.read(frame, at: &index)
        let low = UInt8(truncatingIfNeeded: rawFlags)
        guard let type = BLIPMessageType(rawValue: low & BLIPFrameFlags.typeMask) else {
            throw BLIPError(.unknownMessageType, "message type \(low & BLIPFrameFlags.typeMask) is not BLIP's")
        }
        let flags = BLIPFrameFlags(rawValue: low & 0x78)
        return (BLIPFrameHeader(number: number, type: type, flags: flags), index)
    }

    func write(into bytes: inout [UInt8]) {
        Varint.write(number, into: &bytes)
        Varint.write(UInt64(type.rawValue | flags.rawValue), into: &bytes)
    }
}
