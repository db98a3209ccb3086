import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOHTTP2
import NIOSSL

/// TLS with HTTP/2 negotiated by ALPN (`--http2`): HTTP/2 connections are served by Hummingbird's HTTP/2 channel,
/// HTTP/1.1 ones (a client that asks for `http/1.1` or names no protocol) by Settee's own connection handling, as
/// on a server without `--http2`.
///
/// Hummingbird's own `HTTP2UpgradeChannel` serves HTTP/1.1 with its `HTTP1Channel`, which can't hand a connection
/// over to a WebSocket: Couchbase Lite's replicator, which speaks HTTP/1.1 and upgrades at `/{db}/_blipsync`, could
/// not sync with a node started with `--http2`. Here HTTP/1.1 is the same channel everywhere
/// (``SetteeHTTP1Channel``), so `wss://` works whether or not HTTP/2 is offered beside it.
struct SetteeHTTP2UpgradeChannel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<NIONegotiatedHTTPVersion<SetteeHTTP1Channel.Value, HTTP2Channel.Value>>
        let channel: any Channel
    }

    private let sslContext: NIOSSLContext
    private let http1: SetteeHTTP1Channel
    private let http2: HTTP2Channel
    private let handshakeTimeout: TimeAmount?

    /// - Parameters:
    ///   - tlsConfiguration: the server's TLS configuration; its ALPN protocols are set here (`h2`, `http/1.1`).
    ///   - http1: the channel for HTTP/1.1 connections.
    ///   - http2: the channel for HTTP/2 connections.
    ///   - handshakeTimeout: a connection that has not finished its TLS handshake and ALPN by then is closed (the
    ///     idle timeout: the chosen channel's own idle handling takes over after).
    /// - Throws: NIOSSL's error when the configuration can't make a TLS context.
    init(tlsConfiguration: TLSConfiguration, http1: SetteeHTTP1Channel, http2: HTTP2Channel,
         handshakeTimeout: TimeAmount?) throws {
        var tls = tlsConfiguration
        tls.applicationProtocols = NIOHTTP2SupportedALPNProtocols
        sslContext = try NIOSSLContext(configuration: tls)
        self.http1 = http1
        self.http2 = http2
        self.handshakeTimeout = handshakeTimeout
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        // A client that connects and never completes the handshake would hold a connection slot for good.
        let stalled = handshakeTimeout.map { timeout in
            channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        }
        let http1 = self.http1, http2 = self.http2
        return channel.configureHTTP2AsyncSecureUpgrade { channel in
            http1.setup(channel: channel, logger: logger)
        } http2ConnectionInitializer: { channel in
            http2.setup(channel: channel, logger: logger)
        }
        .map { negotiated in
            negotiated.whenComplete { _ in stalled?.cancel() }
            return Value(negotiated: negotiated, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await withTaskCancellationHandler {
            do {
                switch try await value.negotiated.get() {
                case .http1_1(let connection): await http1.handle(value: connection, logger: logger)
                case .http2(let connection): await http2.handle(value: connection, logger: logger)
                }
            } catch {
                // A failed or timed-out handshake, or an ALPN protocol neither side should have named: the
                // connection is closed.
                logger.debug("TLS/ALPN negotiation failed: \(error)")
            }
        } onCancel: {
            value.channel.close(promise: nil)
        }
    }
}
