import AsyncHTTPClient
import Foundation
public import NIOCore
public import NIOHTTP1
public import SetteeCore

/// A small JSON-over-HTTP client for driving cluster nodes (AsyncHTTPClient, one shared pool).
public enum ClusterHTTP {
    static let client: HTTPClient = {
        var config = HTTPClient.Configuration(timeout: .init(connect: .seconds(3), read: .seconds(30)))
        config.httpVersion = .http1Only
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: config)
    }()

    public struct Reply: Sendable {
        public let status: Int
        public let json: JSON?
    }

    /// Sends a request; `url` may carry `user:password@` (sent as basic auth).
    @discardableResult
    public static func send(_ method: HTTPMethod, _ url: String, _ body: String? = nil,
                            timeout: TimeAmount = .seconds(30)) async throws -> Reply {
        var target = url
        var auth: String?
        if let schemeEnd = url.range(of: "://"), let at = url[schemeEnd.upperBound...].firstIndex(of: "@"),
           !url[schemeEnd.upperBound..<at].contains("/") {
            let userInfo = String(url[schemeEnd.upperBound..<at])
            auth = "Basic " + Base64.encode(Array((userInfo.removingPercentEncoding ?? userInfo).utf8))
            target = String(url[..<schemeEnd.upperBound]) + String(url[url.index(after: at)...])
        }
        var request = HTTPClientRequest(url: target)
        request.method = method
        if let auth { request.headers.add(name: "Authorization", value: auth) }
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await client.execute(request, timeout: timeout)
        let bytes = try await response.body.collect(upTo: 256 << 20)
        return Reply(status: Int(response.status.code), json: try? JSON.parse(Array(bytes.readableBytesView)))
    }

    /// Polls `condition` every 250 ms until it holds or `seconds` pass; errors count as "not yet".
    public static func waitFor(seconds: Double, _ condition: () async throws -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if (try? await condition()) == true { return true }
            try? await Task.sleep(for: .milliseconds(250))
        }
        return (try? await condition()) == true
    }
}
