import Foundation
import SetteeClusterHarness

// settee-cluster-check: runs the multi-node scenarios against a cluster and prints what each checked.
//
//   settee-cluster-check --local [N] [--no-namespaces]  N local `settee serve` processes (default 3); as root each
//                                                      in its own network namespace unless --no-namespaces
//   settee-cluster-check --urls U1,U2,U3 --containers C1,C2,C3 [--network NET]
//                                                      the compose cluster (Docker/compose.yml)
//   --only "scenario name"                             run one scenario (repeatable)
//
// Exit status: 0 when every scenario passed, 1 otherwise, 2 for bad arguments.

let args = Array(CommandLine.arguments.dropFirst())
@MainActor func value(_ flag: String) -> String? {
    guard let i = args.firstIndex(of: flag), i + 1 < args.count else { return nil }
    return args[i + 1]
}
var only: Set<String>?
for (i, a) in args.enumerated() where a == "--only" && i + 1 < args.count { only = (only ?? []).union([args[i + 1]]) }

let cluster: any Cluster
if let urls = value("--urls") {
    let list = urls.split(separator: ",").map(String.init)
    let containers = value("--containers")?.split(separator: ",").map(String.init)
        ?? (1...list.count).map { "settee-node\($0)" }
    guard containers.count == list.count else {
        FileHandle.standardError.write(Data("--containers must name one container per URL\n".utf8))
        exit(2)
    }
    cluster = DockerCluster(urls: list, containers: containers, network: value("--network") ?? "settee_mesh")
} else if args.contains("--local") {
    let n = value("--local").flatMap(Int.init) ?? 3
    cluster = try await LocalCluster(nodes: n, namespaces: !args.contains("--no-namespaces") && LocalCluster.namespacesAvailable)
} else {
    FileHandle.standardError.write(Data("usage: settee-cluster-check --local [N] | --urls U1,U2,U3 [--containers C1,C2,C3] [--network NET] [--only NAME]\n".utf8))
    exit(2)
}
let failures = await Scenarios.runAll(cluster, only: only)
cluster.shutdown()
print(failures.isEmpty ? "all scenarios passed" : "\(failures.count) scenario(s) failed")
exit(failures.isEmpty ? 0 : 1)
