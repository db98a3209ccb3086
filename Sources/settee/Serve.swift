import ArgumentParser
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

    @Option(help: "The data directory (one SQLite file per database).") var data: String = "./settee-data"
    @Option(help: "Address to listen on.") var host: String = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free port).") var port: Int = 5984
    @Option(help: "Server admin as USER:PASS (default: $SETTEE_ADMIN).") var admin: String?
    @Option(help: "Largest accepted document, bytes.") var maxDocumentSize: Int = 8 << 20
    @Option(help: "Largest accepted request body, bytes.") var maxRequestSize: Int = 64 << 20
    @Flag(help: "Sync every commit to stable storage (survives power loss, slower).") var fullSync = false
    @Option(help: "Log level: trace, debug, info, notice, warning, error.") var logLevel: String = "info"
    @Option(name: .customLong("peer"),
            help: "A peer server's URL (repeatable; also $SETTEE_PEERS, comma-separated): every database is kept in continuous push and pull with the same-named database there.")
    var peers: [String] = []
    @Option(help: "Seconds between looks for new databases to replicate with the peers.") var peerScanInterval: Double = 10
    @Option(name: .customLong("tls-cert"),
            help: "Serve HTTPS with this PEM certificate chain (default: $SETTEE_TLS_CERT); needs --tls-key.")
    var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "The PEM private key of --tls-cert (default: $SETTEE_TLS_KEY).")
    var tlsKey: String?
    @Option(name: .customLong("ca-file"),
            help: "PEM CA bundle the replicator verifies HTTPS peers against instead of the system's trust store (default: $SETTEE_CA_FILE).")
    var caFile: String?
    @Flag(help: "Let replications and peers send credentials over plain HTTP to non-loopback hosts.")
    var allowInsecureCredentials = false
    @Flag(help: "With --tls-cert: also offer HTTP/2 (negotiated by ALPN).") var http2 = false

    func run() async throws {
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
        var peerList = peers
        if peerList.isEmpty, let env = ProcessInfo.processInfo.environment["SETTEE_PEERS"] {
            peerList = env.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
        }
        for peer in peerList where !(peer.hasPrefix("http://") || peer.hasPrefix("https://")) {
            throw ValidationError("--peer must be an http(s) URL: \(peer)")
        }
        config.peers = peerList
        guard peerScanInterval > 0 else { throw ValidationError("--peer-scan-interval must be positive") }
        config.peerScanInterval = .milliseconds(Int(peerScanInterval * 1000))
        let env = ProcessInfo.processInfo.environment
        config.tlsCertificatePath = (tlsCert ?? env["SETTEE_TLS_CERT"]).flatMap { $0.isEmpty ? nil : $0 }
        config.tlsKeyPath = (tlsKey ?? env["SETTEE_TLS_KEY"]).flatMap { $0.isEmpty ? nil : $0 }
        if (config.tlsCertificatePath == nil) != (config.tlsKeyPath == nil) {
            throw ValidationError("--tls-cert and --tls-key go together: give both, or neither")
        }
        config.caFile = (caFile ?? env["SETTEE_CA_FILE"]).flatMap { $0.isEmpty ? nil : $0 }
        if let ca = config.caFile {
            do { _ = try RemoteEndpoint.client(trustingRootCertificatesAt: ca) } catch let e as ReplicationError {
                throw ValidationError("--ca-file: \(e.message)")
            }
        }
        config.allowInsecureCredentials = allowInsecureCredentials
        config.http2 = http2
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level must be one of: trace, debug, info, notice, warning, error, critical")
        }
        if adminPair == nil && !config.bindsLoopbackOnly {
            throw ValidationError("Refusing to bind \(host) without an admin: set --admin USER:PASS (or SETTEE_ADMIN) to listen beyond loopback.")
        }
        guard maxDocumentSize > 0, maxRequestSize > 0 else {
            throw ValidationError("--max-document-size and --max-request-size must be positive")
        }
        do { try SetteeServer.validateTLS(config) } catch let error as SetteeError { throw ValidationError(error.reason) }
        var logger = Logger(label: "settee")
        logger.logLevel = level
        let node = try Node(configuration: config)
        if adminPair == nil {
            FileHandle.standardError.write(Data("settee: no admin configured (admin party): every request is treated as admin; listening on loopback only. Use --admin USER:PASS to require authentication.\n".utf8))
        }
        do {
            try await SetteeServer.run(node: node, logger: logger) { [host, dataDirectory = config.dataDirectory,
                                                                     scheme = config.usesTLS ? "https" : "http"] port in
                let line = "settee \(SetteeServerVersion.version) listening on \(scheme)://\(host):\(port) (data: \(dataDirectory))\n"
                FileHandle.standardOutput.write(Data(line.utf8))
            }
        } catch let error as SetteeError where error.code == .badRequest {
            throw ValidationError(error.reason)
        }
        node.closeAll()
    }
}
