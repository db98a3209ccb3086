import Foundation
import SetteeCore
import Testing

/// A real network partition: the target node runs in its own network namespace joined to this one by a veth
/// pair, and the test takes the link down and up again. Needs root and iproute2 (skipped otherwise).
@Suite(.serialized, .enabled(if: NetworkNamespace.available, "needs root and `ip netns`"))
struct PartitionTests {
    @Test func aContinuousPushRidesOutANetworkPartition() async throws {
        let ns = try NetworkNamespace()
        defer { ns.remove() }
        let dirA = TempDir(), dirB = TempDir()
        let a = try ServerProcess(dataDirectory: dirA.path)
        let b = try ServerProcess(dataDirectory: dirB.path, extraArguments: ["--host", ns.innerAddress],
                                  wrapper: ["/usr/sbin/ip", "netns", "exec", ns.name])
        defer { a.stop(); b.stop() }
        let bURL = "http://\(ns.innerAddress):\(b.port)/db"
        let bAuthURL = "http://admin:secret@\(ns.innerAddress):\(b.port)/db"
        try await HTTP.send(.PUT, "http://127.0.0.1:\(a.port)/db")
        let r = try await HTTP.send(.POST, "http://127.0.0.1:\(a.port)/_replicate",
                                    #"{"source":"db","target":"\#(bAuthURL)","continuous":true,"create_target":true,"allow_insecure_credentials":true}"#)
        #expect(r.status == 202)
        try await HTTP.load("http://127.0.0.1:\(a.port)/db", prefix: "before", count: 20)
        #expect(try await waitFor { try await HTTP.docCount(bURL) == 20 })

        try ns.cut()
        try await HTTP.load("http://127.0.0.1:\(a.port)/db", prefix: "during", count: 30)
        // The link really is gone: B cannot be reached, and A's replication says it is offline.
        await #expect(throws: (any Error).self) { try await HTTP.send(.GET, bURL, timeout: .seconds(2)) }
        // (The request in flight on a kept-alive connection hears nothing: the 30 s read timeout notices.)
        #expect(try await waitFor(seconds: 60) {
            let tasks = try await HTTP.send(.GET, "http://127.0.0.1:\(a.port)/_active_tasks").json?.arrayValue ?? []
            return tasks.contains { $0["state"] == "offline" }
        })
        try ns.heal()
        #expect(try await waitFor(seconds: 120) { try await HTTP.docCount(bURL) == 50 },
                "after the partition heals the continuous replication catches up")
    }
}

/// A network namespace with a veth link to the test's namespace (10.213.N.1 outside, 10.213.N.2 inside).
final class NetworkNamespace {
    let name: String
    let outer: String
    let inner: String
    let outerAddress: String
    let innerAddress: String

    static let available: Bool = {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") else { return false }
        let probe = "settee-probe-\(getpid())"
        defer { _ = try? NetworkNamespace.run(["netns", "delete", probe]) }
        return (try? NetworkNamespace.run(["netns", "add", probe])) != nil
    }()

    init() throws {
        // A subnet no interface uses yet (another namespace of this run, or one a killed run left behind).
        var n = Int.random(in: 1...250)
        for _ in 0..<50 where !subnetIsFree("10.213.\(n).") { n = Int.random(in: 1...250) }
        name = "settee-\(getpid())-\(n)"
        outer = "stv\(n)a"
        inner = "stv\(n)b"
        outerAddress = "10.213.\(n).1"
        innerAddress = "10.213.\(n).2"
        try Self.run(["netns", "add", name])
        try Self.run(["link", "add", outer, "type", "veth", "peer", "name", inner])
        try Self.run(["link", "set", inner, "netns", name])
        try Self.run(["addr", "add", outerAddress + "/24", "dev", outer])
        try Self.run(["link", "set", outer, "up"])
        try Self.run(["netns", "exec", name, "ip", "addr", "add", innerAddress + "/24", "dev", inner])
        try Self.run(["netns", "exec", name, "ip", "link", "set", inner, "up"])
        try Self.run(["netns", "exec", name, "ip", "link", "set", "lo", "up"])
    }

    /// Drops the link: packets between the namespaces go nowhere.
    func cut() throws { try Self.run(["link", "set", outer, "down"]) }
    func heal() throws { try Self.run(["link", "set", outer, "up"]) }

    func remove() {
        _ = try? Self.run(["link", "delete", outer])
        _ = try? Self.run(["netns", "delete", name])
    }

    @discardableResult
    static func run(_ args: [String]) throws -> String { try runTool("/usr/sbin/ip", args) }
}
