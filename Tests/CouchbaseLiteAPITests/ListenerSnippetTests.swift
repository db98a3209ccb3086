import Foundation
import Testing
import Settee
import SetteeListener

/// Couchbase Lite's peer-to-peer sync (Swift): one app listens, the other replicates with it, over real HTTPS
/// sockets on loopback.
@Suite struct ListenerSnippetTests {
    @Test func twoEmbeddedAppsReplicateThroughAListener() async throws {
        let passive = try SnippetDatabase("passive"), active = try SnippetDatabase("active")
        try passive.collection.save(document: MutableDocument(id: "from-passive").setString("p", forKey: "side"))
        try active.collection.save(document: MutableDocument(id: "from-active").setString("a", forKey: "side"))

        // The passive peer listens.
        var listenerConfig = URLEndpointListenerConfiguration(collections: [passive.collection])
        listenerConfig.networkInterface = "127.0.0.1"
        listenerConfig.authenticator = ListenerPasswordAuthenticator { username, password in
            username == "peer" && password == "secret"
        }
        let listener = URLEndpointListener(config: listenerConfig)
        try listener.start()
        defer { listener.stop() }
        let url = try #require(listener.urls?.first)
        #expect(url.scheme == "https" && url.port == Int(listener.port ?? 0))
        let identity = try #require(listener.tlsIdentity)

        // The active peer replicates with it, trusting its self-signed certificate.
        var config = ReplicatorConfiguration(target: URLEndpoint(url: url))
        config.addCollection(active.collection)
        config.authenticator = BasicAuthenticator(username: "peer", password: "secret")
        config.trustedRootCertificatesPath = identity.certificatePath
        let replicator = Replicator(config: config)
        replicator.start()
        let status = await replicator.waitUntilStopped()
        #expect(status.error == nil, "\(String(describing: status.error))")
        #expect(try passive.collection.document(id: "from-active")?.string(forKey: "side") == "a")
        #expect(try active.collection.document(id: "from-passive")?.string(forKey: "side") == "p")

        // A session cookie got from the listener's `_session` works too (Couchbase Lite's SessionAuthenticator).
        let sessionID = try await Self.sessionCookie(url: url, certificate: identity.certificatePath)
        try active.collection.save(document: MutableDocument(id: "by-session"))
        var bySession = ReplicatorConfiguration(target: URLEndpoint(url: url))
        bySession.addCollection(active.collection)
        bySession.replicatorType = .push
        bySession.authenticator = SessionAuthenticator(sessionID: sessionID, cookieName: "AuthSession")
        bySession.trustedRootCertificatesPath = identity.certificatePath
        let sessionReplicator = Replicator(config: bySession)
        sessionReplicator.start()
        #expect(await sessionReplicator.waitUntilStopped().error == nil)
        #expect(try passive.collection.document(id: "by-session") != nil)

        // Wrong credentials are refused; the served database stays open after the listener stops.
        var wrong = ReplicatorConfiguration(target: URLEndpoint(url: url))
        wrong.addCollection(active.collection)
        wrong.authenticator = BasicAuthenticator(username: "peer", password: "nope")
        wrong.trustedRootCertificatesPath = identity.certificatePath
        let refused = Replicator(config: wrong)
        refused.start()
        #expect(await refused.waitUntilStopped().error?.kind == .unauthorized)
        listener.stop()
        #expect(listener.urls == nil)
        try passive.collection.save(document: MutableDocument(id: "after-stop"))
    }

    /// Signs in at the listener's `_session` (over curl, trusting the listener's certificate) and returns the
    /// `AuthSession` cookie's value.
    static func sessionCookie(url: URL, certificate: String) async throws -> String {
        var server = url
        server.deleteLastPathComponent()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["curl", "-s", "-i", "--cacert", certificate, "-H", "Content-Type: application/json",
                             "-d", #"{"name":"peer","password":"secret"}"#, server.absoluteString + "_session"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let line = try #require(output.split(separator: "\r\n").first { $0.lowercased().hasPrefix("set-cookie: authsession=") })
        let value = line.dropFirst("set-cookie: AuthSession=".count).prefix { $0 != ";" }
        return String(value)
    }

    @Test func aListenerBeyondLoopbackNeedsAnAuthenticator() throws {
        let s = try SnippetDatabase()
        var config = URLEndpointListenerConfiguration(collections: [s.collection])
        config.disableTLS = true
        let listener = URLEndpointListener(config: config)
        #expect(throws: SetteeError.self) { try listener.start() }
        config.networkInterface = "127.0.0.1"
        let local = URLEndpointListener(config: config)
        try local.start()
        #expect(local.urls?.first?.absoluteString == "http://127.0.0.1:\(local.port!)/my-database")
        local.stop()
        let other = try SnippetDatabase("other")
        #expect(throws: SetteeError.self) {
            try URLEndpointListener(config: URLEndpointListenerConfiguration(collections: [s.collection, other.collection])).start()
        }
    }

    @Test func aCertificateAuthenticatorAdmitsOnlyPeersWithTrustedCertificates() async throws {
        let passive = try SnippetDatabase("passive"), active = try SnippetDatabase("active")
        try passive.collection.save(document: MutableDocument(id: "served"))
        let peer = try TLSIdentity.createIdentity(forServer: false, commonName: "peer", label: "peer",
                                                  directory: active.dir.path + "/tls")
        let stranger = try TLSIdentity.createIdentity(forServer: false, commonName: "stranger", label: "stranger",
                                                      directory: active.dir.path + "/tls")
        var listenerConfig = URLEndpointListenerConfiguration(collections: [passive.collection])
        // Beyond loopback is allowed: only holders of a trusted certificate get through the handshake.
        listenerConfig.networkInterface = "0.0.0.0"
        listenerConfig.authenticator = try ListenerCertificateAuthenticator(rootCertificates: [peer],
                                                                           bundleDirectory: passive.dir.path)
        let listener = URLEndpointListener(config: listenerConfig)
        try listener.start()
        defer { listener.stop() }
        let port = try #require(listener.port)
        let url = try #require(URL(string: "https://localhost:\(port)/passive"))
        let serverCertificate = try #require(listener.tlsIdentity).certificatePath

        func pull(as identity: TLSIdentity?) async -> ReplicatorStatus {
            var config = ReplicatorConfiguration(target: URLEndpoint(url: url))
            config.addCollection(active.collection)
            config.replicatorType = .pull
            config.maxAttempts = 1
            config.trustedRootCertificatesPath = serverCertificate
            if let identity { config.authenticator = ClientCertificateAuthenticator(identity: identity) }
            let replicator = Replicator(config: config)
            replicator.start()
            return await replicator.waitUntilStopped()
        }
        let refused = await pull(as: nil)
        #expect(refused.error != nil)
        #expect(try active.collection.document(id: "served") == nil)
        let strangerStatus = await pull(as: stranger)
        #expect(strangerStatus.error != nil)
        #expect(try active.collection.document(id: "served") == nil)
        let admitted = await pull(as: peer)
        #expect(admitted.error == nil, "\(String(describing: admitted.error))")
        #expect(try active.collection.document(id: "served") != nil)
    }
}
