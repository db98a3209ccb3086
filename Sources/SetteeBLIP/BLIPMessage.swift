package import SetteeCore

/// A complete BLIP message: a request, a response or an error response, with its properties and body.
///
/// ```swift
/// let request = BLIPMessage.request(profile: "getCheckpoint", properties: ["client": "cp-1"])
/// let reply = BLIPMessage.response(to: 1, body: Array(#"{"local":5}"#.utf8))
/// let refusal = BLIPMessage.error(to: 2, domain: .http, code: 404, message: "missing")
/// ```
package struct BLIPMessage: Sendable, Hashable {
    /// A request, a response or an error (acknowledgements are not messages an application sees).
    public var type: BLIPMessageType
    /// The request's number (a response carries its request's number). Assigned by ``BLIPConnection`` when sent.
    public var number: UInt64
    /// `.urgent`, `.noReply` and `.compressed` as the sender asked (`.moreComing` never appears here).
    public var flags: BLIPFrameFlags
    /// The properties (`Profile` names a request's handler; an error carries `Error-Domain` and `Error-Code`).
    public var properties: BLIPProperties
    /// The body, uninterpreted (JSON in Couchbase's replication protocol).
    public var body: [UInt8]
    /// Whether ``BLIPConnection`` may compress this message when it sends it (messages past its threshold are
    /// compressed unless this is `false`: bodies that don't shrink, such as a JPEG a `getAttachment` asked for
    /// without `compress`). Not sent; a received message has the default.
    public var compressible = true

    /// A message; ``BLIPConnection/send(_:)`` numbers requests itself.
    public init(type: BLIPMessageType, number: UInt64 = 0, flags: BLIPFrameFlags = [], properties: BLIPProperties = [:],
                body: [UInt8] = []) {
        self.type = type
        self.number = number
        self.flags = flags
        self.properties = properties
        self.body = body
    }

    /// The domains of error responses.
    public enum ErrorDomain: String, Sendable {
        /// BLIP's own (HTTP status codes where they make sense: 400, 403, 404, 416, 501, 599).
        case blip = "BLIP"
        /// HTTP status codes, as Sync Gateway answers the replication protocol (404 missing, 409 conflict, …).
        case http = "HTTP"
    }

    /// A request with the `Profile` property naming its handler.
    public static func request(profile: String, properties: BLIPProperties = [:], body: [UInt8] = [],
                               noReply: Bool = false, urgent: Bool = false) -> BLIPMessage {
        var all: BLIPProperties = ["Profile": profile]
        for pair in properties { all[pair.key] = pair.value }
        var flags: BLIPFrameFlags = []
        if noReply { flags.insert(.noReply) }
        if urgent { flags.insert(.urgent) }
        return BLIPMessage(type: .request, flags: flags, properties: all, body: body)
    }

    /// A successful response to request `number` (`compressible: false` sends it uncompressed whatever its size).
    public static func response(to number: UInt64, properties: BLIPProperties = [:], body: [UInt8] = [],
                                compressible: Bool = true) -> BLIPMessage {
        var message = BLIPMessage(type: .response, number: number, properties: properties, body: body)
        message.compressible = compressible
        return message
    }

    /// An error response to request `number`: `Error-Domain`, `Error-Code`, and the message as the body.
    public static func error(to number: UInt64, domain: ErrorDomain, code: Int, message: String) -> BLIPMessage {
        BLIPMessage(type: .error, number: number,
                    properties: ["Error-Domain": domain.rawValue, "Error-Code": String(code)], body: Array(message.utf8))
    }

    /// The request's `Profile` (its handler's name).
    public var profile: String? { properties["Profile"] }

    /// An error response's domain (BLIP when the property is missing) and code.
    public var errorInfo: (domain: String, code: Int, message: String)? {
        guard type == .error else { return nil }
        return (properties["Error-Domain"] ?? "BLIP", Int(properties["Error-Code"] ?? "") ?? 599,
                String(decoding: body, as: UTF8.self))
    }

    /// The body parsed as JSON (an empty body is `nil`).
    /// - Throws: `JSONError` when the body is not JSON.
    public func jsonBody() throws(JSONError) -> JSON? {
        body.isEmpty ? nil : try JSON.parse(body)
    }

    /// The bytes of this message before framing: the properties, then the body.
    func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(body.count + 64)
        properties.write(into: &bytes)
        bytes.append(contentsOf: body)
        return bytes
    }
}
