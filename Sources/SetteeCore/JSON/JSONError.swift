/// Why a JSON text was rejected, and where.
///
/// The parser stops at the first problem and reports its ``kind`` and the byte ``offset`` (from the
/// start of the input) where it was found. Two errors are equal when both kind and offset match.
///
/// ```swift
/// do {
///     _ = try JSON.parse(#"{"a": 1,}"#)
/// } catch {
///     print(error)   // Unexpected character '}' at byte 8
/// }
/// ```
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The class of problem.
    public enum Kind: Sendable, Equatable {
        /// A byte that cannot start or continue the value here (including a trailing comma, `NaN`, a bare word).
        case unexpectedCharacter
        /// The input ended inside a value (an unclosed string, array or object, or nothing at all).
        case unexpectedEnd
        /// A malformed number (`01`, `1.`, `-`, `1e`) or one too large for a `Double`.
        case invalidNumber
        /// An unknown escape, bad `\u` hex digits, or an unpaired UTF-16 surrogate.
        case invalidEscape
        /// Bytes inside a string that are not well-formed UTF-8 (overlongs, surrogates, above U+10FFFF).
        case invalidUTF8
        /// A raw byte below 0x20 inside a string; it must be escaped.
        case controlCharacterInString
        /// Arrays and objects nested deeper than ``JSONLimits/maxDepth``.
        case tooDeep
        /// The input is longer than ``JSONLimits/maxBytes``.
        case tooLarge
        /// Something other than whitespace follows the value.
        case trailingData
    }

    /// The class of problem.
    public let kind: Kind
    /// The byte offset in the input where the problem was found.
    public let offset: Int
    /// The offending byte, when there is one; used only to make ``description`` clearer.
    let byte: UInt8?

    /// Creates an error of `kind` at byte `offset`.
    public init(kind: Kind, offset: Int) {
        self.init(kind, at: offset, byte: nil)
    }

    init(_ kind: Kind, at offset: Int, byte: UInt8? = nil) {
        self.kind = kind
        self.offset = offset
        self.byte = byte
    }

    public static func == (lhs: JSONError, rhs: JSONError) -> Bool {
        lhs.kind == rhs.kind && lhs.offset == rhs.offset
    }

    /// A sentence naming the problem and the byte offset, e.g. `Unexpected character '}' at byte 17`.
    public var description: String {
        let what: String
        switch kind {
        case .unexpectedCharacter:
            if let byte {
                what = "Unexpected character \(Self.show(byte))"
            } else {
                what = "Unexpected character"
            }
        case .unexpectedEnd: what = "Unexpected end of input"
        case .invalidNumber: what = "Invalid number"
        case .invalidEscape: what = "Invalid escape sequence in string"
        case .invalidUTF8: what = "Invalid UTF-8 in string"
        case .controlCharacterInString:
            what = "Unescaped control character\(byte.map { " " + Self.show($0) } ?? "") in string"
        case .tooDeep: what = "Arrays and objects nested too deeply"
        case .tooLarge: what = "JSON input too large"
        case .trailingData: what = "Unexpected data after the JSON value"
        }
        return "\(what) at byte \(offset)"
    }

    private static func show(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F {
            return "'\(Character(Unicode.Scalar(byte)))'"
        }
        let hex = String(byte, radix: 16, uppercase: true)
        return "0x" + (hex.count == 1 ? "0" + hex : hex)
    }
}

/// Bounds the parser enforces before it spends memory or stack on hostile input.
///
/// ```swift
/// let json = try JSON.parse(body, limits: JSONLimits(maxDepth: 64, maxBytes: 1 << 20))
/// ```
///
/// The parser recurses once per nesting level, so keep ``maxDepth`` in the hundreds, not the
/// hundreds of thousands.
public struct JSONLimits: Sendable {
    /// The deepest nesting of arrays and objects accepted; the top-level container is depth 1.
    public var maxDepth: Int
    /// The longest input accepted, in bytes.
    public var maxBytes: Int

    /// 256 levels of nesting and 64 MiB of input.
    public static let `default` = JSONLimits()

    public init(maxDepth: Int = 256, maxBytes: Int = 64 << 20) {
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
    }
}
