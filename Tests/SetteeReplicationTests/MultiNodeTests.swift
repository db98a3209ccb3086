import Foundation
import SetteeClusterHarness
import Testing

/// The multi-node scenarios (Tests/SetteeClusterHarness/Scenarios.swift) against three real `settee serve`
/// processes peering with each other — in network namespaces with real partitions when running as root.
/// `settee-cluster-check --urls …` runs the same scenarios against the Docker compose cluster.
@Suite(.serialized) struct MultiNodeTests {
    @Test(.timeLimit(.minutes(15))) func scenariosOnThreeLocalNodes() async throws {
        let cluster = try await LocalCluster(nodes: 3)
        defer { cluster.shutdown() }
        let failures = await Scenarios.runAll(cluster)
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }
}
