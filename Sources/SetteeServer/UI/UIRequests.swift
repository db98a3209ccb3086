import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeCore
import Synchronization

/// The answer of a CouchDB API call the admin UI made on the signed-in user's behalf.
struct APIResult: Sendable {
    let status: Int
    let headers: HTTPFields
    let bytes: [UInt8]

    var ok: Bool { (200..<300).contains(status) }
    var json: JSON { (try? JSON.parse(bytes)) ?? .null }
    var text: String { String(decoding: bytes, as: UTF8.self) }
    /// CouchDB's `reason` (or the body) for a failed call, with the status: what the page shows.
    var message: String {
        let j = json
        if let reason = j["reason"]?.stringValue {
            return "\(status) \(j["error"]?.stringValue ?? "error"): \(reason)"
        }
        return "\(status): \(text)"
    }
}

/// Collects a response body in memory (the UI's internal API calls and JSONP; never used for continuous feeds).
final class ByteSink: Sendable {
    private let collected = Mutex<[UInt8]>([])
    /// What has been written so far.
    var bytes: [UInt8] { collected.withLock { $0 } }
    func append(_ buffer: ByteBuffer) { collected.withLock { $0.append(contentsOf: buffer.readableBytesView) } }
}

struct CollectingWriter: ResponseBodyWriter {
    let sink: ByteSink
    mutating func write(_ buffer: ByteBuffer) async throws { sink.append(buffer) }
    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

extension AdminUI {
    /// Calls the node's own CouchDB API as the signed-in user: the same route handlers, the same authorization
    /// (`Auth.authorize` runs inside `dispatch`), the same errors. Nothing goes over a socket.
    func api(_ method: HTTPRequest.Method, _ segments: [String], query: String? = nil, body: JSON? = nil,
             rawBody: [UInt8]? = nil, contentType: String = "application/json") async -> APIResult {
        let path = "/" + segments.map(AdminUI.encodeSegment).joined(separator: "/")
        var head = HTTPRequest(method: method, scheme: "http", authority: "localhost",
                               path: path + (query.map { "?" + $0 } ?? ""))
        let bytes = rawBody ?? body?.serializedBytes ?? []
        if !bytes.isEmpty { head.headerFields[.contentType] = contentType }
        head.headerFields[.contentLength] = String(bytes.count)
        head.headerFields[.accept] = "application/json"
        if let cookie = call.header(.cookie) { head.headerFields[.cookie] = cookie }
        let request = Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: bytes)))
        var inner = Call(request: request, node: call.node, query: QueryOptions(query), segments: segments,
                         remoteAddress: call.remoteAddress)
        inner.userCtx = call.userCtx
        let response: Response
        do {
            response = try await responder.dispatch(&inner)
        } catch {
            response = Reply.error(CouchError.from(any: error))
        }
        let sink = ByteSink()
        do { try await response.body.write(CollectingWriter(sink: sink)) } catch {}
        return APIResult(status: Int(response.status.code), headers: response.headers, bytes: sink.bytes)
    }

    /// Percent-encodes one path segment (so `_design/x` stays one segment and `/` inside ids survives).
    static func encodeSegment(_ s: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#%+")  // a raw `+` in a path means a space (decode_plus_to_space)
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    /// Encodes a query-string value.
    static func encodeQuery(_ s: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&;=+#?/")  // `;` separates pairs as `&` does (QueryOptions.pairs)
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }
}

/// An `application/x-www-form-urlencoded` body.
struct FormData: Sendable {
    private(set) var values: [String: String] = [:]

    init(_ bytes: [UInt8]) {
        for (key, value) in QueryOptions.pairs(String(decoding: bytes, as: UTF8.self)) where values[key] == nil {
            values[key] = value
        }
    }

    init(query: String?) { self.init(Array((query ?? "").utf8)) }

    subscript(_ key: String) -> String? { values[key] }

    /// A trimmed, non-empty value.
    func text(_ key: String) -> String? {
        guard let v = values[key]?.trimmingCharacters(in: .whitespacesAndNewlines), !v.isEmpty else { return nil }
        return v
    }

    func flag(_ key: String) -> Bool { ["on", "true", "1", "yes"].contains(values[key]?.lowercased() ?? "") }
}

/// Cross-site request forgery defence for the UI's forms: every POST carries a token bound to the caller's
/// credentials (the session cookie, or the Authorization header) and keyed by the node secret; and a POST whose
/// `Origin` names another site is refused. The session cookie is also `SameSite=Lax`.
enum CSRF {
    /// Bound to who the caller is (not to the exact cookie, which the node re-issues while a session is used, so a
    /// page rendered before a refresh still posts). Unforgeable without the node secret.
    static func token(for call: Call) -> String {
        let identity: String
        if let name = call.userCtx.name { identity = "user:" + name }
        else if !call.node.config.hasAdmins { identity = "admin-party" }
        else { identity = "anonymous:" + call.remoteAddress }
        let key = SymmetricKey(data: call.node.cookies.secret)
        let mac = HMAC<SHA256>.authenticationCode(for: Array(("settee-ui-csrf:" + identity).utf8), using: key)
        return Hex.encode(Array(Array(mac).prefix(20)))
    }

    /// Refuses a request whose `Origin` header names another host than the one it was sent to.
    static func checkOrigin(_ call: Call) throws {
        guard let origin = call.header(.origin) else { return }
        // `null` is what sandboxed frames and data: pages send: never this node's own pages.
        // HTTP/1's Host header arrives as the request's authority.
        let host = call.request.head.authority ?? call.header(HTTPField.Name("Host")!) ?? ""
        let originHost = origin.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first.map(String.init) ?? ""
        guard originHost.lowercased() == host.lowercased() else {
            throw CouchError(.forbidden, "forbidden", "Cross-origin form submission refused (Origin \(origin))")
        }
    }

    static func check(_ call: Call, _ form: FormData) throws {
        try checkOrigin(call)
        guard let sent = form["_csrf"], Passwords.constantTimeEquals(sent, token(for: call)) else {
            throw CouchError(.forbidden, "forbidden", "The form expired or did not come from this node's UI: reload the page and try again.")
        }
    }
}

/// Small rendering helpers.
enum UIFormat {
    /// JSON with two-space indentation, keys in document order.
    static func pretty(_ value: JSON, indent: Int = 0, into out: inout String) {
        let pad = String(repeating: "  ", count: indent + 1)
        let close = String(repeating: "  ", count: indent)
        switch value {
        case .object(let o):
            if o.isEmpty { out += "{}"; return }
            out += "{\n"
            for (i, (k, v)) in o.enumerated() {
                out += pad + JSON.string(k).jsonString + ": "
                pretty(v, indent: indent + 1, into: &out)
                out += i == o.count - 1 ? "\n" : ",\n"
            }
            out += close + "}"
        case .array(let a):
            if a.isEmpty { out += "[]"; return }
            if a.allSatisfy({ if case .object = $0 { return false }; if case .array = $0 { return false }; return true }),
               a.count <= 16 {
                out += "[" + a.map(\.jsonString).joined(separator: ", ") + "]"
                return
            }
            out += "[\n"
            for (i, v) in a.enumerated() {
                out += pad
                pretty(v, indent: indent + 1, into: &out)
                out += i == a.count - 1 ? "\n" : ",\n"
            }
            out += close + "]"
        default:
            out += value.jsonString
        }
    }

    static func pretty(_ value: JSON) -> String {
        var s = ""
        pretty(value, into: &s)
        return s
    }

    /// A cell of the query results table: strings as they are, other values as compact JSON.
    static func cell(_ value: JSON?) -> String {
        guard let value else { return "" }
        if case .string(let s) = value { return s }
        if case .null = value { return "null" }
        let text = value.jsonString
        return text.count > 200 ? String(text.prefix(200)) + "…" : text
    }

    static func bytes(_ n: Int64?) -> String {
        guard let n else { return "—" }
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var v = Double(n), u = 0
        while v >= 1024 && u < units.count - 1 { v /= 1024; u += 1 }
        return u == 0 ? "\(n) B" : String(format: "%.1f %@", v, units[u])
    }

    static func shortRev(_ rev: String) -> String {
        guard let dash = rev.firstIndex(of: "-") else { return rev }
        let digest = rev[rev.index(after: dash)...]
        return rev[..<dash] + "-" + digest.prefix(7)
    }
}
