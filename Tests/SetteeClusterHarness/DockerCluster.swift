import Foundation
import SetteeTestSupport

/// The compose cluster of `Docker/compose.yml`, driven through the `docker` CLI: nodes are reached at the given
/// URLs (published ports); kill is `docker kill`, restart `docker start`, a graceful restart `docker restart` (SIGTERM),
/// wipe empties the data volume and restarts,
/// and a partition disconnects the containers from the peering network (`settee_mesh`) while their published
/// ports (on the default network) stay reachable.
public final class DockerCluster: Cluster, @unchecked Sendable {
    let urls: [String]
    let containers: [String]
    let network: String
    let dataPath: String

    public init(urls: [String], containers: [String], network: String = "settee_mesh", dataPath: String = "/var/lib/settee") {
        precondition(urls.count == containers.count, "one container per URL")
        self.urls = urls
        self.containers = containers
        self.network = network
        self.dataPath = dataPath
    }

    public var count: Int { urls.count }
    public func url(_ i: Int) -> String { urls[i].hasSuffix("/") ? String(urls[i].dropLast()) : urls[i] }
    public var summary: String { "\(count) containers (\(containers.joined(separator: ", "))); partitions disconnect them from \(network)" }

    public func kill(_ i: Int) async throws { try docker(["kill", containers[i]]) }

    public func restart(_ i: Int) async throws {
        try docker(["start", containers[i]])
        _ = await ClusterHTTP.waitFor(seconds: 60) { try await ClusterHTTP.send(.GET, self.url(i) + "/_up").status == 200 }
    }

    public func restartGracefully(_ i: Int) async throws {
        try docker(["restart", "-t", "30", containers[i]])
        _ = await ClusterHTTP.waitFor(seconds: 60) { try await ClusterHTTP.send(.GET, self.url(i) + "/_up").status == 200 }
    }

    public func wipe(_ i: Int) async throws {
        try docker(["exec", containers[i], "sh", "-c", "rm -rf \(dataPath)/* \(dataPath)/.settee-*"])
        try docker(["restart", containers[i]])
        _ = await ClusterHTTP.waitFor(seconds: 60) { try await ClusterHTTP.send(.GET, self.url(i) + "/_up").status == 200 }
    }

    public func partitionAll() async throws {
        for c in containers { try docker(["network", "disconnect", network, c]) }
    }

    public func heal() async throws {
        for (i, c) in containers.enumerated() {
            try docker(["network", "connect", "--alias", "node\(i + 1)", network, c])
        }
    }

    public func shutdown() {}

    @discardableResult
    func docker(_ args: [String]) throws -> String { try runTool("/usr/bin/env", ["docker"] + args) }
}
