public import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
public import SetteeCore
import SetteeStore
import Synchronization

/// A database on a CouchDB-compatible server (Settee, Apache CouchDB, PouchDB Server) as a replication
/// endpoint, spoken to over HTTP/1.1 with AsyncHTTPClient: one keep-alive connection pool per process, gzip
/// responses, basic, cookie-session or bearer authentication, connect and read timeouts.
///
/// Credentials may sit in the URL (`http://user:pass@host:5984/db`); they are sent as a basic `Authorization`
/// header and never appear in ``identity`` or ``displayName``.
///
/// A `ws://` or `wss://` URL names a database served over Couchbase Lite's replication protocol instead (BLIP over a
/// WebSocket at `{url}/_blipsync`: Sync Gateway, `settee serve`); every ``Endpoint`` call then goes over that
/// protocol (see ``speaksCouchbaseLiteProtocol``), with the same credentials, headers and TLS settings.
///
/// HTTPS peers' certificates are verified against the system's trust store, or against a CA bundle
/// (`trustedRootCertificatesPath`) for peers with certificates from a private CA; a certificate that does not
/// verify fails the replication with a ``ReplicationError/Kind/tls`` error. Credentials (user info in the URL,
/// `authentication`, or an `Authorization`/`Cookie` header) are never sent over plain `http://` to a host that
/// is not loopback unless `allowInsecureCredentials` is set: the initializer throws instead.
public struct RemoteEndpoint: Endpoint {
    /// How to authenticate with the server.
    public enum Authentication: Sendable {
        case none
        /// `Authorization: Basic …` on every request.
        case basic(user: String, password: String)
        /// `POST /_session` once, then the `AuthSession` cookie (renewed after a 401).
        case session(user: String, password: String)
        /// `Authorization: Bearer …` (JWT).
        case bearer(String)
    }

    /// The database URL without credentials, e.g. `http://127.0.0.1:5984/db`.
    /// The database's URL as text, without credentials (Settee's; Couchbase Lite's ``url`` is a `URL`).
    public let urlString: String
    /// The database's URL (Couchbase Lite's `URLEndpoint.url`).
    public var url: URL { URL(string: urlString)! }
    /// The server root, e.g. `http://127.0.0.1:5984`.
    public let serverURL: String
    /// The database name (decoded).
    public let databaseName: String
    public let authentication: Authentication
    /// Extra headers sent with every request.
    public let headers: [(String, String)]
    /// The CA bundle (PEM) HTTPS peers' certificates are verified against; nil means the system's trust store.
    public let trustedRootCertificatesPath: String?
    /// Whether credentials may go over plain HTTP to a host that is not loopback.
    public let allowInsecureCredentials: Bool
    /// The certificate this side presents when an HTTPS peer asks for one (a listener with a
    /// `ListenerCertificateAuthenticator`).
    public let clientCertificate: ClientCertificate?
    let client: HTTPClient
    /// The session cookie and whether the peer lacks `_bulk_get` (tests set that to exercise the fallback).
    let session: SessionCookie
    /// For a `ws://` or `wss://` URL: Couchbase Lite's replication protocol, which every ``Endpoint`` call goes to.
    var blip: BLIPClient?

    /// Whether the endpoint speaks Couchbase Lite's replication protocol (its URL is `ws://` or `wss://`) rather
    /// than CouchDB's.
    public var speaksCouchbaseLiteProtocol: Bool { blip != nil }

    /// - Parameters:
    ///   - url: the database's URL; user info in it becomes basic authentication unless `authentication` is given.
    ///   - client: the HTTP client to use; by default one shared, process-wide pool (one per CA bundle).
    ///   - trustedRootCertificatesPath: a PEM file of CA certificates to verify HTTPS peers against, instead of
    ///     the system's trust store (ignored when `client` is given).
    ///   - allowInsecureCredentials: allow sending credentials over plain `http://` to a host that is not
    ///     loopback (where anyone on the path can read them).
    ///   - clientCertificate: a certificate and key to present to HTTPS peers that ask for one (ignored when
    ///     `client` is given).
    /// - Throws: ``ReplicationError`` `.badRequest` for a URL that is not `http(s)://host[:port]/db` or
    ///   `ws(s)://host[:port]/db`, for credentials that would go over plain HTTP (or `ws://`) to a non-loopback
    ///   host, or for an unreadable CA bundle.
    public init(url: String, authentication: Authentication? = nil, headers: [(String, String)] = [],
                client: HTTPClient? = nil, trustedRootCertificatesPath: String? = nil,
                allowInsecureCredentials: Bool = false, clientCertificate: ClientCertificate? = nil) throws {
        guard var components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              ["http", "https", "ws", "wss"].contains(scheme), components.host?.isEmpty == false
        else { throw ReplicationError(.badRequest, "Not an http(s) or ws(s) database URL: \(RemoteEndpoint.redact(url))") }
        var auth = authentication ?? .none
        if authentication == nil, let user = components.percentEncodedUser {
            auth = .basic(user: user.removingPercentEncoding ?? user,
                          password: (components.percentEncodedPassword ?? "").removingPercentEncoding ?? "")
        }
        if (scheme == "http" || scheme == "ws") && !allowInsecureCredentials, let host = components.host, !RemoteEndpoint.isLoopback(host) {
            let credentialHeader = headers.contains { ["authorization", "cookie"].contains($0.0.lowercased()) }
            if credentialHeader || { if case .none = auth { return false } else { return true } }() {
                throw ReplicationError(.badRequest, "refusing to send credentials over plain HTTP to \(host); "
                    + "use https or allow_insecure_credentials")
            }
        }
        components.user = nil
        components.password = nil
        components.query = nil
        components.fragment = nil
        var path = components.percentEncodedPath
        while path.hasSuffix("/") { path.removeLast() }
        guard let slash = path.lastIndex(of: "/"), slash < path.index(before: path.endIndex) else {
            throw ReplicationError(.badRequest, "The URL names no database: \(RemoteEndpoint.redact(url))")
        }
        let dbSegment = String(path[path.index(after: slash)...])
        components.percentEncodedPath = String(path[..<slash])
        let root = components.string ?? ""
        self.serverURL = root
        self.databaseName = dbSegment.removingPercentEncoding ?? dbSegment
        // Database names may contain '/', which must travel escaped.
        self.urlString = root + "/" + RemoteEndpoint.escapeSegment(self.databaseName)
        self.authentication = auth
        self.headers = headers
        self.trustedRootCertificatesPath = trustedRootCertificatesPath
        self.allowInsecureCredentials = allowInsecureCredentials
        self.clientCertificate = clientCertificate
        if let client {
            self.client = client
        } else if trustedRootCertificatesPath != nil || clientCertificate != nil {
            self.client = try RemoteEndpoint.client(trustingRootCertificatesAt: trustedRootCertificatesPath,
                                                    presenting: clientCertificate)
        } else {
            self.client = RemoteEndpoint.sharedClient
        }
        self.session = SessionCookie()
        self.blip = nil
        if scheme == "ws" || scheme == "wss" { self.blip = try makeBLIPClient(secure: scheme == "wss") }
    }

    /// Whether `host` (as in a URL, IPv6 with or without brackets) is a loopback address or `localhost`.
    public static func isLoopback(_ host: String) -> Bool {
        var h = host.lowercased()
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        if h == "localhost" || h.hasSuffix(".localhost") || h == "::1" || h == "0:0:0:0:0:0:0:1" { return true }
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The process-wide client: keep-alive pool, gzip decompression, 5 s connect and 30 s read timeouts (a silent
    /// peer — a partition — is noticed within 30 s; long polls ask for a 10 s heartbeat to stay alive).
    /// HTTPS peers' certificates are verified against the system's trust store.
    public static let sharedClient: HTTPClient = makeClient(tls: nil)

    private static func makeClient(tls: TLSConfiguration?) -> HTTPClient {
        var config = HTTPClient.Configuration(
            tlsConfiguration: tls,
            timeout: .init(connect: .seconds(5), read: .seconds(30)),
            // A hostile peer's compression bomb stops at the size responses are collected up to anyway.
            decompression: .enabled(limit: .size(1 << 30)))
        // No redirects: a peer must not be able to send our credentials on to another host (or to plain HTTP).
        config.redirectConfiguration = .disallow
        config.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
        // A refused connection fails the request at once (the replicator goes `offline` now, not after the
        // connect timeout): the replication retries with its own backoff, which also covers a flaky connect.
        config.connectionPool.retryConnectionEstablishment = false
        config.httpVersion = .http1Only
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: config)
    }

    private static let caClients = CAClients()

    /// The process-wide client (configured as ``sharedClient``) whose HTTPS peers' certificates are verified
    /// against the CA certificates in the PEM file at `path` instead of the system's trust store (full
    /// verification: chain and host name). One client per distinct path, kept for the life of the process.
    /// - Throws: ``ReplicationError`` `.badRequest` when the file cannot be read or holds no PEM certificate.
    public static func client(trustingRootCertificatesAt path: String) throws -> HTTPClient {
        try client(trustingRootCertificatesAt: path, presenting: nil)
    }

    /// The process-wide client (configured as ``sharedClient``) that verifies HTTPS peers against the CA
    /// certificates at `path` (nil: the system's trust store) and presents `clientCertificate` to peers that ask
    /// for one. One client per distinct combination, kept for the life of the process.
    /// - Throws: ``ReplicationError`` `.badRequest` when a file cannot be read or holds no PEM certificate or key.
    public static func client(trustingRootCertificatesAt path: String?,
                              presenting clientCertificate: ClientCertificate?) throws -> HTTPClient {
        let caPath = path.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        let certPath = clientCertificate.map { URL(fileURLWithPath: $0.certificatePath).standardizedFileURL.path }
        let keyPath = clientCertificate.map { URL(fileURLWithPath: $0.keyPath).standardizedFileURL.path }
        let key = [caPath ?? "", certPath ?? "", keyPath ?? ""].joined(separator: "\u{0}")
        return try caClients.client(for: key) {
            makeClient(tls: try tlsConfiguration(caPath: caPath, certPath: certPath, keyPath: keyPath))
        }
    }

    /// Full verification against the CA certificates at `caPath` (nil: the system's trust store), presenting the
    /// client certificate and key when given.
    static func tlsConfiguration(caPath: String?, certPath: String?, keyPath: String?) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caPath {
            let certificates = try pemCertificates(caPath, what: "the CA bundle")
            tls.trustRoots = .certificates(certificates)
        }
        tls.certificateVerification = .fullVerification
        if let certPath, let keyPath {
            tls.certificateChain = try pemCertificates(certPath, what: "the client certificate").map { .certificate($0) }
            do {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem))
            } catch {
                throw ReplicationError(.badRequest, "cannot read the client key \(keyPath): \(error)")
            }
        }
        return tls
    }

    private static func pemCertificates(_ path: String, what: String) throws -> [NIOSSLCertificate] {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw ReplicationError(.badRequest, "cannot read \(what) \(path): \(error)")
        }
        guard !certificates.isEmpty else { throw ReplicationError(.badRequest, "\(what) \(path) holds no PEM certificate") }
        return certificates
    }

    public var identity: String { blip?.identity ?? urlString }
    public var displayName: String { urlString }

    // MARK: Endpoint

    public func databaseInfo() async throws(ReplicationError) -> EndpointDatabaseInfo {
        if let blip { return try await blip.databaseInfo() }
        return try await ReplicationError.mapping {
            let o = try await jsonObject(.GET, "")
            return EndpointDatabaseInfo(name: o["db_name"]?.stringValue ?? databaseName, updateSeq: o["update_seq"] ?? .int(0),
                                        docCount: o["doc_count"]?.intValue.map { Int($0) },
                                        instanceStartTime: o["instance_start_time"]?.stringValue)
        }
    }

    /// Query parameters of the `PUT /{db}` that creates a missing target (`create_target_params`, e.g.
    /// `partitioned=true`).
    public var creationParameters: [(String, String)] = []

    public func createDatabase() async throws(ReplicationError) {
        if blip != nil {
            throw ReplicationError(.unsupported, "Couchbase Lite's protocol cannot create a database (\(urlString))")
        }
        try await ReplicationError.mapping {
            let r = try await send(.PUT, "", query: creationParameters)
            guard (200..<300).contains(r.status) || r.status == 412 else { throw error(for: r, "PUT \(urlString)") }
        }
    }

    public func changes(_ request: ChangesRequest) async throws(ReplicationError) -> ChangesBatch {
        if let blip { return try await blip.changes(request) }
        return try await ReplicationError.mapping {
            var query: [(String, String)] = [("style", "all_docs"), ("since", request.since.sequenceText),
                                             ("limit", String(request.limit))]
            var deadline: TimeAmount = .seconds(120)
            if case .longpoll(let timeout, let heartbeat) = request.feed {
                query.append(("feed", "longpoll"))
                query.append(("timeout", String(timeout.milliseconds)))
                query.append(("heartbeat", String(heartbeat.milliseconds)))
                // CouchDB keeps a heartbeat feed open until a change comes: the read timeout, not a deadline, guards it.
                deadline = .hours(24)
            }
            var body: JSON?
            if let ids = request.documentIDs {
                query.append(("filter", "_doc_ids"))
                body = ["doc_ids": .array(ids.map(JSON.string))]
            } else if let selector = request.selector {
                query.append(("filter", "_selector"))
                body = ["selector": selector]
            } else if let filter = request.filter {
                query.append(("filter", filter))
                for (k, v) in request.queryParams.sorted(by: { $0.key < $1.key }) where k != "filter" { query.append((k, v)) }
            }
            let o = try await jsonObject(body == nil ? .GET : .POST, "/_changes", query: query, body: body, deadline: deadline)
            guard let results = o["results"]?.arrayValue else {
                throw ReplicationError(.transient, "_changes response without results from \(urlString)")
            }
            var entries: [ChangeEntry] = []
            entries.reserveCapacity(results.count)
            for case .object(let row) in results {
                guard let id = row["id"]?.stringValue, let seq = row["seq"] else { continue }
                let revs = (row["changes"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue.flatMap(RevID.init) }
                entries.append(ChangeEntry(seq: seq, id: id, revs: revs, deleted: row["deleted"]?.boolValue ?? false))
            }
            let last = o["last_seq"] ?? entries.last?.seq ?? request.since
            return ChangesBatch(results: entries, lastSeq: last, pending: o["pending"]?.intValue.map { Int($0) })
        }
    }

    public func revsDiff(_ revisions: [(id: String, revs: [RevID])]) async throws(ReplicationError) -> [String: RevTree.RevsDiff] {
        if let blip { return try await blip.revsDiff(revisions) }
        return try await ReplicationError.mapping {
            var body = JSONObject()
            for (id, revs) in revisions {
                if case .array(let existing)? = body[id] {
                    body[id] = .array(existing + revs.map { .string($0.description) })
                } else {
                    body[id] = .array(revs.map { .string($0.description) })
                }
            }
            let o = try await jsonObject(.POST, "/_revs_diff", body: .object(body))
            var out: [String: RevTree.RevsDiff] = [:]
            for (id, value) in o {
                let missing = (value["missing"]?.arrayValue ?? []).compactMap { $0.stringValue.flatMap(RevID.init) }
                guard !missing.isEmpty else { continue }
                let ancestors = (value["possible_ancestors"]?.arrayValue ?? []).compactMap { $0.stringValue.flatMap(RevID.init) }
                out[id] = RevTree.RevsDiff(missing: missing, possibleAncestors: ancestors)
            }
            return out
        }
    }

    public func fetch(_ requests: [FetchRequest]) async throws(ReplicationError) -> [ReplicatedRevision] {
        if let blip { return try await blip.fetch(requests) }
        return try await ReplicationError.mapping {
            if !session.lacksBulkGet {
                do {
                    // Large batches go as two concurrent requests: the peer serves them on two threads while this
                    // side parses the first answer.
                    if requests.count >= 200 {
                        let half = requests.count / 2
                        async let first = bulkGet(Array(requests[..<half]))
                        let second = try await bulkGet(Array(requests[half...]))
                        return try await first + second
                    }
                    return try await bulkGet(requests)
                } catch let e as ReplicationError where e.kind == .unsupported || e.status == 400 || e.status == 404 {
                    session.lacksBulkGet = true  // An old CouchDB or a minimal server: fall back to open_revs GETs.
                }
            }
            return try await openRevs(requests)
        }
    }

    /// `_bulk_get` without attachment bodies, as CouchDB's replicator reads: a revision that has attachments the
    /// target lacks (newer than its `atts_since`) is read again on its own with them (``openRevs(_:)``), in
    /// multipart, so that they travel as the source stores them (gzip stays gzip) and without base64.
    private func bulkGet(_ requests: [FetchRequest]) async throws -> [ReplicatedRevision] {
        var docs: [JSON] = []
        docs.reserveCapacity(requests.count)
        var attsSince: [String: [RevID]] = [:]
        for request in requests {
            for rev in request.revs {
                var d: JSONObject = ["id": .string(request.id), "rev": .string(rev.description)]
                if !request.attsSince.isEmpty {
                    d["atts_since"] = .array(request.attsSince.map { .string($0.description) })
                    attsSince[request.id] = request.attsSince
                }
                docs.append(.object(d))
            }
        }
        let o = try await jsonObject(.POST, "/_bulk_get", query: [("revs", "true"), ("latest", "true"), ("attachments", "false")],
                                     body: ["docs": .array(docs)])
        guard let results = o["results"]?.arrayValue else {
            throw ReplicationError(.transient, "_bulk_get response without results from \(urlString)")
        }
        var out: [ReplicatedRevision] = []
        out.reserveCapacity(docs.count)
        var withAttachments: [FetchRequest] = []
        var seen = Set<String>()
        for result in results {
            for entry in result["docs"]?.arrayValue ?? [] {
                guard case .object(let doc)? = entry["ok"] else { continue }  // gone since (purged, stemmed)
                let revision = try Self.revision(from: doc)
                guard seen.insert(revision.id + " " + revision.rev.description).inserted else { continue }
                let since = attsSince[revision.id] ?? []
                if Self.lacksAttachmentBodies(revision, attsSince: since) {
                    withAttachments.append(FetchRequest(id: revision.id, revs: [revision.rev], attsSince: since))
                } else {
                    out.append(revision)
                }
            }
        }
        return out + (try await openRevs(withAttachments))
    }

    /// A document's current revision (nil when missing or deleted): the replicator reads a filter function's
    /// source from the source's design document this way.
    public func document(id: String) async throws -> JSONObject? {
        let r = try await send(.GET, "/" + Self.escapeDocID(id))
        if r.status == 404 { return nil }
        guard (200..<300).contains(r.status) else { throw error(for: r, "GET \(id)") }
        guard case .object(let o) = try parse(r.body) else { return nil }
        return o
    }

    /// Writes with `new_edits=false`: revisions carrying attachment bodies one by one in `multipart/related`
    /// (``putMultipart(_:)``, as CouchDB's replicator writes them), the others together through `_bulk_docs`.
    public func write(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> [DocumentFailure] {
        if let blip { return try await blip.write(revisions) }
        return try await ReplicationError.mapping {
            let withBodies = revisions.filter(\.carriesAttachmentBodies)
            let plain = withBodies.isEmpty ? revisions : revisions.filter { !$0.carriesAttachmentBodies }
            var failures = try await bulkDocs(plain)
            if !withBodies.isEmpty {
                failures += try await concurrently(withBodies) { try await self.putMultipart($0).map { [$0] } ?? [] }
            }
            return failures
        }
    }

    private func bulkDocs(_ revisions: [ReplicatedRevision]) async throws -> [DocumentFailure] {
        guard !revisions.isEmpty else { return [] }
        let docs = try revisions.map { revision throws(ReplicationError) in JSON.object(try Self.document(from: revision)) }
        let r = try await send(.POST, "/_bulk_docs", body: ["docs": .array(docs), "new_edits": false])
        if r.status == 413 {
            // Too large for the peer in one request: halve until it fits; a single document too large fails alone.
            if revisions.count == 1 {
                return [DocumentFailure(id: revisions[0].id, rev: revisions[0].rev.description, error: "too_large",
                                        reason: "the document is larger than the target accepts")]
            }
            let half = revisions.count / 2
            return try await bulkDocs(Array(revisions[..<half])) + bulkDocs(Array(revisions[half...]))
        }
        guard (200..<300).contains(r.status) || r.status == 417 else { throw error(for: r, "POST _bulk_docs") }
        guard case .array(let rows) = try parse(r.body) else { return [] }
        return rows.compactMap { row in
            guard let e = row["error"]?.stringValue else { return nil }
            return DocumentFailure(id: row["id"]?.stringValue ?? "", rev: row["rev"]?.stringValue, error: e,
                                   reason: row["reason"]?.stringValue ?? "")
        }
    }

    public func localDocument(id: String) async throws(ReplicationError) -> JSONObject? {
        if let blip { return try await blip.localDocument(id: id) }
        return try await ReplicationError.mapping {
            let r = try await send(.GET, "/_local/" + Self.escapeSegment(id))
            if r.status == 404 { return nil }
            guard (200..<300).contains(r.status) else { throw error(for: r, "GET _local/\(id)") }
            guard case .object(let o) = try parse(r.body) else { return nil }
            return o
        }
    }

    public func putLocalDocument(id: String, body: JSONObject) async throws(ReplicationError) -> String {
        if let blip { return try await blip.putLocalDocument(id: id, body: body) }
        return try await ReplicationError.mapping {
            let o = try await jsonObject(.PUT, "/_local/" + Self.escapeSegment(id), body: .object(body))
            return o["rev"]?.stringValue ?? "0-1"
        }
    }

    public func ensureFullCommit() async throws(ReplicationError) {
        // A `rev` is answered once the server has stored it: nothing to flush.
        if blip != nil { return }
        try await ReplicationError.mapping {
            let r = try await send(.POST, "/_ensure_full_commit", body: [:])
            guard (200..<300).contains(r.status) || r.status == 404 || r.status == 405 else {
                throw error(for: r, "POST _ensure_full_commit")
            }
        }
    }

    // MARK: Documents ↔ revisions

    static let envelopeKeys: Set<String> = ["_id", "_rev", "_revisions", "_deleted", "_conflicts", "_deleted_conflicts",
                                            "_revs_info", "_local_seq"]

    /// A document as `_bulk_get`/`open_revs` return it (with `_revisions` and inline attachments) → a revision.
    static func revision(from doc: JSONObject) throws -> ReplicatedRevision {
        guard let id = doc["_id"]?.stringValue, let revText = doc["_rev"]?.stringValue, let rev = RevID(revText) else {
            throw ReplicationError(.transient, "a fetched document lacks _id or a valid _rev")
        }
        var history = [rev]
        // A malformed `_revisions` (ids past generation 1, empty or non-string digests) used to trap in
        // RevID(generation:digest:) and take the process down; now it is ignored like a mismatched one.
        if let revisions = doc["_revisions"], let given = try? RevID.history(fromRevisions: revisions),
           given.first == rev {
            history = given
        }
        var members: [(String, JSON)] = []
        members.reserveCapacity(doc.count)
        var blobs: [String: [UInt8]] = [:]
        for (key, value) in doc {
            guard key.utf8.first == UInt8(ascii: "_") else {
                members.append((key, value))
                continue
            }
            if envelopeKeys.contains(key) { continue }
            guard key == "_attachments", case .object(let atts) = value else {
                members.append((key, value))
                continue
            }
            var stubs = JSONObject()
            for (name, meta) in atts {
                guard case .object(var m) = meta else { continue }
                if let encoded = m["data"]?.stringValue {
                    guard let data = Base64.decode(encoded) else {
                        throw ReplicationError(.transient, "attachment \(name) of \(id) has invalid base64 data")
                    }
                    let digest = Database.attachmentDigest(data)
                    blobs[digest] = data
                    m.removeValue(forKey: "data")
                    m.removeValue(forKey: "encoding")
                    m.removeValue(forKey: "encoded_length")
                    m["digest"] = .string(digest)
                    m["length"] = .int(Int64(data.count))
                }
                m.removeValue(forKey: "follows")
                m["stub"] = true
                stubs[name] = .object(m)
            }
            members.append(("_attachments", .object(stubs)))
        }
        return ReplicatedRevision(id: id, history: history, deleted: doc["_deleted"]?.boolValue ?? false,
                                  body: JSONObject(members), attachments: blobs)
    }

    /// A revision → the document `_bulk_docs` with `new_edits:false` takes: attachment bodies inline (decoded:
    /// inline data is always the attachment's own bytes), or, with `inline: false`, left as stubs for
    /// ``multipartDocument(from:)``.
    static func document(from revision: ReplicatedRevision, inline: Bool = true) throws(ReplicationError) -> JSONObject {
        var doc: JSONObject = ["_id": .string(revision.id), "_rev": .string(revision.rev.description)]
        if revision.deleted { doc["_deleted"] = true }
        doc["_revisions"] = ["start": .int(Int64(revision.rev.generation)),
                             "ids": .array(revision.history.map { .string($0.digest) })]
        for (key, value) in revision.body {
            guard key == "_attachments", case .object(let atts) = value else {
                doc[key] = value
                continue
            }
            var out = JSONObject()
            for (name, meta) in atts {
                guard case .object(var m) = meta else { continue }
                if inline, let digest = m["digest"]?.stringValue, var data = try revision.attachmentBytes(digest) {
                    // Inline, as CouchDB takes it: the peer computes digest and length from the data itself.
                    if revision.attachmentEncodings[digest] == "gzip", let identity = try? Gzip.decompress(data, limit: Int.max) {
                        data = identity
                    }
                    for key in ["stub", "digest", "length", "encoding", "encoded_length"] { m.removeValue(forKey: key) }
                    m["data"] = .string(Base64.encode(data))
                }
                out[name] = .object(m)
            }
            doc["_attachments"] = .object(out)
        }
        return doc
    }

    // MARK: Escaping

    private static let unreserved: CharacterSet = {
        var set = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(128)))
        set.insert(charactersIn: "-._~")
        return set
    }()

    static func escapeQuery(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: unreserved) ?? s
    }

    static func escapeSegment(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: unreserved) ?? s
    }

    /// A document id as a path: `_design/x` keeps its slash, everything else is escaped.
    static func escapeDocID(_ id: String) -> String {
        if id.hasPrefix("_design/") { return "_design/" + escapeSegment(String(id.dropFirst(8))) }
        return escapeSegment(id)
    }

    /// A URL with any password replaced by `***`, for messages.
    public static func redact(_ url: String) -> String {
        guard var c = URLComponents(string: url), c.password != nil else { return url }
        c.password = "***"
        return c.string ?? url
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (s, atto) = components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}

/// A certificate and its private key (PEM files) a replicator presents to HTTPS peers that ask for one.
public struct ClientCertificate: Sendable, Hashable {
    public let certificatePath: String
    public let keyPath: String
    public init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }
}
