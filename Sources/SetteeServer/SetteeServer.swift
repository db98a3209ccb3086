import Foundation
import HTTPTypes
public import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdTLS
public import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import SetteeCore
import SetteeStore

/// Builds the HTTP application of a Settee node: CouchDB's API over the node's databases.
///
/// ```swift
/// let node = try Node(configuration: ServerConfiguration(dataDirectory: "/var/lib/settee", port: 5984))
/// let app = try SetteeServer.application(node: node)
/// try await app.runService()   // until SIGTERM/SIGINT; then in-flight requests finish and databases close
/// ```
public enum SetteeServer {
    /// The Hummingbird application for a node.
    ///
    /// With ``ServerConfiguration/tlsCertificatePath`` and ``ServerConfiguration/tlsKeyPath`` it serves HTTP/1.1
    /// over TLS, and with ``ServerConfiguration/http2`` also HTTP/2 (ALPN). HTTP/1.1, plain or over TLS, is served by
    /// Settee's own connection handling, or Hummingbird's channel (``ServerConfiguration/http1Channel``).
    ///
    /// - Throws: ``SetteeError`` `.badRequest` when no admin is configured and the host is not loopback, or when
    ///   the TLS certificate or key is missing, unreadable, not PEM, or the two do not match.
    public static func application(node: Node, logger: Logger? = nil,
                                   onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in })
        throws -> some ApplicationProtocol {
        let config = node.configuration
        if !node.config.hasAdmins && !config.bindsLoopbackOnly
            && !(config.usesTLS && config.tlsClientRootCertificatesPath != nil) {
            throw SetteeError(.badRequest,
                              "Refusing to bind \(config.host) without an admin: set --admin USER:PASS (or SETTEE_ADMIN) to listen beyond loopback.")
        }
        var log = logger ?? Logger(label: "settee")
        if logger == nil { log.logLevel = .warning }
        let responder = CouchResponder(node: node)
        let serverName = Reply.serverHeader
        let exchange = HTTPExchange(responder: responder, logger: log, serverName: serverName)
        if config.http2 && !config.usesTLS { try validateTLS(config) }
        let tls = config.usesTLS ? try tlsConfiguration(config) : nil
        // Slow or idle clients are disconnected after the idle timeout; headers are bounded by NIO's decoder (80 KiB).
        let http1 = HTTP1Channel.Configuration(idleTimeout: TimeAmount.milliseconds(Int64(config.idleTimeout * 1000)))
        let http2 = HTTP2ChannelConfiguration(idleTimeout: .milliseconds(Int64(config.idleTimeout * 1000)),
                                              streamConfiguration: http1)
        return Application(
            responder: responder,
            server: try tls.map { tlsConfiguration in
                switch (config.http1Channel, config.http2) {
                case (.settee, true):
                    // ALPN: HTTP/2 by Hummingbird's channel, HTTP/1.1 by Settee's (so `_blipsync` is served beside h2).
                    // Graceful shutdown tells the node (open feeds end) for HTTP/2 connections too.
                    return HTTPServerBuilder { applicationResponder in
                        ShutdownNoticeChannel(base: try SetteeHTTP2UpgradeChannel(
                            tlsConfiguration: tlsConfiguration,
                            http1: SetteeHTTP1Channel(exchange: exchange, idleTimeout: .milliseconds(Int64(config.idleTimeout * 1000))),
                            http2: HTTP2Channel(responder: applicationResponder, configuration: http2),
                            handshakeTimeout: .milliseconds(Int64(config.idleTimeout * 1000))),
                                              notice: node.shutdownNotice)
                    }
                case (.hummingbird, true):
                    return try .http2Upgrade(tlsConfiguration: tlsConfiguration, configuration: http2)
                case (.settee, false):
                    // HTTPS/1.1: Settee's own connection handling behind TLS, as on plain HTTP (so `_blipsync` upgrades
                    // to a WebSocket over TLS too: `wss://`).
                    return try .tls(HTTPServerBuilder { _ in
                        SetteeHTTP1Channel(exchange: exchange, idleTimeout: .milliseconds(Int64(config.idleTimeout * 1000)))
                    }, tlsConfiguration: tlsConfiguration)
                case (.hummingbird, false):
                    return try .tls(.http1(configuration: http1), tlsConfiguration: tlsConfiguration)
                }
            } ?? HTTPServerBuilder { applicationResponder in
                switch config.http1Channel {
                case .settee:
                    // Plain HTTP/1.1: Settee's own connection handling (see SetteeHTTP1Channel), which runs
                    // `responder` itself; the Application's responder wrapper is for the other channels.
                    return SetteeHTTP1Channel(exchange: exchange, idleTimeout: .milliseconds(Int64(config.idleTimeout * 1000)))
                case .hummingbird:
                    return ShutdownNoticeChannel(base: HTTP1Channel(responder: applicationResponder, configuration: http1),
                                          notice: node.shutdownNotice)
                }
            },
            configuration: ApplicationConfiguration(address: .hostname(config.host, port: config.port),
                                                    serverName: serverName,
                                                    availableConnectionsDelegate: CountedConnections(limit: MaximumAvailableConnections(config.maxConnections),
                                                                                                  counts: node.connections)),
            services: [NodeService(node: node)],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? config.port) },
            logger: log)
    }
}

extension SetteeServer {
    /// Checks the configured TLS certificate and key (readable PEM files that belong together) without starting
    /// anything; ``application(node:logger:onServerRunning:)`` checks them too.
    /// - Throws: ``SetteeError`` `.badRequest` with a message naming the file and the problem.
    public static func validateTLS(_ configuration: ServerConfiguration) throws {
        if configuration.http2 && !configuration.usesTLS {
            throw SetteeError(.badRequest, "HTTP/2 (--http2) is served over TLS only: give --tls-cert and --tls-key")
        }
        if configuration.usesTLS { _ = try tlsConfiguration(configuration) }
    }

    /// The server TLS configuration for `--tls-cert` and `--tls-key`, checked now so that a bad file fails the
    /// start with a clear message.
    static func tlsConfiguration(_ config: ServerConfiguration) throws -> TLSConfiguration {
        guard let certPath = config.tlsCertificatePath, let keyPath = config.tlsKeyPath,
              !certPath.isEmpty, !keyPath.isEmpty else {
            throw SetteeError(.badRequest, "TLS needs both a certificate (--tls-cert) and its private key (--tls-key)")
        }
        for (what, path) in [("certificate", certPath), ("private key", keyPath)]
        where !FileManager.default.isReadableFile(atPath: path) {
            throw SetteeError(.badRequest, "TLS \(what) file \(path) does not exist or is not readable")
        }
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certPath)
        } catch {
            throw SetteeError(.badRequest, "TLS certificate \(certPath) is not a PEM certificate: \(error)")
        }
        guard !chain.isEmpty else { throw SetteeError(.badRequest, "TLS certificate \(certPath) holds no PEM certificate") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            throw SetteeError(.badRequest, "TLS private key \(keyPath) is not a PEM private key: \(error)")
        }
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                           privateKey: .privateKey(key))
        if let clientRoots = config.tlsClientRootCertificatesPath {
            let roots: [NIOSSLCertificate]
            do {
                roots = try NIOSSLCertificate.fromPEMFile(clientRoots)
            } catch {
                throw SetteeError(.badRequest, "TLS client CA file \(clientRoots) is not a PEM certificate: \(error)")
            }
            guard !roots.isEmpty else { throw SetteeError(.badRequest, "TLS client CA file \(clientRoots) holds no PEM certificate") }
            // A server that verifies asks every client for a certificate and fails the handshake without one
            // that chains to these roots.
            tls.trustRoots = .certificates(roots)
            tls.certificateVerification = .noHostnameVerification
        }
        do {
            _ = try NIOSSLContext(configuration: tls)
        } catch {
            throw SetteeError(.badRequest, "TLS certificate \(certPath) and key \(keyPath) cannot be used together: \(error)")
        }
        return tls
    }

    /// Runs a node's server until SIGTERM or SIGINT, then shuts down gracefully: the listener stops,
    /// in-flight requests finish and the databases close.
    public static func run(node: Node, logger: Logger? = nil,
                           onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let app = try application(node: node, logger: logger, onServerRunning: onServerRunning)
        try await app.runService()
    }
}

/// Closes the node's databases when the service group shuts down (after the HTTP server stopped).
struct NodeService: Service {
    let node: Node

    func run() async throws {
        node.replications.startBackground()
        node.perUser.refresh()
        try? await gracefulShutdown()
        node.perUser.stop()
        await node.replications.stopAll()
        // Nothing of the node's background work outlives it: a compaction under way ends before its file closes.
        await node.background.close()
        node.closeAll()
    }
}

/// The version this build reports.
public enum SetteeServerVersion {
    public static let version = "0.1.0"
}
