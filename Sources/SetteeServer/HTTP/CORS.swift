import Foundation
import HTTPTypes
import Hummingbird

/// Cross-origin resource sharing as CouchDB does it (`[chttpd] enable_cors`, `[cors]`): off by default; when on,
/// a preflight `OPTIONS` from an allowed origin is answered without authentication, and every response to an
/// allowed origin carries `Access-Control-Allow-Origin` (the origin itself when credentials are allowed, since
/// `*` can't be combined with them), `Access-Control-Expose-Headers` and, if enabled,
/// `Access-Control-Allow-Credentials`. Other origins get no CORS headers, so browsers keep their pages out.
public struct CORSConfiguration: Sendable {
    /// Allowed origins (`scheme://host[:port]`), or `["*"]` for any.
    public var origins: [String]
    /// Whether browsers may send cookies / basic auth with cross-origin requests (CouchDB's `credentials`).
    public var credentials: Bool
    /// Methods allowed in preflight answers.
    public var methods: [String] = ["GET", "PUT", "POST", "HEAD", "DELETE"]
    /// Request headers allowed in preflight answers.
    public var headers: [String] = ["accept", "authorization", "content-type", "origin", "referer", "if-match",
                                    "if-none-match", "x-requested-with"]
    /// Seconds browsers may cache a preflight answer.
    public var maxAge: Int = 600

    public init(origins: [String], credentials: Bool = false) {
        self.origins = origins
        self.credentials = credentials
    }

    /// Response headers scripts may read (CouchDB's list plus Location).
    static let exposed = "content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time, location"

    func allows(_ origin: String) -> Bool {
        origins.contains("*") || origins.contains { $0.caseInsensitiveCompare(origin) == .orderedSame }
    }

    /// The preflight answer for an allowed origin, or nil when the request is not a preflight.
    func preflight(_ request: Request) -> Response? {
        guard request.method == .options, let origin = request.headers[.origin],
              request.headers[.accessControlRequestMethod] != nil else { return nil }
        guard allows(origin) else {
            // Not an allowed origin: no CORS headers, so the browser refuses the real request.
            return Response(status: .noContent)
        }
        var headers = HTTPFields()
        headers[.accessControlAllowOrigin] = allowOriginValue(origin)
        headers[.accessControlAllowMethods] = methods.joined(separator: ", ")
        headers[.accessControlAllowHeaders] = allowedHeaders(for: request)
        headers[.accessControlMaxAge] = String(maxAge)
        if credentials { headers[.accessControlAllowCredentials] = "true" }
        headers[.vary] = "Origin"
        headers[.contentLength] = "0"
        return Response(status: .ok, headers: headers)
    }

    /// The allowed headers: the configured ones, plus those the browser asked for that are in the list.
    private func allowedHeaders(for request: Request) -> String {
        let asked = (request.headers[.accessControlRequestHeaders] ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
        var out = headers
        for h in asked where headers.contains(h) && !out.contains(h) { out.append(h) }
        return out.joined(separator: ", ")
    }

    private func allowOriginValue(_ origin: String) -> String {
        origins.contains("*") && !credentials ? "*" : origin
    }

    /// Adds the CORS headers to a response for an allowed origin.
    func decorate(_ response: inout Response, origin: String?) {
        guard let origin, allows(origin) else { return }
        response.headers[.accessControlAllowOrigin] = allowOriginValue(origin)
        response.headers[.accessControlExposeHeaders] = Self.exposed
        if credentials { response.headers[.accessControlAllowCredentials] = "true" }
        if response.headers[.vary] == nil { response.headers[.vary] = "Origin" }
    }
}
