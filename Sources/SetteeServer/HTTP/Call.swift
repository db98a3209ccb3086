import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeCore
import SetteeStore

/// One request being handled: the parsed path, options and identity, plus body helpers.
struct Call: Sendable {
    var request: Request
    let node: Node
    let query: QueryOptions
    /// Percent-decoded path segments.
    let segments: [String]
    /// The caller (anonymous until authenticated); in admin-party mode every caller is admin.
    var userCtx: UserContext = .anonymous
    /// The client's address (without port), for lockout and logs.
    let remoteAddress: String
    /// What the caller may do in the database of this request (set by ``Auth/authorize(_:_:)``).
    var access: Access = .none
    /// On a database with a sync function, the channels a caller who is not its admin may read (``SyncGate``);
    /// nil: every document.
    var reader: ChannelIndex.Reader?
    /// A re-issued session cookie to send with the response.
    var setCookie: String?
    /// The authenticated user's name (nil when anonymous).
    var user: String? { userCtx.name }
    /// Whether the caller is a server admin.
    var isAdmin: Bool { userCtx.isServerAdmin }
    /// The caller as the store's write rules judge its writes (``WriteRules``: `validate_doc_update`'s `userCtx`).
    var writer: WriteContext { WriteContext(name: userCtx.name, roles: userCtx.roles) }
    /// What the request was routed to (the metrics' `route` label).
    var route: Route = .other

    var method: HTTPRequest.Method { request.method }

    func header(_ name: HTTPField.Name) -> String? { request.headers.value(of: name) }

    /// Reads the whole body up to the node's request limit (413 beyond it).
    mutating func bodyBytes() async throws -> [UInt8] {
        let limit = node.configuration.maxRequestSize
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw CouchError.tooLarge
        }
        do {
            let buffer = try await request.collectBody(upTo: limit)
            let bytes = Array(buffer.readableBytesView)
            if let encoding = header(.contentEncoding)?.lowercased(), encoding != "identity" {
                // Cloudant's and other SDKs gzip request bodies; the limit applies to the decoded size too.
                guard encoding == "gzip" || encoding == "x-gzip" || encoding == "deflate" else {
                    throw CouchError(.unsupportedMediaType, "bad_content_type", "Unsupported Content-Encoding: \(encoding)")
                }
                // An empty body is empty however it is marked (CouchDB stores an empty attachment for one).
                if bytes.isEmpty { return bytes }
                do { return try Gzip.decompress(bytes, limit: limit) } catch let e as SetteeError where e.code == .badRequest {
                    throw CouchError.badRequest("Request body is not valid \(encoding) data")
                }
            }
            return bytes
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw CouchError.tooLarge
        } catch is NIOTooManyBytesError {
            // A body collected before the route ran (SetteeHTTP1Channel) reports its excess this way.
            throw CouchError.tooLarge
        }
    }

    /// Reads and parses a JSON body. Empty or malformed → 400 `bad_request`.
    mutating func bodyJSON() async throws -> JSON {
        let bytes = try await bodyBytes()
        return try parseJSON(bytes)
    }

    /// Reads a JSON object body.
    mutating func bodyObject() async throws -> JSONObject {
        guard case .object(let o) = try await bodyJSON() else {
            throw CouchError.badRequest("Request body must be a JSON object")
        }
        return o
    }

    func parseJSON(_ bytes: [UInt8]) throws -> JSON {
        guard !bytes.isEmpty else { throw CouchError.badRequest("Request body is empty; a JSON body is required") }
        do {
            return try JSON.parse(bytes, limits: JSONLimits(maxDepth: node.configuration.maxJSONDepth,
                                                            maxBytes: node.configuration.maxRequestSize))
        } catch {
            // CouchDB's exact reason (clients match on it); what was wrong goes to the debug log.
            throw CouchError.badRequest("invalid UTF-8 JSON")
        }
    }

    /// CouchDB's `validate_ctype`: POSTs that write (`POST /{db}`, `_bulk_docs`) must say `application/json`, else
    /// 415. Besides matching CouchDB, this keeps an HTML form on another site from writing as a signed-in user (a
    /// cross-site form can only send `text/plain`, `multipart/form-data` or `application/x-www-form-urlencoded`).
    func requireJSONContentType() throws {
        guard let type = header(.contentType)?.lowercased(), type.hasPrefix("application/json") else {
            throw CouchError.badContentType
        }
    }

    /// A write's success status under CouchDB's quorum rule: one node holds one copy of each document, so a
    /// request asking for more copies (`w` > 1) than were written is 202 Accepted instead of `status`.
    func quorumStatus(_ status: HTTPResponse.Status) -> HTTPResponse.Status {
        guard let w = query["w"].flatMap(Int.init), w > 1 else { return status }
        return .accepted
    }

    /// An absolute URL for a path on this node, as CouchDB writes `Location`: the scheme, then the host from
    /// `X-Forwarded-Host` (or `X-Host`) when a proxy sent one, else from `Host`.
    func absoluteURL(_ path: String) -> String {
        let forwarded = header(HTTPField.Name("X-Forwarded-Host")!) ?? header(HTTPField.Name("X-Host")!)
        let host = forwarded ?? request.head.authority ?? header(HTTPField.Name("Host")!)
            ?? "\(node.configuration.host):\(node.configuration.port)"
        let scheme = header(HTTPField.Name("X-Forwarded-Proto")!) ?? (node.configuration.usesTLS ? "https" : "http")
        return "\(scheme)://\(host)\(path)"
    }

    /// A document id or attachment name as one path segment (`/` escaped, as CouchDB escapes it).
    static func escapePathSegment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/+"))) ?? text
    }

    /// Whether the client accepts a content type (`Accept` header contains it).
    func accepts(_ type: String) -> Bool {
        header(.accept)?.lowercased().contains(type) ?? false
    }
}

/// Runs a bounded, microseconds-long store read on the calling task. Use only for single-row reads;
/// anything that scans, waits for the writer or may take long goes through ``blocking(_:)``.
@inline(__always)
func pointRead<T>(_ work: () throws -> T) throws -> T {
    try work()
}

/// Runs blocking store work off the event loop and the cooperative pool.
@inline(__always)
func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await Database.offload(work)
}

extension HTTPFields {
    /// The field's value, as `self[name]` gives it (several fields of the name joined), without that subscript's
    /// generic join in the usual case of none or one.
    func value(of name: HTTPField.Name) -> String? {
        var found: String?
        for field in self where field.name == name {
            if found != nil { return self[name] }
            found = field.value
        }
        return found
    }

    /// Sets a field, as the subscript setter does: appended when absent (the common case, without the setter's
    /// search-and-replace), replaced when present.
    mutating func add(_ name: HTTPField.Name, _ value: String) {
        if contains(name) { self[name] = value } else { append(HTTPField(name: name, value: value)) }
    }
}

/// Entity tags as CouchDB compares them in `If-None-Match` / `If-Match`: a list of tags, `*`, and weak tags (`W/"…"`)
/// matching their strong form.
enum ETags {
    static func matches(_ header: String, _ etag: String) -> Bool {
        let wanted = strip(etag)
        for part in header.split(separator: ",") {
            let tag = part.trimmingCharacters(in: .whitespaces)
            if tag == "*" || strip(tag) == wanted { return true }
        }
        return false
    }

    private static func strip(_ tag: String) -> String {
        var t = Substring(tag)
        if t.hasPrefix("W/") { t = t.dropFirst(2) }
        return t.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
    }
}
