import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SetteeCore
import Testing

@testable import SetteeServer

// Shared helpers for the in-process route tests: a node on a temporary data directory, a small client
// wrapper that speaks JSON, and assertions for CouchDB's error shape.

let testAdmin = (username: "admin", password: "s3cret")

/// A temporary data directory, removed on deinit.
final class TempDataDir: @unchecked Sendable {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "settee-server-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A node on a fresh temporary directory. `admin: true` configures `testAdmin` (auth enforced).
func makeNode(admin: Bool = false, maxDocumentSize: Int = 8 << 20, dir: TempDataDir) throws -> Node {
    try Node(configuration: ServerConfiguration(dataDirectory: dir.path, port: 0,
                                                admin: admin ? testAdmin : nil,
                                                maxDocumentSize: maxDocumentSize))
}

/// Runs `body` against the HTTP application of a fresh node (router mode unless told otherwise).
func withServer(admin: Bool = false, maxDocumentSize: Int = 8 << 20, mode: TestingSetup = .router,
                _ body: @escaping @Sendable (Couch) async throws -> Void) async throws {
    let dir = TempDataDir()
    let node = try makeNode(admin: admin, maxDocumentSize: maxDocumentSize, dir: dir)
    try await withServer(node: node, mode: mode, body)
    node.closeAll()
    _ = dir
}

/// Runs `body` against the HTTP application of `node`.
func withServer(node: Node, mode: TestingSetup = .router,
                _ body: @escaping @Sendable (Couch) async throws -> Void) async throws {
    let app = try SetteeServer.application(node: node)
    try await app.test(mode) { client in
        try await body(Couch(client: client, node: node))
    }
}

/// An HTTP response with its body decoded as JSON on demand.
struct HTTPResult: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let bytes: [UInt8]

    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// The body parsed with `SetteeCore.JSON.parse`; `.null` (and a recorded issue) if it is not JSON.
    var json: JSON {
        do { return try JSON.parse(bytes) } catch {
            Issue.record("response body is not JSON (\(error)): \(text.prefix(300))")
            return .null
        }
    }

    subscript(key: String) -> JSON? { json[key] }

    func header(_ name: HTTPField.Name) -> String? { headers[name] }
}

/// A thin JSON-speaking wrapper around the HummingbirdTesting client.
struct Couch: Sendable {
    let client: any TestClientProtocol
    let node: Node
    /// Headers sent with every request (e.g. an Authorization header).
    var defaultHeaders: HTTPFields = [:]

    func request(_ method: HTTPRequest.Method, _ uri: String, body: [UInt8]? = nil,
                 headers: HTTPFields = [:]) async throws -> HTTPResult {
        var all = defaultHeaders
        for field in headers { all[field.name] = field.value }
        let response = try await client.execute(uri: uri, method: method, headers: all,
                                                body: body.map { ByteBuffer(bytes: $0) })
        return HTTPResult(status: response.status, headers: response.headers,
                          bytes: Array(response.body.readableBytesView))
    }

    /// A request with a JSON (text) body, sent as `application/json`.
    func request(_ method: HTTPRequest.Method, _ uri: String, json: String,
                 headers: HTTPFields = [:]) async throws -> HTTPResult {
        var h = headers
        if h[.contentType] == nil { h[.contentType] = "application/json" }
        return try await request(method, uri, body: Array(json.utf8), headers: h)
    }

    func get(_ uri: String, headers: HTTPFields = [:]) async throws -> HTTPResult {
        try await request(.get, uri, headers: headers)
    }

    func put(_ uri: String, _ json: String, headers: HTTPFields = [:]) async throws -> HTTPResult {
        try await request(.put, uri, json: json, headers: headers)
    }

    func post(_ uri: String, _ json: String, headers: HTTPFields = [:]) async throws -> HTTPResult {
        try await request(.post, uri, json: json, headers: headers)
    }

    func delete(_ uri: String, headers: HTTPFields = [:]) async throws -> HTTPResult {
        try await request(.delete, uri, headers: headers)
    }

    /// Creates a database, expecting 201.
    func createDB(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let r = try await request(.put, "/\(name)")
        #expect(r.status == .created, "PUT /\(name): \(r.text)", sourceLocation: sourceLocation)
    }

    /// Writes a document, expecting 201, and returns its new revision.
    @discardableResult
    func putDoc(_ path: String, _ json: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let r = try await put(path, json)
        #expect(r.status == .created, "PUT \(path): \(r.text)", sourceLocation: sourceLocation)
        return r["rev"]?.stringValue ?? ""
    }
}

/// Basic auth header value.
func basicAuth(_ user: String, _ password: String) -> String {
    "Basic " + Base64.encode(Array("\(user):\(password)".utf8))
}

/// Expects a CouchDB error: the status, and a body that is exactly `{"error": …, "reason": …}` (both strings).
func expectError(_ r: HTTPResult, _ status: HTTPResponse.Status, _ error: String, reason: String? = nil,
                 sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.status == status, "status \(r.status) body \(r.text)", sourceLocation: sourceLocation)
    guard case .object(let o) = r.json else {
        Issue.record("error body is not an object: \(r.text)", sourceLocation: sourceLocation)
        return
    }
    #expect(Set(o.keys) == ["error", "reason"], "error body keys: \(r.text)", sourceLocation: sourceLocation)
    #expect(o["error"]?.stringValue == error, "error term in \(r.text)", sourceLocation: sourceLocation)
    #expect(o["reason"]?.stringValue != nil, sourceLocation: sourceLocation)
    if let reason {
        #expect(o["reason"]?.stringValue == reason, sourceLocation: sourceLocation)
    }
}

/// Percent-encodes a query value (JSON in URLs).
func q(_ value: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
}

/// `ids` of the rows of an `_all_docs` or `_changes` response.
func rowIDs(_ json: JSON, _ key: String = "rows") -> [String] {
    (json[key]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
}

/// A sequence as an integer, whether the server sent it as a number or a string.
func seqNumber(_ json: JSON?) -> Int64? {
    guard let json else { return nil }
    if let n = json.intValue { return n }
    if let s = json.stringValue { return Int64(s.prefix { $0.isNumber }) }
    return nil
}

/// Converts LF to CRLF (multipart bodies written as multi-line literals).
func crlfBytes(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    for b in s.utf8 {
        if b == UInt8(ascii: "\n") { out.append(UInt8(ascii: "\r")) }
        out.append(b)
    }
    return out
}

/// A 32-hex-digit fake revision digest made of one repeated character.
func digest(_ c: Character) -> String { String(repeating: c, count: 32) }
