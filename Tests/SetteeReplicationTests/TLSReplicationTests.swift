import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import SetteeCore
import SetteeStore
@testable import SetteeReplication
import Testing

/// A throwaway PKI made with the openssl CLI in a temporary directory: a CA, a server certificate it issued for
/// 127.0.0.1 and localhost, and a self-signed certificate for the same names that the CA did not issue.
final class TestPKI: Sendable {
    static let openssl: String? = ["/usr/bin/openssl", "/usr/local/bin/openssl", "/opt/homebrew/bin/openssl"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    let dir = TempDir()
    var caCertificate: String { dir.path + "/ca.pem" }
    var serverCertificate: String { dir.path + "/server.pem" }
    var serverKey: String { dir.path + "/server.key" }
    var selfSignedCertificate: String { dir.path + "/self.pem" }
    var selfSignedKey: String { dir.path + "/self.key" }

    init() throws {
        let config = """
            [req]
            distinguished_name = dn
            prompt = no
            [dn]
            CN = Settee Test
            [v3_ca]
            basicConstraints = critical,CA:TRUE
            keyUsage = critical,keyCertSign,cRLSign
            subjectKeyIdentifier = hash
            [v3_server]
            basicConstraints = CA:FALSE
            keyUsage = critical,digitalSignature,keyEncipherment
            extendedKeyUsage = serverAuth
            subjectAltName = IP:127.0.0.1,DNS:localhost
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            [v3_self]
            basicConstraints = CA:FALSE
            keyUsage = critical,digitalSignature,keyEncipherment
            extendedKeyUsage = serverAuth
            subjectAltName = IP:127.0.0.1,DNS:localhost
            """
        let cfg = dir.path + "/openssl.cnf"
        try config.write(toFile: cfg, atomically: true, encoding: .utf8)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try Self.run(["req", "-x509", "-config", cfg, "-extensions", "v3_ca"] + ec
                     + ["-keyout", dir.path + "/ca.key", "-out", caCertificate, "-days", "2", "-subj", "/CN=Settee Test CA"])
        try Self.run(["req", "-new", "-config", cfg] + ec
                     + ["-keyout", serverKey, "-out", dir.path + "/server.csr", "-subj", "/CN=localhost"])
        try Self.run(["x509", "-req", "-in", dir.path + "/server.csr", "-CA", caCertificate, "-CAkey", dir.path + "/ca.key",
                      "-CAcreateserial", "-out", serverCertificate, "-days", "2", "-extfile", cfg, "-extensions", "v3_server"])
        try Self.run(["req", "-x509", "-config", cfg, "-extensions", "v3_self"] + ec
                     + ["-keyout", selfSignedKey, "-out", selfSignedCertificate, "-days", "2", "-subj", "/CN=localhost"])
    }

    /// Runs openssl (with posix_spawn: Foundation's Process.run crashed in a memmove here under the parallel suite).
    static func run(_ arguments: [String]) throws {
        _ = try runTool(openssl ?? "/usr/bin/openssl", arguments)
    }
}

/// Runs `settee` with `arguments` to its end; returns its exit status and standard error.
func runSettee(_ arguments: [String], timeout: TimeInterval = 60) throws -> (status: Int32, stderr: String) {
    let p = SpawnedProcess()
    p.executableURL = URL(fileURLWithPath: builtProduct("settee"))
    p.arguments = arguments
    let err = Pipe()
    p.standardOutput = FileHandle.nullDevice
    p.standardError = err
    try p.run()
    let killer = DispatchWorkItem { if p.isRunning { p.terminate() } }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
    let message = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    killer.cancel()
    return (p.terminationStatus, String(decoding: message, as: UTF8.self))
}

/// Waits for a replicator to stop; stops it (and fails) if it runs longer than `limit`.
func stopped(_ replicator: Replicator, within limit: Duration = .seconds(60)) async -> ReplicatorStatus {
    let watchdog = Task {
        try await Task.sleep(for: limit)
        Issue.record("the replicator did not stop within \(limit)")
        replicator.stop()
    }
    let status = await replicator.waitUntilStopped()
    watchdog.cancel()
    return status
}

/// `settee serve --tls-cert --tls-key` and the replicator's certificate verification, against real processes with
/// certificates made by openssl at test time.
@Suite(.serialized, .enabled(if: TestPKI.openssl != nil, "needs the openssl CLI (scripts/install-deps.sh installs it)"))
struct TLSReplicationTests {
    static let auth = "Basic " + Base64.encode(Array("admin:secret".utf8))

    static func tlsServer(_ pki: TestPKI, selfSigned: Bool = false, _ dir: TempDir) throws -> ServerProcess {
        try ServerProcess(dataDirectory: dir.path, extraArguments: [
            "--tls-cert", selfSigned ? pki.selfSignedCertificate : pki.serverCertificate,
            "--tls-key", selfSigned ? pki.selfSignedKey : pki.serverKey,
        ])
    }

    @discardableResult
    static func send(_ client: HTTPClient, _ method: HTTPMethod, _ url: String, _ body: String? = nil) async throws
        -> (status: Int, json: JSON?) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: auth)
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await client.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 24)
        return (Int(response.status.code), try? JSON.parse(Array(bytes.readableBytesView)))
    }

    /// A local database with `count` documents.
    static func localDatabase(_ dir: TempDir, count: Int) throws -> Database {
        let db = try dir.open("local")
        let collection = try db.defaultCollection()
        for i in 0..<count { try collection.put("doc\(i)", #"{"n":\#(i)}"#) }
        return db
    }

    @Test func couchbaseLitesProtocolOverTLSVerifiesTheServer() async throws {
        let pki = try TestPKI()
        let dirT = TempDir(), dirS = TempDir(), dirL = TempDir()
        let trusted = try Self.tlsServer(pki, dirT)
        let selfSigned = try Self.tlsServer(pki, selfSigned: true, dirS)
        defer { trusted.stop(); selfSigned.stop() }
        let db = try Self.localDatabase(dirL, count: 20)
        defer { db.close() }
        let client = try RemoteEndpoint.client(trustingRootCertificatesAt: pki.caCertificate)
        #expect(try await Self.send(client, .PUT, "https://127.0.0.1:\(trusted.port)/target").status == 201)
        #expect(try await Self.send(client, .PUT, "https://127.0.0.1:\(trusted.port)/target/from-server", #"{"v":1}"#).status == 201)

        func sync(_ server: ServerProcess, ca: String?) async -> ReplicatorStatus {
            var config = ReplicatorConfiguration(
                database: db, target: URLEndpoint(url: URL(string: "wss://127.0.0.1:\(server.port)/target")!))
            config.authenticator = BasicAuthenticator(username: "admin", password: "secret")
            config.trustedRootCertificatesPath = ca
            config.maxAttempts = 2
            let replicator = Replicator(config: config)
            replicator.start()
            return await stopped(replicator)
        }
        // With the CA: push and pull over wss://.
        var status = await sync(trusted, ca: pki.caCertificate)
        #expect(status.error == nil, "\(String(describing: status.error))")
        let info = try await Self.send(client, .GET, "https://127.0.0.1:\(trusted.port)/target")
        #expect(info.json?["doc_count"] == .int(21))
        #expect(try db.defaultCollection().record(id: "from-server") != nil)
        // A certificate the CA did not issue: a TLS error, not retries.
        status = await sync(selfSigned, ca: pki.caCertificate)
        #expect(status.error?.kind == .tls, "\(String(describing: status.error))")
    }

    @Test func servesHTTPSAndNotPlainHTTP() async throws {
        let pki = try TestPKI()
        let dir = TempDir()
        let server = try Self.tlsServer(pki, dir)
        defer { server.stop() }
        let trusting = try RemoteEndpoint.client(trustingRootCertificatesAt: pki.caCertificate)
        for host in ["127.0.0.1", "localhost"] {
            let r = try await Self.send(trusting, .GET, "https://\(host):\(server.port)/")
            #expect(r.status == 200)
            #expect(r.json?["couchdb"] == "Welcome")
        }
        #expect(try await Self.send(trusting, .PUT, "https://127.0.0.1:\(server.port)/db").status == 201)
        // The same client object is returned for the same CA bundle.
        #expect(try RemoteEndpoint.client(trustingRootCertificatesAt: pki.caCertificate) === trusting)
        // Plain HTTP to the TLS port gets no HTTP answer.
        await #expect(throws: (any Error).self) {
            try await Self.send(RemoteEndpoint.sharedClient, .GET, "http://127.0.0.1:\(server.port)/")
        }
        // The system's trust store does not know the test CA.
        await #expect(throws: (any Error).self) {
            try await Self.send(RemoteEndpoint.sharedClient, .GET, "https://127.0.0.1:\(server.port)/")
        }
    }

    /// `settee healthcheck` (the Docker image's health check): 0 for a node that answers `/_up`, over HTTP or over
    /// HTTPS with a certificate it does not check; 1, with the reason on stderr, for one that is not there.
    @Test func healthcheckAnswersForHTTPAndHTTPSNodesAndFailsForNone() throws {
        let pki = try TestPKI()
        let plainDir = TempDir(), tlsDir = TempDir()
        let plain = try ServerProcess(dataDirectory: plainDir.path)
        defer { plain.stop() }
        let secure = try Self.tlsServer(pki, selfSigned: true, tlsDir)
        defer { secure.stop() }
        #expect(try runSettee(["healthcheck", "--url", "http://127.0.0.1:\(plain.port)"]).status == 0)
        #expect(try runSettee(["healthcheck", "--url", "https://127.0.0.1:\(secure.port)/"]).status == 0)
        let closed = freePort()
        let down = try runSettee(["healthcheck", "--url", "http://127.0.0.1:\(closed)", "--timeout", "2"])
        #expect(down.status == 1)
        #expect(down.stderr.contains("settee healthcheck: http://127.0.0.1:\(closed)/_up"), "\(down.stderr)")
        // Plain HTTP to the TLS node is no answer either.
        #expect(try runSettee(["healthcheck", "--url", "http://127.0.0.1:\(secure.port)", "--timeout", "2"]).status == 1)
    }

    @Test func servesHTTP2WhenAsked() async throws {
        let pki = try TestPKI()
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path, extraArguments: [
            "--tls-cert", pki.serverCertificate, "--tls-key", pki.serverKey, "--http2",
        ])
        defer { server.stop() }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(pki.caCertificate)
        var config = HTTPClient.Configuration(tlsConfiguration: tls)
        config.httpVersion = .automatic
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: config)
        do {
            try await http2Checks(client, server, pki)
        } catch {
            Issue.record(error)
        }
        try await client.shutdown()
    }

    /// With `--http2`, HTTP/1.1 clients still get Settee's own connection handling, so Couchbase Lite's protocol
    /// (a WebSocket upgrade over HTTP/1.1) is served beside HTTP/2 (it answered 501 when Hummingbird's channel
    /// served HTTP/1.1 there).
    @Test func couchbaseLitesProtocolIsServedBesideHTTP2() async throws {
        let pki = try TestPKI()
        let dir = TempDir(), dirL = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path, extraArguments: [
            "--tls-cert", pki.serverCertificate, "--tls-key", pki.serverKey, "--http2",
        ])
        defer { server.stop() }
        let db = try Self.localDatabase(dirL, count: 50)
        defer { db.close() }
        let client = try RemoteEndpoint.client(trustingRootCertificatesAt: pki.caCertificate)
        #expect(try await Self.send(client, .PUT, "https://127.0.0.1:\(server.port)/target").status == 201)
        #expect(try await Self.send(client, .PUT, "https://127.0.0.1:\(server.port)/target/from-server", #"{"v":1}"#).status == 201)
        var config = ReplicatorConfiguration(
            database: db, target: URLEndpoint(url: URL(string: "wss://127.0.0.1:\(server.port)/target")!))
        config.authenticator = BasicAuthenticator(username: "admin", password: "secret")
        config.trustedRootCertificatesPath = pki.caCertificate
        config.maxAttempts = 2
        let replicator = Replicator(config: config)
        replicator.start()
        let status = await stopped(replicator)
        #expect(status.error == nil, "\(String(describing: status.error))")
        #expect(try await Self.send(client, .GET, "https://127.0.0.1:\(server.port)/target").json?["doc_count"] == .int(51))
        #expect(try db.defaultCollection().record(id: "from-server") != nil)
    }

    /// With `--http2`, a client that connects and never starts its TLS handshake is closed after the idle
    /// timeout, as on every other listener (it held a connection slot for good).
    @Test func aSilentClientIsClosedBesideHTTP2() throws {
        let pki = try TestPKI()
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path, extraArguments: [
            "--tls-cert", pki.serverCertificate, "--tls-key", pki.serverKey, "--http2", "--idle-timeout", "1",
        ])
        defer { server.stop() }
        #expect(try Self.silentConnectionIsClosed(port: server.port, within: 6))
    }

    /// Connects to 127.0.0.1:`port`, sends nothing, and waits up to `seconds` for the server to close.
    static func silentConnectionIsClosed(port: Int, within seconds: Int) throws -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        var limit = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 64)
        return recv(fd, &buffer, buffer.count, 0) == 0  // end of stream; -1 (EAGAIN) when the wait ran out
    }

    func http2Checks(_ client: HTTPClient, _ server: ServerProcess, _ pki: TestPKI) async throws {
        var request = HTTPClientRequest(url: "https://127.0.0.1:\(server.port)/")
        request.method = .GET
        let response = try await client.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 20)
        #expect(response.status == .ok)
        #expect(response.version == .http2)
        // HTTP/1.1 clients (the replicator's) are still served.
        let trusting = try RemoteEndpoint.client(trustingRootCertificatesAt: pki.caCertificate)
        #expect(try await Self.send(trusting, .PUT, "https://127.0.0.1:\(server.port)/db").status == 201)
        let body = (0..<300).map { #"{"_id":"d\#($0)"}"# }.joined(separator: ",")
        #expect(try await Self.send(trusting, .POST, "https://127.0.0.1:\(server.port)/db/_bulk_docs",
                                    #"{"docs":[\#(body)]}"#).status == 201)
        var changes = HTTPClientRequest(url: "https://127.0.0.1:\(server.port)/db/_changes")
        changes.headers.add(name: "Authorization", value: Self.auth)
        let h2 = try await client.execute(changes, timeout: .seconds(30))
        let bytes = try await h2.body.collect(upTo: 1 << 24)
        #expect(h2.version == .http2)
        #expect(try JSON.parse(Array(bytes.readableBytesView))["results"]?.arrayValue?.count == 300)
    }

    @Test func serveRefusesUnusableCertificatesAtStart() throws {
        let pki = try TestPKI()
        let dir = TempDir()
        let base = ["serve", "--data", dir.path, "--port", "0"]
        var r = try runSettee(base + ["--tls-cert", pki.serverCertificate])
        #expect(r.status != 0)
        #expect(r.stderr.contains("--tls-cert and --tls-key go together"), "\(r.stderr)")
        r = try runSettee(base + ["--tls-cert", dir.path + "/missing.pem", "--tls-key", pki.serverKey])
        #expect(r.status != 0)
        #expect(r.stderr.contains("missing.pem does not exist"), "\(r.stderr)")
        r = try runSettee(base + ["--tls-cert", pki.serverKey, "--tls-key", pki.serverKey])
        #expect(r.status != 0)
        #expect(r.stderr.contains("is not a PEM certificate"), "\(r.stderr)")
        r = try runSettee(base + ["--tls-cert", pki.serverCertificate, "--tls-key", pki.serverCertificate])
        #expect(r.status != 0)
        #expect(r.stderr.contains("is not a PEM private key"), "\(r.stderr)")
        r = try runSettee(base + ["--tls-cert", pki.serverCertificate, "--tls-key", pki.selfSignedKey])
        #expect(r.status != 0)
        #expect(r.stderr.contains("cannot be used together"), "\(r.stderr)")
        r = try runSettee(base + ["--ca-file", dir.path + "/nope.pem"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("--ca-file"), "\(r.stderr)")
        // Refused before the data directory is touched.
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/fresh"))
        r = try runSettee(["serve", "--data", dir.path + "/fresh", "--port", "0",
                           "--tls-cert", pki.serverCertificate, "--tls-key", pki.selfSignedKey])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/fresh"))
        r = try runSettee(base + ["--http2"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("over TLS only"), "\(r.stderr)")
    }

    @Test func replicatorVerifiesThePeerCertificate() async throws {
        let pki = try TestPKI()
        let dirT = TempDir(), dirS = TempDir(), dirL = TempDir()
        let trusted = try Self.tlsServer(pki, dirT)
        let selfSigned = try Self.tlsServer(pki, selfSigned: true, dirS)
        defer { trusted.stop(); selfSigned.stop() }
        let db = try Self.localDatabase(dirL, count: 20)
        defer { db.close() }

        func push(to server: ServerProcess, ca: String?) async throws -> ReplicatorStatus {
            var config = ReplicatorConfiguration(
                database: db, target: try URLEndpoint(url: "https://127.0.0.1:\(server.port)/target"))
            config.replicatorType = .push
            config.createTarget = true
            config.authenticator = BasicAuthenticator(username: "admin", password: "secret")
            config.trustedRootCertificatesPath = ca
            let replicator = Replicator(config: config)
            replicator.start()
            return await stopped(replicator)
        }

        // Without the CA (the system's trust store): a certificate error, at once, not retries.
        let clock = ContinuousClock()
        let start = clock.now
        var status = try await push(to: trusted, ca: nil)
        #expect(status.error?.kind == .tls, "\(String(describing: status.error))")
        #expect(status.docsWritten == 0)
        #expect(clock.now - start < .seconds(30))

        // With the CA: the documents arrive.
        status = try await push(to: trusted, ca: pki.caCertificate)
        #expect(status.error == nil, "\(String(describing: status.error))")
        #expect(status.docsWritten == 20)
        let client = try RemoteEndpoint.client(trustingRootCertificatesAt: pki.caCertificate)
        let info = try await Self.send(client, .GET, "https://127.0.0.1:\(trusted.port)/target")
        #expect(info.json?["doc_count"] == .int(20))

        // A self-signed certificate for the right names, not issued by the CA: refused.
        status = try await push(to: selfSigned, ca: pki.caCertificate)
        #expect(status.error?.kind == .tls, "\(String(describing: status.error))")
        #expect(status.docsWritten == 0)
        #expect(status.error?.message.contains("127.0.0.1") == true)
    }

    @Test func nodeReplicateAndCLIReportCertificateErrors() async throws {
        let pki = try TestPKI()
        let dirT = TempDir(), dirA = TempDir(), dirB = TempDir()
        let tlsNode = try Self.tlsServer(pki, dirT)
        // A plain node that trusts the CA, and one that does not.
        let a = try ServerProcess(dataDirectory: dirA.path, extraArguments: ["--ca-file", pki.caCertificate])
        let b = try ServerProcess(dataDirectory: dirB.path)
        defer { tlsNode.stop(); a.stop(); b.stop() }
        let target = "https://admin:secret@127.0.0.1:\(tlsNode.port)/fromnode"
        for node in [a, b] {
            try await HTTP.send(.PUT, "http://127.0.0.1:\(node.port)/db")
            try await HTTP.load("http://127.0.0.1:\(node.port)/db", prefix: "d", count: 10)
        }
        var r = try await HTTP.send(.POST, "http://127.0.0.1:\(a.port)/_replicate",
                                    #"{"source":"db","target":"\#(target)","create_target":true}"#)
        #expect(r.status == 200, "\(String(describing: r.json))")
        #expect(r.json?["history"]?[0]?["docs_written"] == .int(10))

        r = try await HTTP.send(.POST, "http://127.0.0.1:\(b.port)/_replicate",
                                #"{"source":"db","target":"\#(target)","create_target":true}"#)
        #expect(r.status == 502, "\(String(describing: r.json))")
        #expect(r.json?["error"] == "tls_error")
        #expect(r.json?["reason"]?.stringValue?.contains("TLS") == true, "\(String(describing: r.json))")

        // A continuous job fails (not retried forever) and `_scheduler/jobs` says why; so does a `_replicator` document.
        r = try await HTTP.send(.POST, "http://127.0.0.1:\(b.port)/_replicate",
                                #"{"source":"db","target":"\#(target)","create_target":true,"continuous":true}"#)
        #expect(r.status == 202)
        try await HTTP.send(.PUT, "http://127.0.0.1:\(b.port)/_replicator")
        try await HTTP.send(.PUT, "http://127.0.0.1:\(b.port)/_replicator/totls",
                            #"{"source":"db","target":"\#(target)","create_target":true}"#)
        #expect(try await waitFor(seconds: 40) {
            let jobs = try await HTTP.send(.GET, "http://127.0.0.1:\(b.port)/_scheduler/jobs").json?["jobs"]?.arrayValue ?? []
            return jobs.contains { $0["state"] == "failed" && $0["doc_id"] == .null
                && $0["info"]?["error"]?.stringValue?.contains("TLS handshake with 127.0.0.1 failed") == true }
        }, "a continuous replication to an untrusted certificate is listed as failed")
        #expect(try await waitFor(seconds: 40) {
            let doc = try await HTTP.send(.GET, "http://127.0.0.1:\(b.port)/_replicator/totls").json
            return doc?["_replication_state"] == "failed"
                && doc?["_replication_state_reason"]?.stringValue?.contains("TLS") == true
        }, "the _replicator document is marked failed with the TLS reason")

        // Credentials over plain HTTP to a non-loopback host: refused before any connection, unless allowed.
        r = try await HTTP.send(.POST, "http://127.0.0.1:\(b.port)/_replicate",
                                #"{"source":"db","target":"http://admin:secret@10.255.255.1:5984/x"}"#)
        #expect(r.status == 400)
        #expect(r.json?["reason"]?.stringValue?.contains("refusing to send credentials over plain HTTP to 10.255.255.1") == true,
                "\(String(describing: r.json))")
        r = try await HTTP.send(.POST, "http://127.0.0.1:\(b.port)/_replicate",
                                #"{"source":"db","target":"http://admin:secret@10.255.255.1:5984/x","allow_insecure_credentials":"yes"}"#)
        #expect(r.status == 400)

        // `settee replicate --ca-file`.
        let cliData = TempDir()
        let local = try cliData.open("clidb")
        try local.defaultCollection().put("one", #"{"v":1}"#)
        local.close()
        let cliTarget = "https://admin:secret@127.0.0.1:\(tlsNode.port)/fromcli"
        var run = try runSettee(["replicate", "--data", cliData.path, "clidb", cliTarget, "--create-target", "--quiet"])
        #expect(run.status == 1)
        #expect(run.stderr.contains("TLS"), "\(run.stderr)")
        run = try runSettee(["replicate", "--data", cliData.path, "clidb", cliTarget, "--create-target", "--quiet",
                             "--ca-file", pki.caCertificate])
        #expect(run.status == 0, "\(run.stderr)")
        let client = try RemoteEndpoint.client(trustingRootCertificatesAt: pki.caCertificate)
        let info = try await Self.send(client, .GET, "https://127.0.0.1:\(tlsNode.port)/fromcli")
        #expect(info.json?["doc_count"] == .int(1))
        run = try runSettee(["replicate", "--data", cliData.path, "clidb", "http://u:p@10.255.255.1:5984/x", "--quiet"])
        #expect(run.status == 1)
        #expect(run.stderr.contains("refusing to send credentials over plain HTTP"), "\(run.stderr)")
    }
}

/// The plain-HTTP credential check, without any server.
@Suite struct InsecureCredentialsTests {
    func refused(_ body: () throws -> Void) -> Bool {
        do {
            try body()
            return false
        } catch let e as ReplicationError {
            return e.kind == .badRequest && e.message.contains("refusing to send credentials over plain HTTP to 10.255.255.1")
        } catch {
            return false
        }
    }

    @Test func credentialsOverPlainHTTPToANonLoopbackHostAreRefused() throws {
        let remote = "http://10.255.255.1:5984/db"
        #expect(refused { _ = try RemoteEndpoint(url: "http://user:pw@10.255.255.1:5984/db") })
        #expect(refused { _ = try RemoteEndpoint(url: remote, authentication: .basic(user: "u", password: "p")) })
        #expect(refused { _ = try RemoteEndpoint(url: remote, authentication: .session(user: "u", password: "p")) })
        #expect(refused { _ = try RemoteEndpoint(url: remote, authentication: .bearer("t")) })
        #expect(refused { _ = try RemoteEndpoint(url: remote, headers: [("authorization", "Basic eDp5")]) })
        #expect(refused { _ = try RemoteEndpoint(url: remote, headers: [("Cookie", "AuthSession=x")]) })
        // Allowed: no credentials, the explicit flag, https, loopback.
        _ = try RemoteEndpoint(url: remote)
        _ = try RemoteEndpoint(url: remote, headers: [("X-Trace", "1")])
        let allowed = try RemoteEndpoint(url: "http://user:pw@10.255.255.1:5984/db", allowInsecureCredentials: true)
        #expect(try allowed.sibling(database: "other").allowInsecureCredentials)
        _ = try RemoteEndpoint(url: "https://user:pw@10.255.255.1:5984/db")
        _ = try RemoteEndpoint(url: "HTTPS://user:pw@example.com/db")
        for host in ["127.0.0.1", "127.5.6.7", "localhost", "[::1]"] {
            _ = try RemoteEndpoint(url: "http://user:pw@\(host):5984/db")
        }
        #expect(!RemoteEndpoint.isLoopback("127.example.com"))
        #expect(!RemoteEndpoint.isLoopback("10.0.0.1"))
        #expect(!RemoteEndpoint.isLoopback("::2"))
    }

    @Test func theReplicatorRefusesBeforeConnecting() async throws {
        let dir = TempDir()
        let db = try dir.open("local")
        defer { db.close() }
        var config = ReplicatorConfiguration(database: db, target: try URLEndpoint(url: "http://10.255.255.1:5984/db"))
        config.authenticator = BasicAuthenticator(username: "u", password: "p")
        let replicator = Replicator(config: config)
        replicator.start()
        let status = await stopped(replicator, within: .seconds(5))
        #expect(status.error?.kind == .badRequest)
        #expect(status.error?.message.contains("refusing to send credentials over plain HTTP") == true)
        // With the allowance the endpoint is built (the replication itself would then try to connect).
        config.allowInsecureCredentials = true
        let target = try #require(try config.resolvedTarget() as? RemoteEndpoint)
        #expect(target.allowInsecureCredentials)
    }

    @Test func anUnreadableCABundleIsAClearError() throws {
        #expect(throws: ReplicationError.self) {
            _ = try RemoteEndpoint(url: "https://127.0.0.1:1/db", trustedRootCertificatesPath: "/nonexistent/ca.pem")
        }
    }
}
