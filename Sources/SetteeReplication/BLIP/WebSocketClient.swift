import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import SetteeCore
import Synchronization

/// Opens the WebSocket of a `ws://` or `wss://` endpoint: TCP (and TLS), then the HTTP/1.1 upgrade handshake asking
/// for Couchbase Lite's sub-protocols, with NIO's typed client upgrader (frames written by ``WebSocketFrameWriter``).
///
/// A server that answers the handshake with anything but `101 Switching Protocols` is read like any HTTP answer
/// (its status and CouchDB- or Sync Gateway-style JSON error), and the failure is the ``ReplicationError`` that status
/// maps to: 401 `unauthorized`, 403 `forbidden`, 404 `notFound` stop a replication; 5xx and an unreachable host are
/// retried.
enum WebSocketClient {
    /// What the handshake ended in.
    private enum Upgrade: Sendable {
        case upgraded(NIOAsyncChannel<WebSocketFrame, WebSocketOutbound>, subprotocol: String?)
        case refused(NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>)
    }

    /// Where and how to connect.
    struct Target: Sendable {
        var host: String
        var port: Int
        /// The request path with its percent-encoding, e.g. `/db/_blipsync`.
        var path: String
        /// The TLS context of a `wss://` endpoint, and how it verifies the server (for a TLS error's message).
        var tls: NIOSSLContext?
        var tlsHint = ""
        var headers: [(String, String)]
        /// Sub-protocols offered, best first.
        var subprotocols: [String]
        var maxFrameSize: Int = 1 << 24
        var connectTimeout: TimeAmount = .seconds(10)
        /// How long the handshake (after connecting) may take.
        var handshakeTimeout: TimeAmount = .seconds(30)
        /// What errors name: the URL without credentials.
        var displayName: String
    }

    /// Connects and upgrades; returns the WebSocket and the sub-protocol the server chose.
    static func connect(_ target: Target) async throws(ReplicationError) -> (NIOAsyncChannel<WebSocketFrame, WebSocketOutbound>, String) {
        let upgrade: Upgrade
        do {
            let future: EventLoopFuture<Upgrade> = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(target.connectTimeout)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .connect(host: target.host, port: target.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try configure(channel, target)
                    }
                }
            upgrade = try await withTimeout(target.handshakeTimeout, on: future)
        } catch let error as ReplicationError {
            throw error
        } catch {
            if let tls = ReplicationError.tls(error, host: target.host, hint: target.tlsHint) { throw tls }
            throw ReplicationError(.unreachable, "cannot reach \(target.displayName): \(error)")
        }
        switch upgrade {
        case .upgraded(let channel, let subprotocol):
            guard let subprotocol, target.subprotocols.contains(subprotocol) else {
                try? await channel.channel.close()
                throw ReplicationError(.unsupported, "\(target.displayName) accepted the WebSocket without a BLIP sub-protocol "
                                       + "(offered \(target.subprotocols.joined(separator: ", ")))")
            }
            return (channel, subprotocol)
        case .refused(let channel):
            throw await refusal(channel, target)
        }
    }

    /// The pipeline: TLS when asked, then NIO's HTTP client with the WebSocket upgrader.
    private static func configure(_ channel: any Channel, _ target: Target) throws -> EventLoopFuture<Upgrade> {
        if let tls = target.tls {
            let handler = try NIOSSLClientHandler(context: tls, serverHostname: isIPAddress(target.host) ? nil : target.host)
            try channel.pipeline.syncOperations.addHandler(handler)
        }
        let upgrader = BLIPWebSocketClientUpgrader<Upgrade>(maxFrameSize: target.maxFrameSize) { channel, response in
            channel.eventLoop.makeCompletedFuture {
                let chosen = response.headers.first(name: "Sec-WebSocket-Protocol")?.trimmingCharacters(in: .whitespaces)
                return .upgraded(try NIOAsyncChannel(wrappingChannelSynchronously: channel), subprotocol: chosen)
            }
        }
        var headers = HTTPHeaders()
        let defaultPort = target.tls == nil ? 80 : 443
        headers.add(name: "Host", value: target.port == defaultPort ? bracketed(target.host) : "\(bracketed(target.host)):\(target.port)")
        headers.add(name: "Sec-WebSocket-Protocol", value: target.subprotocols.joined(separator: ","))
        headers.add(name: "User-Agent", value: "Settee-Replicator")
        headers.add(name: "Content-Length", value: "0")
        for (name, value) in target.headers { headers.add(name: name, value: value) }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target.path, headers: headers)
        let configuration = NIOTypedHTTPClientUpgradeConfiguration<Upgrade>(
            upgradeRequestHead: head, upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in
                channel.eventLoop.makeCompletedFuture {
                    .refused(try NIOAsyncChannel(wrappingChannelSynchronously: channel))
                }
            })
        return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
            configuration: .init(upgradeConfiguration: configuration))
    }

    /// The error a refused handshake stands for: the status, and the reason the body gives.
    private static func refusal(_ channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>,
                                _ target: Target) async -> ReplicationError {
        var status = 0
        var body: [UInt8] = []
        do {
            try await channel.executeThenClose { inbound, _ in
                reading: for try await part in inbound {
                    switch part {
                    case .head(let head): status = Int(head.status.code)
                    case .body(let buffer): if body.count < 65_536 { body += buffer.readableBytesView.prefix(65_536 - body.count) }
                    case .end: break reading
                    }
                }
            }
        } catch {
            if status == 0 { return ReplicationError(.transient, "\(target.displayName): the handshake's answer was cut short: \(error)") }
        }
        var detail = ""
        if case .object(let o)? = try? JSON.parse(body) {
            detail = [o["error"]?.stringValue, o["reason"]?.stringValue].compactMap { $0 }.joined(separator: ": ")
        }
        let message = "WebSocket upgrade of \(target.displayName) → \(status)\(detail.isEmpty ? "" : " \(detail)")"
        if [400, 405, 426, 501].contains(status) {
            // Not a WebSocket endpoint for BLIP: no retry will change that.
            return ReplicationError(.unsupported, message + " (the server does not speak Couchbase Lite's protocol here)", status: status)
        }
        return .peer(status: status, message)
    }

    /// Waits for `future`, failing after `timeout`; a handshake that finishes after that has its channel closed.
    private static func withTimeout(_ timeout: TimeAmount, on future: EventLoopFuture<Upgrade>) async throws -> Upgrade {
        let loop = future.eventLoop
        let promise = loop.makePromise(of: Upgrade.self)
        let timedOut = Mutex(false)
        let timer = loop.scheduleTask(in: timeout) {
            timedOut.withLock { $0 = true }
            promise.fail(ReplicationError(.transient, "the WebSocket handshake took longer than \(timeout)"))
        }
        future.whenComplete { result in
            timer.cancel()
            guard !timedOut.withLock({ $0 }) else {
                switch result {
                case .success(.upgraded(let channel, _)): channel.channel.close(promise: nil)
                case .success(.refused(let channel)): channel.channel.close(promise: nil)
                case .failure: break
                }
                return
            }
            promise.completeWith(result)
        }
        let result = try await promise.futureResult.get()
        return result
    }

    private static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || host.split(separator: ".").count == 4 && host.split(separator: ".").allSatisfy { UInt8($0) != nil }
    }

    private static func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }
}
