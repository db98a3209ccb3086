public import ArgumentParser
import Foundation
import Logging
import Settee
import SetteeServer

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a node: CouchDB's HTTP API over an embedded SQLite data directory.",
        discussion: """
            Nothing else is needed to run. Without an admin (--admin or SETTEE_ADMIN) the node accepts every \
            request as admin and refuses to listen beyond loopback. SIGTERM or SIGINT stop it gracefully: \
            in-flight requests finish and databases close cleanly.
            """)

    @Option(help: "A JSON file of settings keyed by these options' long names (also $SETTEE_CONFIG); flags and environment variables win over it.")
    var config: String?
    @Option(help: "The data directory (one SQLite file per database; also $SETTEE_DATA).") var data: String = "./settee-data"
    @Option(help: "Address to listen on (also $SETTEE_HOST).") var host: String = "127.0.0.1"
    @Option(help: "Port to listen on, 0 picks a free port (also $SETTEE_PORT).") var port: Int = 5984
    @Option(help: "Server admin as USER:PASS (default: $SETTEE_ADMIN).") var admin: String?
    @Option(help: "The node's name in /_membership and /_node/{name} (CouchDB's Erlang node name; also $SETTEE_NODE_NAME).")
    var nodeName: String?
    @Option(help: "Largest accepted document, bytes.") var maxDocumentSize: Int = 8 << 20
    @Option(help: "Largest accepted request body, bytes.") var maxRequestSize: Int = 64 << 20
    @Option(help: "Largest accepted attachment, bytes.") var maxAttachmentSize: Int = 64 << 20
    @Option(help: "Most documents in one _bulk_docs or _bulk_get request.") var maxBulkDocs: Int = 10_000
    @Option(help: "Most concurrent client connections.") var maxConnections: Int = 2048
    @Option(help: "Seconds before an idle or slow client's connection is closed.") var idleTimeout: Double = 60
    @Option(help: "Seconds a _query request may run (0: no limit).") var queryTimeout: Double = 60
    @Flag(help: "Sync every commit to stable storage (survives power loss, slower).") var fullSync = false
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (also $SETTEE_LOG_LEVEL).") var logLevel: String = "info"
    @Option(help: "Log format: text, or json for one JSON object per line (also $SETTEE_LOG_FORMAT).") var logFormat: String = "text"
    @Option(name: .customLong("peer"),
            help: "A peer server's URL (repeatable; also $SETTEE_PEERS, comma-separated): every database is kept in step with the same-named database there (replicated one-shot when either side writes it).")
    var peers: [String] = []
    @Option(help: "Seconds between looks for new databases to replicate with the peers.") var peerScanInterval: Double = 10
    @Option(help: "CORS: comma-separated origins allowed to call this node from a browser, or * (enables CORS; also $SETTEE_CORS_ORIGINS).")
    var corsOrigins: String?
    @Flag(help: "CORS: let browsers send cookies and basic auth cross-origin.") var corsCredentials = false
    @Option(help: "CORS: comma-separated methods allowed in preflight answers.") var corsMethods: String = "GET, PUT, POST, HEAD, DELETE"
    @Option(help: "CORS: comma-separated request headers allowed in preflight answers.")
    var corsHeaders: String = "accept, authorization, content-type, origin, referer, if-match, if-none-match, x-requested-with"
    @Option(help: "CORS: seconds browsers may cache a preflight answer.") var corsMaxAge: Int = 600
    @Option(help: "PBKDF2-SHA256 iterations for passwords stored in _users.") var pbkdf2Iterations: Int = 600_000
    @Option(help: "Seconds a _session cookie stays valid.") var sessionTimeout: Double = 600
    @Option(help: "Failed logins per (user, client address) after which that pair is locked out; 0 disables.")
    var lockoutThreshold: Int = 5
    @Option(help: "Seconds a locked-out (user, address) pair stays locked.") var lockoutDuration: Double = 300
    @Option(help: "JWT: an HMAC secret, base64 (repeatable; also $SETTEE_JWT_HMAC_KEY). Enables HS256/384/512 bearer tokens.")
    var jwtHmacKey: [String] = []
    @Option(help: "JWT: a PEM file with an RSA public key (repeatable; also $SETTEE_JWT_RSA_KEY). Enables RS256/384/512 bearer tokens.")
    var jwtRsaKey: [String] = []
    @Option(help: "JWT: the audience a token's aud must include.") var jwtAudience: String?
    @Option(help: "JWT: the issuer a token's iss must equal.") var jwtIssuer: String?
    @Option(help: "JWT: the claim with the user's roles (a member name, else a dotted path).") var jwtRolesClaim: String = "_couchdb.roles"
    @Option(help: "JWT: comma-separated claims a token must carry besides sub.") var jwtRequiredClaims: String = "exp"
    @Option(name: .customLong("sync-function"),
            help: "A database's sync function (Sync Gateway's), as DB=SOURCE or DB=@FILE (repeatable; a configuration file's \"databases\": {\"DB\": {\"sync\": …}} says the same). The database is created if missing.")
    var syncFunctions: [String] = []

    /// Password, session, lockout and JWT settings from the flags and environment.
    func securityConfiguration() throws -> SecurityConfiguration {
        let env = ProcessInfo.processInfo.environment
        var security = SecurityConfiguration()
        guard (1...10_000_000).contains(pbkdf2Iterations) else { throw ValidationError("--pbkdf2-iterations must be 1…10000000") }
        guard sessionTimeout > 0, lockoutDuration > 0, lockoutThreshold >= 0 else {
            throw ValidationError("--session-timeout and --lockout-duration must be positive, --lockout-threshold ≥ 0")
        }
        security.pbkdf2Iterations = pbkdf2Iterations
        security.sessionTimeout = sessionTimeout
        security.lockoutThreshold = lockoutThreshold
        security.lockoutDuration = lockoutDuration
        var secrets = jwtHmacKey
        if secrets.isEmpty, let e = env["SETTEE_JWT_HMAC_KEY"], !e.isEmpty { secrets = [e] }
        var rsaPaths = jwtRsaKey
        if rsaPaths.isEmpty, let e = env["SETTEE_JWT_RSA_KEY"], !e.isEmpty { rsaPaths = [e] }
        if !secrets.isEmpty || !rsaPaths.isEmpty {
            var jwt = JWTConfiguration()
            jwt.hmacSecrets = try secrets.map { text in
                guard let bytes = Data(base64Encoded: text), bytes.count >= 32 else {
                    throw ValidationError("--jwt-hmac-key must be base64 of at least 32 bytes")
                }
                return Array(bytes)
            }
            jwt.rsaPublicKeysPEM = try rsaPaths.map { path in
                do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
                    throw ValidationError("--jwt-rsa-key: cannot read \(path): \(error.localizedDescription)")
                }
            }
            jwt.audience = jwtAudience
            jwt.issuer = jwtIssuer
            jwt.rolesClaim = jwtRolesClaim
            jwt.requiredClaims = jwtRequiredClaims.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
            security.jwt = jwt
        }
        return security
    }
    @Option(name: .customLong("tls-cert"),
            help: "Serve HTTPS with this PEM certificate chain (default: $SETTEE_TLS_CERT); needs --tls-key.")
    var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "The PEM private key of --tls-cert (default: $SETTEE_TLS_KEY).")
    var tlsKey: String?
    @Option(name: .customLong("tls-client-ca"),
            help: "Require clients to present a certificate verified against this PEM CA bundle (mutual TLS; default: $SETTEE_TLS_CLIENT_CA); needs --tls-cert.")
    var tlsClientCA: String?
    @Option(name: .customLong("ca-file"),
            help: "PEM CA bundle the replicator verifies HTTPS peers against instead of the system's trust store (default: $SETTEE_CA_FILE).")
    var caFile: String?
    @Flag(help: "Let replications and peers send credentials over plain HTTP to non-loopback hosts.")
    var allowInsecureCredentials = false
    @Flag(help: "With --tls-cert: also offer HTTP/2 (negotiated by ALPN).") var http2 = false
    @Option(help: "What serves plain HTTP/1.1 connections: settee (its own connection handling) or hummingbird (Hummingbird's channel).")
    var http1Channel: HTTP1ChannelKind = .settee

    func run() async throws {
        // A log reader that has gone (a closed pipe under standard output or error) must not end the node: the
        // write gets EPIPE and is dropped (``LogWriter``). NIO ignores SIGPIPE too, but only once it opens a socket.
        signal(SIGPIPE, SIG_IGN)
        let adminText = admin ?? ProcessInfo.processInfo.environment["SETTEE_ADMIN"]
        var adminPair: (username: String, password: String)?
        if let adminText, !adminText.isEmpty {
            guard let parsed = ServerConfiguration.parseAdmin(adminText) else {
                throw ValidationError("--admin must be USER:PASS")
            }
            adminPair = parsed
        }
        var config = ServerConfiguration(dataDirectory: data, host: host, port: port, admin: adminPair,
                                         maxDocumentSize: maxDocumentSize, maxRequestSize: maxRequestSize,
                                         fullSync: fullSync)
        if let name = nodeName ?? ProcessInfo.processInfo.environment["SETTEE_NODE_NAME"], !name.isEmpty {
            config.nodeName = name
        }
        var peerList = peers
        if peerList.isEmpty, let env = ProcessInfo.processInfo.environment["SETTEE_PEERS"] {
            peerList = env.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
        }
        for peer in peerList where !(peer.hasPrefix("http://") || peer.hasPrefix("https://")) {
            throw ValidationError("--peer must be an http(s) URL: \(peer)")
        }
        config.peers = peerList
        config.security = try securityConfiguration()
        if let origins = (corsOrigins ?? ProcessInfo.processInfo.environment["SETTEE_CORS_ORIGINS"]), !origins.isEmpty {
            func list(_ text: String) -> [String] {
                text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            }
            var cors = CORSConfiguration(origins: list(origins), credentials: corsCredentials)
            for origin in cors.origins where origin != "*" && !(origin.hasPrefix("http://") || origin.hasPrefix("https://")) {
                throw ValidationError("--cors-origins: \(origin) is not an origin (scheme://host[:port]) or *")
            }
            cors.methods = list(corsMethods).map { $0.uppercased() }
            cors.headers = list(corsHeaders).map { $0.lowercased() }
            guard corsMaxAge >= 0 else { throw ValidationError("--cors-max-age must be ≥ 0") }
            cors.maxAge = corsMaxAge
            config.cors = cors
        }
        guard maxAttachmentSize > 0, maxBulkDocs > 0, maxConnections > 0, idleTimeout > 0 else {
            throw ValidationError("--max-attachment-size, --max-bulk-docs, --max-connections and --idle-timeout must be positive")
        }
        config.maxAttachmentSize = maxAttachmentSize
        config.maxBulkDocs = maxBulkDocs
        config.maxConnections = maxConnections
        config.idleTimeout = idleTimeout
        guard queryTimeout >= 0 else { throw ValidationError("--query-timeout must be ≥ 0") }
        config.queryTimeout = queryTimeout
        guard peerScanInterval > 0 else { throw ValidationError("--peer-scan-interval must be positive") }
        config.peerScanInterval = .milliseconds(Int(peerScanInterval * 1000))
        let env = ProcessInfo.processInfo.environment
        config.tlsCertificatePath = (tlsCert ?? env["SETTEE_TLS_CERT"]).flatMap { $0.isEmpty ? nil : $0 }
        config.tlsKeyPath = (tlsKey ?? env["SETTEE_TLS_KEY"]).flatMap { $0.isEmpty ? nil : $0 }
        if (config.tlsCertificatePath == nil) != (config.tlsKeyPath == nil) {
            throw ValidationError("--tls-cert and --tls-key go together: give both, or neither")
        }
        config.tlsClientRootCertificatesPath = (tlsClientCA ?? env["SETTEE_TLS_CLIENT_CA"]).flatMap { $0.isEmpty ? nil : $0 }
        if config.tlsClientRootCertificatesPath != nil && config.tlsCertificatePath == nil {
            throw ValidationError("--tls-client-ca needs TLS: give --tls-cert and --tls-key too")
        }
        config.caFile = (caFile ?? env["SETTEE_CA_FILE"]).flatMap { $0.isEmpty ? nil : $0 }
        if let ca = config.caFile {
            do { _ = try RemoteEndpoint.client(trustingRootCertificatesAt: ca) } catch let e as ReplicationError {
                throw ValidationError("--ca-file: \(e.message)")
            }
        }
        config.allowInsecureCredentials = allowInsecureCredentials
        config.http2 = http2
        config.http1Channel = http1Channel
        config.security.secureCookies = config.usesTLS
        guard let level = Logging.Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level must be one of: trace, debug, info, notice, warning, error, critical")
        }
        if adminPair == nil && !config.bindsLoopbackOnly {
            throw ValidationError("Refusing to bind \(host) without an admin: set --admin USER:PASS (or SETTEE_ADMIN) to listen beyond loopback.")
        }
        guard maxDocumentSize > 0, maxRequestSize > 0 else {
            throw ValidationError("--max-document-size and --max-request-size must be positive")
        }
        do { try SetteeServer.validateTLS(config) } catch let error as SetteeError { throw ValidationError(error.reason) }
        switch logFormat {
        // Both write standard error through LogWriter: a line that can't be written is dropped and counted.
        case "text": LoggingSystem.bootstrap { StreamLogHandler(label: $0, stream: LogWriter.standardError) }
        case "json": LoggingSystem.bootstrap { JSONLogHandler(label: $0) }
        default: throw ValidationError("--log-format must be text or json")
        }
        var logger = Logging.Logger(label: "settee")
        logger.logLevel = level
        // The server logs through swift-log (--log-format); the library's console sink would print it twice.
        Database.log.console.level = .none
        let node = try Node(configuration: config)
        for entry in syncFunctions {
            guard let eq = entry.firstIndex(of: "="), eq != entry.startIndex else {
                throw ValidationError("--sync-function takes DB=SOURCE or DB=@FILE, not \(entry)")
            }
            let name = String(entry[..<eq])
            var source = String(entry[entry.index(after: eq)...])
            if source.hasPrefix("@") {
                guard let data = FileManager.default.contents(atPath: String(source.dropFirst())) else {
                    throw ValidationError("--sync-function: cannot read \(source.dropFirst())")
                }
                source = String(decoding: data, as: UTF8.self)
            }
            do { try node.installSyncFunction(database: name, source: source) } catch let error as SetteeError {
                throw ValidationError("--sync-function \(name): \(error.reason)")
            }
        }
        if adminPair == nil {
            LogWriter.standardError.write("settee: no admin configured (admin party): every request is treated as admin; listening on loopback only. Use --admin USER:PASS to require authentication.\n")
        }
        do {
            try await SetteeServer.run(node: node, logger: logger) { [host, dataDirectory = config.dataDirectory,
                                                                     scheme = config.usesTLS ? "https" : "http"] port in
                let line = "settee \(SetteeServerVersion.version) listening on \(scheme)://\(host):\(port) (data: \(dataDirectory))\n"
                LogWriter.standardOutput.write(line)
            }
        } catch let error as SetteeError where error.code == .badRequest {
            throw ValidationError(error.reason)
        }
        node.closeAll()
    }
}

extension HTTP1ChannelKind: ExpressibleByArgument {}
