import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
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
    /// - Throws: ``SetteeError`` `.badRequest` when no admin is configured and the host is not loopback.
    public static func application(node: Node, logger: Logger? = nil,
                                   onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in })
        throws -> some ApplicationProtocol {
        let config = node.configuration
        if config.admin == nil && !config.bindsLoopbackOnly {
            throw SetteeError(.badRequest,
                              "Refusing to bind \(config.host) without an admin: set --admin USER:PASS (or SETTEE_ADMIN) to listen beyond loopback.")
        }
        var log = logger ?? Logger(label: "settee")
        if logger == nil { log.logLevel = .warning }
        let responder = CouchResponder(node: node)
        return Application(
            responder: responder,
            configuration: ApplicationConfiguration(address: .hostname(config.host, port: config.port),
                                                    serverName: "Settee/0.1.0"),
            services: [NodeService(node: node)],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? config.port) },
            logger: log)
    }
}

extension SetteeServer {
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
        try? await gracefulShutdown()
        await node.replications.stopAll()
        node.closeAll()
    }
}

/// The version this build reports.
public enum SetteeServerVersion {
    public static let version = "0.1.0"
}
