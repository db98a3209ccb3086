import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import SetteeBLIP
import SetteeCore
import SetteeReplication
import SetteeStore

/// `GET /{db}/_blipsync` (and `/{db}.{scope}.{collection}/_blipsync`): Couchbase Lite's replication protocol.
///
/// The request is authenticated and authorized like any other (a database reader may connect; ``Access/member``
/// and above may also push). It must be a WebSocket upgrade (`Upgrade: websocket`, `Sec-WebSocket-Version: 13`, a
/// `Sec-WebSocket-Key`) asking for a sub-protocol Settee serves, `BLIP_3+CBMobile_3` or `BLIP_3+CBMobile_2`; the
/// answer is `101 Switching Protocols` naming the first of those the client listed, and the connection then
/// carries BLIP frames (``BLIPSession``) for ``BLIPSyncHandler``.
///
/// Served on HTTP/1.1, plain (`ws://`) or over TLS (`wss://`, with or without HTTP/2 offered beside it), by Settee's
/// own connection handling (``SetteeHTTP1Channel``); with Hummingbird's channel (`--http1-channel hummingbird`) the
/// route answers 501. A WebSocket over HTTP/2 (RFC 8441) is not served; Couchbase Lite's replicator uses HTTP/1.1.
enum BLIPRoutes {
    /// The sub-protocols served, best first.
    static let subprotocols = ["BLIP_3+CBMobile_3", "BLIP_3+CBMobile_2"]

    static func sync(_ call: inout Call, _ target: Keyspace) async throws -> Response {
        guard call.method == .get else { throw CouchError.methodNotAllowed("GET") }
        let config = call.node.configuration
        guard config.http1Channel == .settee else {
            throw CouchError(.notImplemented, "not_implemented",
                             "_blipsync is served by Settee's own HTTP/1.1 connection handling, not with --http1-channel hummingbird")
        }
        guard call.header(.upgrade)?.lowercased().contains("websocket") == true,
              let key = call.header(.secWebSocketKey), !key.isEmpty else {
            throw CouchError.badRequest("_blipsync needs a WebSocket upgrade (Upgrade: websocket, Sec-WebSocket-Key)")
        }
        guard call.header(.secWebSocketVersion) == "13" else {
            throw CouchError.badRequest("Unsupported WebSocket version (Sec-WebSocket-Version must be 13)")
        }
        let offered = (call.header(.secWebSocketProtocol) ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard let chosen = offered.first(where: subprotocols.contains) else {
            throw CouchError.badRequest("No BLIP sub-protocol Settee serves was offered (\(subprotocols.joined(separator: ", ")))")
        }
        let (db, collection) = try target.open(call.node)
        let accept = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
        var headers = HTTPFields()
        headers[.upgrade] = "websocket"
        headers[.connection] = "Upgrade"
        headers[.secWebSocketAccept] = accept
        headers[.secWebSocketProtocol] = chosen
        var made = BLIPSyncHandler.Context(node: call.node, database: db, collection: collection, writer: call.writer,
                                           canPush: call.access >= .member, canWriteDesign: call.access >= .admin,
                                           logger: Logger(label: "settee.blip"))
        if call.access < .admin && !call.isAdmin {
            // Every batch asks the channel index what this caller may read: a sync function set (or a `*` grant
            // revoked) while the connection is open takes effect on it.
            made.limitedReader = BLIPSyncHandler.ChannelReader(user: call.user, roles: call.userCtx.roles)
        }
        let context = made
        let body = ResponseBody { writer in
            guard let channelWriter = writer as? ChannelResponseWriter else { return }
            let channel = try await channelWriter.switchToWebSocket(maxFrameSize: 1 << 24)
            let session = BLIPSession(logger: context.logger)
            let handler = BLIPSyncHandler(context: context, session: session)
            let notice = context.node.shutdownNotice.onShutdown { session.close() }
            await session.run(channel) { request in await handler.handle(request) }
            context.node.shutdownNotice.remove(notice)
            handler.stop()
        }
        return Response(status: .switchingProtocols, headers: headers, body: body)
    }
}
