import Foundation
import NIOSSL
import SetteeCore

/// A `ws://` or `wss://` ``RemoteEndpoint``: Couchbase Lite's replication protocol at `{url}/_blipsync`, with the
/// endpoint's credentials, headers and TLS settings.
extension RemoteEndpoint {
    /// The HTTP form of a WebSocket URL (`ws://` → `http://`, `wss://` → `https://`); others unchanged.
    static func httpForm(_ url: String) -> String {
        let lower = url.lowercased()
        if lower.hasPrefix("ws://") { return "http://" + url.dropFirst(5) }
        if lower.hasPrefix("wss://") { return "https://" + url.dropFirst(6) }
        return url
    }

    func makeBLIPClient(secure: Bool) throws -> BLIPClient {
        guard let components = URLComponents(string: urlString), let host = components.host else {
            throw ReplicationError(.badRequest, "Not a ws(s) database URL: \(urlString)")
        }
        var tls: NIOSSLContext?
        if secure {
            let caPath = trustedRootCertificatesPath.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            let configuration = try Self.tlsConfiguration(caPath: caPath, certPath: clientCertificate?.certificatePath,
                                                          keyPath: clientCertificate?.keyPath)
            do {
                tls = try NIOSSLContext(configuration: configuration)
            } catch {
                throw ReplicationError(.tls, "cannot set up TLS for \(urlString): \(error)")
            }
        }
        let endpoint = self
        let settings = BLIPClient.Settings(
            displayName: urlString, databaseName: databaseName,
            host: host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host,
            port: components.port ?? (secure ? 443 : 80),
            path: components.percentEncodedPath + "/_blipsync", tls: tls, tlsHint: tlsHint,
            headers: { () throws(ReplicationError) in try await endpoint.handshakeHeaders() })
        return BLIPClient(settings: settings)
    }

    /// The WebSocket handshake's headers: the endpoint's own and its credentials (a session signs in over HTTP
    /// first, as Couchbase Lite's `SessionAuthenticator` has its cookie beforehand).
    func handshakeHeaders() async throws(ReplicationError) -> [(String, String)] {
        var out = headers
        switch authentication {
        case .none: break
        case .basic(let user, let password):
            out.append(("Authorization", "Basic " + Base64.encode(Array("\(user):\(password)".utf8))))
        case .bearer(let token):
            out.append(("Authorization", "Bearer " + token))
        case .session(let user, let password):
            let cookie = try await ReplicationError.mapping { try await signIn(user: user, password: password) }
            session.cookie = cookie
            if let cookie { out.append(("Cookie", cookie)) }
        }
        return out
    }

    /// The same `ws://` endpoint for a named collection of its database: its own connection, which asks for the
    /// collection with `getCollections` and names it in every message, as Couchbase Lite 3 does.
    func forCollection(scope: String, name: String) throws -> RemoteEndpoint {
        guard let blip else { return self }
        var copy = self
        var settings = blip.settings
        settings.collection = (scope, name)
        copy.blip = BLIPClient(settings: settings)
        return copy
    }

    /// Closes a `ws://` endpoint's connection (the replicator using it stopped); nothing for an HTTP endpoint.
    func disconnect() {
        blip?.disconnect()
    }
}
