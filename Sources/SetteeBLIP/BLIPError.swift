/// Why a BLIP connection, or one of its messages, failed.
///
/// A ``BLIPConnection`` throws this for input it cannot accept; it never traps on input. The ``isFatal`` errors
/// (BLIP's "fatal errors", section 3.8: a cut-off varint, a frame without flags, bad deflate data, a checksum
/// mismatch, a message over the size limit) end the connection; the others are frame errors.
package struct BLIPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kinds of failure.
    public enum Kind: String, Sendable, Hashable {
        /// A frame too short for its header, or a varint cut off.
        case malformedFrame
        /// A frame's checksum does not match the running CRC32 of the data received so far.
        case badChecksum
        /// A compressed frame's body is not valid deflate data (or the stream failed).
        case badCompression
        /// A frame of a message number that is not the next one, or of a message that already completed.
        case unexpectedMessageNumber
        /// A message type BLIP does not define.
        case unknownMessageType
        /// The properties are malformed: a length beyond the message, no final NUL, an odd number of strings, bad UTF-8.
        case badProperties
        /// A message larger than the connection's limit.
        case messageTooLarge
        /// The connection was already closed by an earlier fatal error.
        case closed
    }

    /// What went wrong.
    public let kind: Kind
    /// A sentence for logs and for the peer.
    public let message: String

    /// An error of `kind`, with a sentence saying what was wrong.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// Whether the connection must close (BLIP's fatal errors); other errors drop one frame or message.
    public var isFatal: Bool {
        switch kind {
        case .malformedFrame, .badChecksum, .badCompression, .messageTooLarge, .closed, .unexpectedMessageNumber: true
        case .unknownMessageType, .badProperties: false
        }
    }

    /// `BLIP <kind>: <message>`, for logs.
    public var description: String { "BLIP \(kind.rawValue): \(message)" }
}
