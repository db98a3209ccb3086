import Foundation
import SetteeTestSupport

/// A set of Settee nodes that peer with one another, and the faults a multi-node scenario can inject.
public protocol Cluster: AnyObject, Sendable {
    /// Number of nodes.
    var count: Int { get }
    /// Node `i`'s root URL, with the admin's credentials (`http://admin:secret@host:port`).
    func url(_ i: Int) -> String
    /// What kind of cluster this is and how faults are made (printed by the scenarios).
    var summary: String { get }
    /// SIGKILL: no shutdown of any kind.
    func kill(_ i: Int) async throws
    /// Starts a killed node again on its data.
    func restart(_ i: Int) async throws
    /// Stops a running node gracefully (SIGTERM) and starts it again on its data.
    func restartGracefully(_ i: Int) async throws
    /// Stops a node, deletes its data, and starts it again empty.
    func wipe(_ i: Int) async throws
    /// Cuts every node off from every other node (the test still reaches each one).
    func partitionAll() async throws
    /// Restores every link.
    func heal() async throws
    /// Stops everything and cleans up.
    func shutdown()
}

/// A cluster of local `settee serve` processes, each with `--peer` to every other.
///
/// As root with `ip netns` available, each node runs in its own network namespace with two links: a control link
/// to the test (10.215.x.0/24) and a data link on a bridge shared by the nodes (10.214.x.0/24); the nodes peer
/// over the bridge, so taking data links down really drops the traffic between nodes while the test can still
/// read and write each node. Elsewhere nodes run on 127.0.0.1 and a partition is simulated by restarting the
/// nodes without their `--peer` flags (replication stopped), healing by restarting them with the flags.
public final class LocalCluster: Cluster, @unchecked Sendable {
    public let count: Int
    public let usesNamespaces: Bool
    private let dirs: [TempDir]
    private var processes: [ServerProcess?]
    private var ports: [Int]
    private var partitioned = false
    private let tag: Int
    private let lock = NSLock()

    /// Whether this process can build namespaces (root, iproute2, bridges).
    public static let namespacesAvailable: Bool = {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") else { return false }
        let probe = "settee-mnprobe-\(getpid())"
        defer { _ = try? ip(["netns", "delete", probe]) }
        return (try? ip(["netns", "add", probe])) != nil
    }()

    public init(nodes: Int = 3, namespaces: Bool = LocalCluster.namespacesAvailable) async throws {
        count = nodes
        usesNamespaces = namespaces
        dirs = (0..<nodes).map { _ in TempDir() }
        processes = Array(repeating: nil, count: nodes)
        // Subnets no other namespace uses (PartitionTests' are 10.213.N; a killed run may have left some behind).
        func free(_ t: Int) -> Bool {
            (0..<nodes).allSatisfy { subnetIsFree("10.215.\(t + $0).") } && subnetIsFree("10.214.\(t).")
        }
        var pick = Int.random(in: 10...240)
        if namespaces {
            for _ in 0..<50 where !free(pick) { pick = Int.random(in: 10...240) }
        }
        tag = pick
        if namespaces {
            ports = Array(repeating: 5984, count: nodes)
        } else {
            ports = (0..<nodes).map { _ in freePort() }
        }
        // Processes and `ip` run to completion: keep them off Swift's cooperative pool.
        try await offThePool { [self] in
            if namespaces { try setUpNetwork() }
            for i in 0..<nodes { try start(i) }
        }
    }

    deinit { shutdown() }

    public var summary: String {
        usesNamespaces
            ? "\(count) settee processes, each in its own network namespace; partitions take the bridge links down"
            : "\(count) settee processes on 127.0.0.1; partitions restart the nodes without their --peer flags"
    }

    // MARK: Addresses

    private func namespace(_ i: Int) -> String { "stmn\(tag)-\(i)" }
    private var bridge: String { "stmnbr\(tag)" }
    private func controlOuter(_ i: Int) -> String { "stmc\(tag)x\(i)" }
    private func controlInner(_ i: Int) -> String { "stmc\(tag)y\(i)" }
    private func dataOuter(_ i: Int) -> String { "stmd\(tag)x\(i)" }
    private func dataInner(_ i: Int) -> String { "stmd\(tag)y\(i)" }
    private func controlAddress(_ i: Int) -> String { "10.215.\(tag + i).2" }
    private func dataAddress(_ i: Int) -> String { "10.214.\(tag).\(i + 1)" }

    public func url(_ i: Int) -> String {
        usesNamespaces ? "http://admin:secret@\(controlAddress(i)):\(ports[i])"
                       : "http://admin:secret@127.0.0.1:\(ports[i])"
    }

    /// The URL node `j` is known by to its peers.
    private func peerURL(_ j: Int) -> String {
        usesNamespaces ? "http://admin:secret@\(dataAddress(j)):\(ports[j])" : "http://admin:secret@127.0.0.1:\(ports[j])"
    }

    // MARK: Processes

    private func start(_ i: Int) throws {
        var args = ["--peer-scan-interval", "1", "--lockout-threshold", "0", "--pbkdf2-iterations", "1000"]
        if !partitioned || usesNamespaces {
            for j in 0..<count where j != i { args += ["--peer", peerURL(j)] }
        }
        if usesNamespaces {
            args += ["--host", "0.0.0.0", "--allow-insecure-credentials"]
            processes[i] = try ServerProcess(dataDirectory: dirs[i].path, port: ports[i], extraArguments: args,
                                             wrapper: ["/usr/sbin/ip", "netns", "exec", namespace(i)])
        } else {
            processes[i] = try ServerProcess(dataDirectory: dirs[i].path, port: ports[i], extraArguments: args)
        }
    }

    public func kill(_ i: Int) async throws {
        try await offThePool { [self] in
            processes[i]?.kill9()
            processes[i] = nil
        }
    }

    public func restart(_ i: Int) async throws {
        try await offThePool { [self] in try restartNow(i) }
    }

    public func restartGracefully(_ i: Int) async throws {
        try await offThePool { [self] in try restartNow(i) }
    }

    private func restartNow(_ i: Int) throws {
        if processes[i] != nil { processes[i]?.stop() }
        try start(i)
    }

    public func wipe(_ i: Int) async throws {
        try await offThePool { [self] in
            processes[i]?.kill9()
            processes[i] = nil
            let fm = FileManager.default
            for item in (try? fm.contentsOfDirectory(atPath: dirs[i].path)) ?? [] {
                try fm.removeItem(atPath: dirs[i].path + "/" + item)
            }
            try start(i)
        }
    }

    public func partitionAll() async throws {
        partitioned = true
        try await offThePool { [self] in
            if usesNamespaces {
                for i in 0..<count { try Self.ip(["link", "set", dataOuter(i), "down"]) }
            } else {
                for i in 0..<count { try restartNow(i) }
            }
        }
    }

    public func heal() async throws {
        partitioned = false
        try await offThePool { [self] in
            if usesNamespaces {
                for i in 0..<count { try Self.ip(["link", "set", dataOuter(i), "up"]) }
            } else {
                for i in 0..<count { try restartNow(i) }
            }
        }
    }

    public func shutdown() {
        lock.lock()
        defer { lock.unlock() }
        for i in 0..<processes.count {
            processes[i]?.stop()
            processes[i] = nil
        }
        if usesNamespaces {
            for i in 0..<count {
                _ = try? Self.ip(["link", "delete", controlOuter(i)])
                _ = try? Self.ip(["link", "delete", dataOuter(i)])
                _ = try? Self.ip(["netns", "delete", namespace(i)])
            }
            _ = try? Self.ip(["link", "delete", bridge])
        }
    }

    // MARK: Network

    private func setUpNetwork() throws {
        try Self.ip(["link", "add", bridge, "type", "bridge"])
        try Self.ip(["link", "set", bridge, "up"])
        for i in 0..<count {
            let ns = namespace(i)
            try Self.ip(["netns", "add", ns])
            try Self.ip(["netns", "exec", ns, "ip", "link", "set", "lo", "up"])
            // Control link: the test ↔ node i.
            try Self.ip(["link", "add", controlOuter(i), "type", "veth", "peer", "name", controlInner(i)])
            try Self.ip(["link", "set", controlInner(i), "netns", ns])
            try Self.ip(["addr", "add", "10.215.\(tag + i).1/24", "dev", controlOuter(i)])
            try Self.ip(["link", "set", controlOuter(i), "up"])
            try Self.ip(["netns", "exec", ns, "ip", "addr", "add", controlAddress(i) + "/24", "dev", controlInner(i)])
            try Self.ip(["netns", "exec", ns, "ip", "link", "set", controlInner(i), "up"])
            // Data link: node i on the nodes' bridge.
            try Self.ip(["link", "add", dataOuter(i), "type", "veth", "peer", "name", dataInner(i)])
            try Self.ip(["link", "set", dataInner(i), "netns", ns])
            try Self.ip(["link", "set", dataOuter(i), "master", bridge])
            try Self.ip(["link", "set", dataOuter(i), "up"])
            try Self.ip(["netns", "exec", ns, "ip", "addr", "add", dataAddress(i) + "/24", "dev", dataInner(i)])
            try Self.ip(["netns", "exec", ns, "ip", "link", "set", dataInner(i), "up"])
        }
    }

    @discardableResult
    static func ip(_ args: [String]) throws -> String { try runTool("/usr/sbin/ip", args) }
}
