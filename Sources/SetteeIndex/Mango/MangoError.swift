/// A Mango request the index layer refuses, with CouchDB's error name and reason (`invalid_index`,
/// `no_usable_index`, …). What kind of refusal it is decides the HTTP status, in the server's one error table
/// (`CouchError`), not here.
package struct MangoError: Error, Sendable, CustomStringConvertible {
    /// The kind of refusal.
    public enum Kind: Sendable {
        /// The request is malformed or asks for something no index can serve (400).
        case badRequest
        /// A named index or design document does not exist (404).
        case notFound
        /// The request needs an index service Settee does not have (`text` and `nouveau` indexes: 503).
        case serviceUnavailable
    }

    public let kind: Kind
    /// CouchDB's error name.
    public let error: String
    public let reason: String

    public init(_ kind: Kind, _ error: String, _ reason: String) {
        self.kind = kind
        self.error = error
        self.reason = reason
    }

    public var description: String { "\(error): \(reason)" }

    static func badRequest(_ error: String, _ reason: String) -> MangoError { MangoError(.badRequest, error, reason) }
}
