/// A Mango request CouchDB refuses with an error of its own name (`no_usable_index`, `invalid_key`, …): the
/// HTTP status, CouchDB's error term and its reason, as `mango_error:info/2` gives them.
public struct MangoError: Error, Sendable, CustomStringConvertible {
    public let status: Int
    public let error: String
    public let reason: String

    public init(_ status: Int, _ error: String, _ reason: String) {
        self.status = status
        self.error = error
        self.reason = reason
    }

    public var description: String { "\(status) \(error): \(reason)" }

    static func badRequest(_ error: String, _ reason: String) -> MangoError { MangoError(400, error, reason) }
}
