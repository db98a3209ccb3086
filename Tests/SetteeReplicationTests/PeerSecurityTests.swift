import Foundation
import SetteeCore
import SetteeTestSupport
import Testing

/// `--peer` keeps each database's `_security` object in step (``PeerSync/syncSecurity``): a change on either node
/// reaches the other, a change made while the peer was down reaches it when it is back, and changes made on both
/// sides apart end as the same object on both. Real `settee serve` processes.
@Suite(.serialized) struct PeerSecurityTests {
    let dirs = [TempDir(), TempDir()]
    let ports = [freePort(), freePort()]

    func base(_ i: Int) -> String { "http://127.0.0.1:\(ports[i])" }

    func start(_ i: Int, peering: Bool = true) throws -> ServerProcess {
        try ServerProcess(dataDirectory: dirs[i].path, port: ports[i],
                          extraArguments: peering ? ["--peer", "http://admin:secret@127.0.0.1:\(ports[1 - i])", "--peer-scan-interval", "1"] : [])
    }

    func security(_ i: Int, _ db: String) async throws -> [UInt8]? {
        let r = try await HTTP.send(.GET, base(i) + "/\(db)/_security")
        return r.status == 200 ? r.json?.canonicalBytes : nil
    }

    func put(_ i: Int, _ db: String, _ object: String) async throws {
        let r = try await HTTP.send(.PUT, base(i) + "/\(db)/_security", object)
        #expect(r.status == 200, "PUT _security on node\(i): \(r.status) \(r.json?.jsonString ?? "")")
    }

    /// Waits until both nodes serve `expected` as the database's `_security`.
    func converges(_ db: String, to expected: String, _ what: Comment) async throws {
        let want = try JSON.parse(expected).canonicalBytes
        let ok = try await waitFor(seconds: 30) {
            let first = try await security(0, db), second = try await security(1, db)
            return first == want && second == want
        }
        let seen = [try await security(0, db), try await security(1, db)].map { $0.map { String(decoding: $0, as: UTF8.self) } ?? "none" }
        #expect(ok, what)
        if !ok { print("PeerSecurityTests: \(what): want \(expected), nodes have \(seen)") }
    }

    @Test func securityObjectsFollowChangesOnEitherNodeAndAfterAnOutage() async throws {
        var nodes = try [start(0), start(1)]
        defer { nodes.forEach { $0.stop() } }
        let db = "guarded"
        #expect(try await HTTP.send(.PUT, base(0) + "/\(db)").status == 201)
        #expect(try await waitFor(seconds: 30) { try await HTTP.send(.GET, base(1) + "/\(db)").status == 200 },
                "the peer creates the database")

        let first = #"{"admins":{"names":["ann"],"roles":[]},"members":{"names":["bob"],"roles":["staff"]}}"#
        try await put(0, db, first)
        try await converges(db, to: first, "a change on node0 reaches node1")

        let second = #"{"admins":{"names":["ann"],"roles":[]},"members":{"names":["bob","cy"],"roles":["staff"]}}"#
        try await put(1, db, second)
        try await converges(db, to: second, "a change on node1 reaches node0")

        // node1 down while node0's changes: node1 gets it when it is back (its own is the one they agreed on).
        nodes[1].stop()
        let third = #"{"admins":{"names":[],"roles":["_admin"]},"members":{"names":["dee"],"roles":[]}}"#
        try await put(0, db, third)
        nodes[1] = try start(1)
        try await converges(db, to: third, "a change made while the peer was down reaches it when it is back")
    }

    @Test func changesMadeOnBothSidesApartEndTheSameOnBoth() async throws {
        let db = "split"
        let agreed = #"{"admins":{"names":[],"roles":["_admin"]},"members":{"names":["zed"],"roles":[]}}"#
        do {
            let nodes = try [start(0), start(1)]
            defer { nodes.forEach { $0.stop() } }
            #expect(try await HTTP.send(.PUT, base(0) + "/\(db)").status == 201)
            #expect(try await waitFor(seconds: 30) { try await HTTP.send(.GET, base(1) + "/\(db)").status == 200 })
            try await put(0, db, agreed)
            try await converges(db, to: agreed, "the first object reaches both")
        }
        // Each node changes it alone (no peer), then they meet again.
        let mine = #"{"members":{"names":["apart-0"],"roles":[]}}"#
        let theirs = #"{"members":{"names":["apart-1"],"roles":[]}}"#
        for (i, object) in [mine, theirs].enumerated() {
            let alone = try start(i, peering: false)
            try await put(i, db, object)
            alone.stop()
        }
        let nodes = try [start(0), start(1)]
        defer { nodes.forEach { $0.stop() } }
        // Both changed since they agreed: the object whose canonical JSON sorts last wins on both.
        let a = try JSON.parse(mine).canonicalBytes, b = try JSON.parse(theirs).canonicalBytes
        let winner = a.lexicographicallyPrecedes(b) ? theirs : mine
        try await converges(db, to: winner, "both nodes settle on the same object")
        // And then stay quiet: the object does not flip back and forth.
        try await Task.sleep(for: .seconds(3))
        let want = try JSON.parse(winner).canonicalBytes
        let settled = [try await security(0, db), try await security(1, db)]
        #expect(settled == [want, want])
    }
}
