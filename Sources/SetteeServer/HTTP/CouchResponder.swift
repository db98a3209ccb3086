import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import SetteeCore
import SetteeStore
import Synchronization

/// The HTTP front door: authenticates, dispatches CouchDB's URL space to the route handlers, renders errors,
/// records metrics and the access log.
struct CouchResponder: HTTPResponder {
    typealias Context = SetteeRequestContext
    let node: Node

    func respond(to request: Request, context: SetteeRequestContext) async throws -> Response {
        let started = DispatchTime.now().uptimeNanoseconds
        let connections = node.connections
        connections.requestStarted()
        var streaming = false
        defer { if !streaming { connections.requestFinished() } }
        var request = request
        if request.method == .post, let override = request.headers[CouchResponder.methodOverride],
           let method = HTTPRequest.Method(override.uppercased()) {
            // CouchDB lets clients that can only POST name the method in X-HTTP-Method-Override.
            var head = request.head
            head.method = method
            request = Request(head: head, body: request.body)
        }
        // The settings this request runs with, read once (a snapshot; a config change applies to the next request).
        let settings = node.configuration
        var call = Call(request: request, node: node, query: QueryOptions(request.uri.query),
                        segments: CouchResponder.segments(of: request.uri.path, plusIsSpace: settings.decodePlusToSpace),
                        remoteAddress: context.clientAddress)
        var response: Response
        let cors = settings.cors
        if let cors, let preflight = cors.preflight(request) {
            call.route = .preflight
            response = preflight
        } else {
            do {
                try await Auth.authenticate(&call)
                response = try await dispatch(&call)
            } catch {
                let couch = CouchError.from(any: error)
                if couch.status == .internalServerError {
                    context.logger.error("internal error", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
                }
                response = Reply.error(couch)
            }
            if call.method == .get, settings.allowJSONP, let callback = call.query["callback"] {
                response = await CouchResponder.jsonp(response, callback: callback, call: call)
            }
            cors?.decorate(&response, origin: request.headers[.origin])
        }
        if let cookie = call.setCookie, response.headers[.setCookie] == nil { response.headers[.setCookie] = cookie }
        // CouchDB's request id (the client's own when it sent one) and body time on every response.
        response.headers.append(HTTPField(name: CouchResponder.requestID,
                                          value: request.headers[CouchResponder.requestID] ?? CouchResponder.newRequestID()))
        response.headers.append(HTTPField(name: CouchResponder.bodyTime, value: "0"))
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        node.metrics.request(route: call.route.rawValue, method: request.method.rawValue, status: response.status.code,
                             seconds: seconds)
        context.logger.info("\(request.method) \(request.uri) \(response.status.code)",
                            metadata: ["ms": "\(Int(seconds * 1000))", "user": "\(call.user ?? "-")"])
        if response.body.contentLength == nil {
            // A streamed body (a feed, a large attachment): the request is served until it is written.
            // It counts as served until the body is released: written, or dropped unwritten.
            streaming = true
            let body = response.body
            let served = ServedRequest(connections)
            response.body = ResponseBody { writer in
                withExtendedLifetime(served) {}
                try await body.write(writer)
            }
        }
        return response
    }

    /// CouchDB's JSONP (`[chttpd] allow_jsonp`): a JSON answer to a GET with `callback=NAME` becomes
    /// `/* CouchDB */NAME(…);` as `application/javascript`. Live feeds are not wrapped. A name that isn't a
    /// JavaScript identifier path is 400.
    static func jsonp(_ response: Response, callback: String, call: Call) async -> Response {
        guard callback.range(of: #"^[A-Za-z_$][A-Za-z0-9_$.\[\]]*$"#, options: .regularExpression) != nil else {
            return Reply.error(CouchError(.badRequest, "bad_request", "invalid callback name"))
        }
        guard response.headers[.contentType]?.hasPrefix("application/json") == true,
              ["normal", nil].contains(call.query["feed"]) else { return response }
        let sink = ByteSink()
        let body = response.body
        do { try await body.write(CollectingWriter(sink: sink)) } catch { return response }
        var out = Array("/* CouchDB */\(callback)(".utf8)
        var json = sink.bytes
        while let last = json.last, last == 0x0a || last == 0x0d { json.removeLast() }
        out += json
        out += Array(");".utf8)
        var headers = response.headers
        headers[.contentType] = "application/javascript"
        headers[.contentLength] = nil
        headers[.transferEncoding] = nil
        return Response(status: response.status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: out)))
    }

    static let methodOverride = HTTPField.Name("X-HTTP-Method-Override")!
    static let requestID = HTTPField.Name("X-Couch-Request-ID")!
    static let bodyTime = HTTPField.Name("X-CouchDB-Body-Time")!

    /// A request id as CouchDB makes them: 10 hex digits, random-looking. A SplitMix64 step over a per-process
    /// counter with a random start: distinct ids without a system call per request.
    static func newRequestID() -> String {
        var z = requestCounter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        let text = String(z & 0xff_ffff_ffff, radix: 16)
        return String(repeating: "0", count: 10 - text.count) + text
    }

    private static let requestCounter = Atomic<UInt64>(UInt64.random(in: .min ... .max))

    /// Splits the raw path on `/` and percent-decodes each segment (so `%2F` stays inside a segment).
    ///
    /// Scans the path's UTF-8 bytes once (a `Character`-wise split costs more than the rest of a point read's
    /// routing); a segment without `%` is copied as is.
    /// With `plusIsSpace` (CouchDB's `decode_plus_to_space`), a raw `+` becomes a space; `%2B` stays a `+`.
    static func segments(of path: String, plusIsSpace: Bool = false) -> [String] {
        var path = path
        return path.withUTF8 { bytes in
            var result: [String] = []
            var start = 0
            var escaped = false
            var plus = false
            for i in 0...bytes.count {
                let byte: UInt8 = i < bytes.count ? bytes[i] : UInt8(ascii: "/")
                if byte == UInt8(ascii: "%") { escaped = true }
                if byte == UInt8(ascii: "+") { plus = plusIsSpace }
                guard byte == UInt8(ascii: "/") else { continue }
                if i > start {
                    var raw = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
                    if plus { raw = raw.replacingOccurrences(of: "+", with: " ") }
                    result.append(escaped ? (raw.removingPercentEncoding ?? raw) : raw)
                }
                plus = false
                start = i + 1
                escaped = false
            }
            return result
        }
    }

    /// Routes a request: the route table (``Route/init(method:path:)``) names what it asks for, and the handler of
    /// that route answers it.
    func dispatch(_ call: inout Call) async throws -> Response {
        let s = call.segments
        call.route = Route(method: call.method, path: s)
        switch call.route {
        case .root: return try ServerRoutes.welcome(call)
        case .utils: return try await AdminUI.handle(&call, responder: self)
        case .up, .allDbs, .dbsInfo, .uuids, .activeTasks, .metrics, .session, .replicate, .scheduler, .membership,
             .dbUpdates, .unknown, .config, .stats, .system, .versions:
            if s[0].hasPrefix("_") && !SystemDatabase.isNamed(s[0]) { return try await ServerRoutes.handle(&call) }
        default: break
        }
        let target = try Keyspace(s[0])
        await call.node.openOffTheCallersThread(target.database)
        try Auth.authorize(&call, target)
        try await SyncGate.admit(&call, target)
        if s.count == 1 {
            return try await DatabaseRoutes.handle(&call, target)
        }
        let second = s[1]
        switch call.route {
        case .doc where second.hasPrefix("_design/"):
            // `/{db}/_design%2F{ddoc}`: the design document named with an escaped slash, as CouchDB allows.
            return try await DocumentRoutes.handle(&call, target, id: second)
        case .doc where second == "_design":
            return try await DocumentRoutes.handle(&call, target, id: "_design/" + s[2])
        case .doc:
            return try await DocumentRoutes.handle(&call, target, id: second)
        case .attachment where second == "_design":
            return try await AttachmentRoutes.handle(&call, target, id: "_design/" + s[2], name: s[3...].joined(separator: "/"))
        case .attachment:
            return try await AttachmentRoutes.handle(&call, target, id: second, name: s[2...].joined(separator: "/"))
        case _ where second == "_partition":
            return try await PartitionRoutes.handle(&call, target, s)
        case .allDocs where second == "_design_docs": return try await BulkRoutes.allDocs(&call, target, designOnly: true)
        case .allDocs where second == "_local_docs": return try await BulkRoutes.localDocs(&call, target)
        case .allDocs: return try await BulkRoutes.allDocs(&call, target)
        case .bulkDocs: return try await BulkRoutes.bulkDocs(&call, target)
        case .bulkGet: return try await BulkRoutes.bulkGet(&call, target)
        case .revsDiff: return try await BulkRoutes.revsDiff(&call, target, missingRevs: second == "_missing_revs")
        case .changes: return try await ChangesRoutes.handle(&call, target)
        case .blipsync: return try await BLIPRoutes.sync(&call, target)
        case .local:
            guard s.count == 3 else {
                throw CouchError.badRequest(s.count == 2 ? "Invalid _local document id." : "_local documents do not accept attachments.")
            }
            return try await LocalRoutes.handle(&call, target, id: "_local/" + s[2])
        case .view: return try await ViewRoutes.query(&call, target, designID: "_design/" + s[2], view: s[4])
        case .designInfo: return try await ViewRoutes.info(&call, target, designID: "_design/" + s[2])
        case .show, .update:
            guard s.count >= 5, !s[4].isEmpty else { throw CouchError.notFound("Invalid path.") }
            let docID = s.count > 5 ? s[5...].joined(separator: "/") : nil
            if call.route == .show {
                return try await DesignFunctionRoutes.show(&call, target, designID: "_design/" + s[2], name: s[4], docID: docID)
            }
            return try await DesignFunctionRoutes.update(&call, target, designID: "_design/" + s[2], name: s[4], docID: docID)
        case .list:
            guard s.count == 6 || s.count == 7, !s[4].isEmpty else { throw CouchError.notFound("Invalid path.") }
            let id = "_design/" + s[2]
            let viewDesign = s.count == 7 ? "_design/" + s[5] : id
            return try await DesignFunctionRoutes.list(&call, target, designID: id, name: s[4], viewDesignID: viewDesign,
                                                       view: s[s.count - 1])
        case .rewrite: return try await rewrite(&call, target, designID: "_design/" + s[2])
        case .query: return try await QueryRoutes.query(&call, target)
        case .index where second == "_indexes" && s.count == 4:
            return try await VectorRoutes.handle(&call, target, name: s[2], action: s[3])
        case .index where second == "_indexes":
            return try await QueryRoutes.index(&call, target, name: s.count == 3 ? s[2] : nil)
        case .index: return try await MangoRoutes.index(&call, target, s)
        case .find: return try await MangoRoutes.find(&call, target, explain: false)
        case .explain: return try await MangoRoutes.find(&call, target, explain: true)
        case .sync: return try await SyncRoutes.handle(&call, target, s)
        case .revsLimit, .compact, .ensureFullCommit, .purge, .security, .viewCleanup:
            return try await DatabaseRoutes.handleSub(&call, target, second)
        default:
            // What the table names no endpoint of: CouchDB's answers.
            if second == "_local/" { throw CouchError.badRequest("Invalid _local document id.") }
            if second == "_temp_view" && s.count == 2 {
                throw CouchError(.gone, "gone", "Temporary views are not supported in CouchDB")
            }
            if second == "_design" {
                guard s.count >= 4 else { throw CouchError.notFound() }
                if s.count == 4 && s[3] == "_view" { throw CouchError.notFound("missing_named_view") }
                throw CouchError(.notFound, "not_found", "\(s[3]) is not supported on this node (views: /{db}/_design/{ddoc}/_view/{view})")
            }
            if second.hasPrefix("_") && s.count == 2 {
                throw CouchError(.badRequest, "illegal_docid", "Only reserved document ids may start with underscore.")
            }
            throw CouchError.notFound()
        }
    }
}

/// `/{db}` or `/{db}.{scope}.{collection}` (CouchDB names cannot contain dots, so a dot means a keyspace).
struct Keyspace: Sendable {
    let database: String
    let scope: String
    let collection: String

    init(_ segment: String) throws {
        // The plain `/{db}` (most requests) without splitting.
        let parts = segment.utf8.contains(UInt8(ascii: "."))
            ? segment.split(separator: ".", omittingEmptySubsequences: false).map(String.init) : [segment]
        switch parts.count {
        case 1: (database, scope, collection) = (parts[0], "_default", "_default")
        case 2: (database, scope, collection) = (parts[0], "_default", parts[1])
        case 3: (database, scope, collection) = (parts[0], parts[1], parts[2])
        default: throw CouchError(.badRequest, "illegal_database_name", "Invalid keyspace '\(segment)'")
        }
        try Node.validateName(database)
        explicit = parts.count > 1
    }

    /// Whether this is the plain `/{db}` form (the database itself, not an explicit keyspace).
    var isDefaultCollection: Bool { scope == "_default" && collection == "_default" && !explicit }
    /// True for `/{db}.{scope}.{collection}` and `/{db}.{collection}`.
    private(set) var explicit = false

    /// Opens the database and collection; a missing one is 404.
    func open(_ node: Node) throws -> (Database, SetteeStore.Collection) {
        if scope == "_default" && collection == "_default" { return try node.defaultCollection(of: database) }
        let db = try node.database(database)
        guard let c = try db.collection(name: collection, scope: scope) else {
            throw CouchError(.notFound, "not_found", "Collection \(scope).\(collection) does not exist.")
        }
        return (db, c)
    }
}

/// Hummingbird's request context plus the client's address (for lockout and the access log).
struct SetteeRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The peer's IP address without port ("unknown" when the transport has none, as in in-process tests).
    let clientAddress: String

    init(source: ApplicationRequestContextSource) {
        self.init(source: source, clientAddress: source.channel.remoteAddress?.ipAddress ?? "unknown")
    }

    /// With the peer's address already known (a connection reads it once, not per request).
    init(source: ApplicationRequestContextSource, clientAddress: String) {
        coreContext = .init(source: source)
        self.clientAddress = clientAddress
    }
}
