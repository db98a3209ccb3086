import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore
import SetteeIndex
import SetteeReplication

/// An error rendered as CouchDB renders errors: a status and `{"error": …, "reason": …}`.
struct CouchError: Error, Sendable {
    let status: HTTPResponse.Status
    let error: String
    let reason: String

    init(_ status: HTTPResponse.Status, _ error: String, _ reason: String) {
        self.status = status
        self.error = error
        self.reason = reason
    }

    static func badRequest(_ reason: String) -> CouchError { CouchError(.badRequest, "bad_request", reason) }
    static func notFound(_ reason: String = "missing") -> CouchError { CouchError(.notFound, "not_found", reason) }
    static let conflict = CouchError(.conflict, "conflict", "Document update conflict.")
    static func methodNotAllowed(_ allowed: String) -> CouchError {
        CouchError(.methodNotAllowed, "method_not_allowed", "Only \(allowed) allowed")
    }
    static let unauthorized = CouchError(.unauthorized, "unauthorized", "You are not authorized to access this db.")
    static let badCredentials = CouchError(.unauthorized, "unauthorized", "Name or password is incorrect.")
    static let forbidden = CouchError(.forbidden, "forbidden", "You are not allowed to access this db.")
    static let tooLarge = CouchError(.contentTooLarge, "too_large", "the request entity is too large")
    static let badContentType = CouchError(.unsupportedMediaType, "bad_content_type", "Content-Type must be application/json")

    /// The one table from store error codes to CouchDB's status and error term.
    static func from(_ error: SetteeError) -> CouchError {
        // A write refused by the node's rules (``WriteRules``) carries CouchDB's exact answer.
        if let refusal = error.underlying as? CouchError { return refusal }
        switch error.code {
        case .badRequest, .invalidJSON: return CouchError(.badRequest, "bad_request", error.reason)
        case .badDocID: return CouchError(.badRequest, "illegal_docid", error.reason)
        case .illegalPartition: return CouchError(.badRequest, "illegal_partition", error.reason)
        case .partitionOverflow: return CouchError(.forbidden, "partition_overflow", error.reason)
        case .conflict: return CouchError(.conflict, "conflict", error.reason)
        case .notFound: return CouchError(.notFound, "not_found", error.reason)
        case .deleted: return CouchError(.notFound, "not_found", "deleted")
        case .fileExists: return CouchError(.preconditionFailed, "file_exists", error.reason)
        case .illegalDatabaseName: return CouchError(.badRequest, "illegal_database_name", error.reason)
        case .tooLarge: return CouchError(.contentTooLarge, "too_large", error.reason)
        case .missingStub: return CouchError(.preconditionFailed, "missing_stub", error.reason)
        case .unauthorized: return CouchError(.unauthorized, "unauthorized", error.reason)
        case .forbidden: return CouchError(.forbidden, "forbidden", error.reason)
        case .closed: return CouchError(.serviceUnavailable, "service_unavailable", error.reason)
        case .queryParseError: return CouchError(.badRequest, "query_parse_error", error.reason)
        case .timeout: return CouchError(.requestTimeout, "timeout", error.reason)
        default: return CouchError(.internalServerError, "internal_server_error", error.reason)
        }
    }

    /// A design function's failure, as CouchDB answers it.
    static func from(_ error: JavaScriptError) -> CouchError {
        switch error {
        case .compilation(let reason): return CouchError(.badRequest, "compilation_error", reason)
        case .forbidden(let reason): return CouchError(.forbidden, "forbidden", reason)
        case .unauthorized(let reason): return CouchError(.unauthorized, "unauthorized", reason)
        case .notFound(let reason): return CouchError(.notFound, "not_found", reason)
        case .thrown(let name, let reason): return CouchError(.internalServerError, name, reason)
        case .timeout, .crashed, .protocolError, .unavailable:
            return CouchError(.internalServerError, "os_process_error", error.description)
        }
    }

    /// A Mango refusal: its kind decides the status; its error name and reason are CouchDB's.
    static func from(_ e: MangoError) -> CouchError {
        let status: HTTPResponse.Status = switch e.kind {
        case .badRequest: .badRequest
        case .notFound: .notFound
        case .serviceUnavailable: .serviceUnavailable
        }
        return CouchError(status, e.error, e.reason)
    }

    /// Any error as a CouchError (unknown errors are 500s).
    static func from(any error: any Error) -> CouchError {
        if let e = error as? CouchError { return e }
        if let e = error as? SetteeError { return from(e) }
        if let e = error as? JavaScriptError { return from(e) }
        if let e = error as? ReplicationError { return from(e) }
        if let e = error as? MangoError { return from(e) }
        if error is JSONError { return badRequest("invalid UTF-8 JSON") }
        if let e = error as? HTTPError, e.status == .contentTooLarge { return tooLarge }
        return CouchError(.internalServerError, "internal_server_error", "\(error)")
    }

    /// A replication's failure as `_replicate` answers it (CouchDB's statuses: a peer that can't be reached or
    /// opened is `db_not_found`, a peer's failure a 502 `replication_failed`).
    static func from(_ e: ReplicationError) -> CouchError {
        switch e.kind {
        case .unauthorized: return CouchError(.unauthorized, "unauthorized", e.message)
        case .forbidden: return CouchError(.forbidden, "forbidden", e.message)
        case .notFound, .unreachable: return CouchError(.notFound, "db_not_found", "could not open: \(e.message)")
        case .badRequest, .unsupported: return CouchError(.badRequest, "bad_request", e.message)
        case .transient, .cancelled: return CouchError(.badGateway, "replication_failed", e.message)
        case .tls: return CouchError(.badGateway, "tls_error", e.message)
        case .local: return CouchError(.internalServerError, "replication_failed", e.message)
        }
    }

    /// The error as a per-document result row (`_bulk_docs`).
    var bulkRow: JSONObject { ["error": .string(error), "reason": .string(reason)] }
}
