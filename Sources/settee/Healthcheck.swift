import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL

/// `settee healthcheck`: whether a node answers `GET /_up` with 200 — the Docker image's `HEALTHCHECK`, which so
/// needs neither a shell nor curl in the image.
struct Healthcheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 if the node answers GET /_up with 200, else 1 (the Docker image's health check).",
        discussion: """
            By default it asks the node on this host: http://127.0.0.1:$SETTEE_PORT (5984 when unset), or https:// \
            when SETTEE_TLS_CERT is set, as `settee serve` then serves HTTPS only. The node's certificate is not \
            checked (it names the node's public host, not 127.0.0.1); give --url for another node.
            """)

    @Option(help: "The node's root URL.") var url: String?
    @Option(help: "Seconds to wait for the answer.") var timeout: Int = 4

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let root = url ?? {
            let scheme = (environment["SETTEE_TLS_CERT"] ?? "").isEmpty ? "http" : "https"
            return "\(scheme)://127.0.0.1:\(environment["SETTEE_PORT"].flatMap { Int($0) } ?? 5984)"
        }()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        let client = HTTPClient(eventLoopGroupProvider: .singleton,
                                configuration: HTTPClient.Configuration(tlsConfiguration: tls))
        let request = HTTPClientRequest(url: (root.hasSuffix("/") ? String(root.dropLast()) : root) + "/_up")
        let status: Result<UInt, any Error>
        do {
            let response = try await client.execute(request, timeout: .seconds(Int64(max(1, timeout))))
            _ = try? await response.body.collect(upTo: 1 << 16)
            status = .success(response.status.code)
        } catch {
            status = .failure(error)
        }
        try? await client.shutdown()
        switch status {
        case .success(200):
            return
        case .success(let code):
            FileHandle.standardError.write(Data("settee healthcheck: \(root)/_up answered \(code)\n".utf8))
        case .failure(let error):
            FileHandle.standardError.write(Data("settee healthcheck: \(root)/_up: \(error)\n".utf8))
        }
        throw ExitCode(1)
    }
}
