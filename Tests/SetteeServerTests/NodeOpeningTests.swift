import Foundation
@testable import SetteeServer
import SetteeCore
@testable import SetteeStore
import SetteeTestSupport
import Synchronization
import Testing

/// A database is opened outside the node's lock: one slow open delays nobody else, and callers for the same
/// database wait for that one open. The slow open here is a real one: the file's schema is a version behind (its
/// last migration must run again, as after an upgrade) while another connection holds its write lock, so the
/// migration waits for it (SQLite's busy timeout).
@Suite struct NodeOpeningTests {
    /// Makes `name` (and `other`, if given) in `node`, closes them, and makes `name`'s next open slow: its schema a
    /// version behind, so the open runs its last migration again, while the returned connection holds the write
    /// lock that migration waits for (until `ROLLBACK`).
    static func slowToOpen(_ name: String, besides other: String? = nil, in node: Node) throws -> Connection {
        let path = try #require(try node.createDatabase(name).path)
        if let other { try node.createDatabase(other) }
        node.closeAll()
        return try holdForMigration(path)
    }

    /// A connection to the file at `path` that puts its schema a version behind and holds its write lock.
    static func holdForMigration(_ path: String) throws -> Connection {
        let holder = try Connection(path: path)
        try holder.execute("PRAGMA user_version = 5")
        try holder.execute("BEGIN IMMEDIATE")
        return holder
    }

    @Test func aSlowOpenOfOneDatabaseDoesNotDelayAnother() async throws {
        let dir = TempDataDir()
        let node = try makeNode(dir: dir)
        let holder = try Self.slowToOpen("slow", besides: "fast", in: node)

        let started = ContinuousClock.now
        async let first = onThread { try node.database("slow") }
        async let second = onThread { try node.database("slow") }
        try await Task.sleep(for: .milliseconds(300))

        // Meanwhile another database opens, and an open one answers, at once.
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            let fast = try await onThread { try node.database("fast") }
            #expect(try fast.defaultCollection().count == 0 as UInt64)
            _ = try await onThread { try node.database("fast") }
        }
        // (The holder lets go only after this: behind the slow open, this would wait out SQLite's 10 s busy timeout.)
        #expect(elapsed < .seconds(5), "another database waited \(elapsed) behind a slow open")
        #expect(node.databaseNames().contains("slow"))

        // Let go: the slow open completes, once, for both of its callers.
        try await Task.sleep(for: .milliseconds(700))
        try holder.execute("ROLLBACK")
        holder.close()
        let (a, b) = try await (first, second)
        #expect(a === b)
        #expect(ContinuousClock.now - started >= .milliseconds(900))
        #expect(try node.database("slow") === a)
        node.closeAll()
    }

    /// Requests waiting for a slow open are suspended, not parked on the store's threads: more of them than the
    /// store has threads leave its other work running.
    @Test func waitersForASlowOpenHoldNoStoreThread() async throws {
        let dir = TempDataDir()
        let node = try makeNode(dir: dir)
        let holder = try Self.slowToOpen("slow", besides: "fast", in: node)

        let waiters = Task {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<(Database.offloadWidth + 16) { group.addTask { await node.openOffTheCallersThread("slow") } }
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            await node.openOffTheCallersThread("fast")
            _ = try await Database.offload { try node.database("fast").defaultCollection().count }
        }
        #expect(elapsed < .seconds(5), "the store's threads were all waiting for the slow open: \(elapsed)")
        try holder.execute("ROLLBACK")
        holder.close()
        await waiters.value
        #expect(try node.database("slow").name == "slow")
        node.closeAll()
    }

    /// Over HTTP, a real `settee serve` process on real sockets: requests to a database whose open is slow wait
    /// for it (holding none of the server's cooperative threads), and requests to another database answer
    /// meanwhile.
    @Test func requestsToAnotherDatabaseAnswerDuringASlowOpen() async throws {
        let dir = TempDir()
        var server = try ServerProcess(dataDirectory: dir.path)
        let setup = LiveServerTests.client(server)
        #expect(try await LiveServerTests.send(setup, .put, "/slow").0 == 201)
        #expect(try await LiveServerTests.send(setup, .put, "/fast").0 == 201)
        try await setup.shutdown()
        server.stop()
        // Restarted with neither open; the slow one's file held by this process meanwhile.
        server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let holder = try Self.holdForMigration(Database.filePath(name: "slow", directory: dir.path))

        // More waiting requests than the machine has cooperative threads, each on a connection of its own.
        let port = server
        let waiting = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        let client = LiveServerTests.client(port)
                        defer { Task { try? await client.shutdown() } }
                        return try await LiveServerTests.send(client, .get, "/slow").0
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
        }
        try await Task.sleep(for: .milliseconds(500))
        let client = LiveServerTests.client(server, timeout: .seconds(8))
        let clock = ContinuousClock()
        var status = 0
        let elapsed = try await clock.measure { status = try await LiveServerTests.send(client, .get, "/fast").0 }
        #expect(status == 200)
        #expect(elapsed < .seconds(5), "a request to another database waited \(elapsed)")
        try holder.execute("ROLLBACK")
        holder.close()
        #expect(try await waiting.value == [200, 200, 200, 200])
        try await client.shutdown()
    }

    /// A delete whose close waits (here for a long read of the database) delays nobody else; a caller for the
    /// deleted name waits for the delete and finds it gone.
    @Test func aSlowDeleteOfOneDatabaseDoesNotDelayAnother() async throws {
        let dir = TempDataDir()
        let node = try makeNode(dir: dir)
        let doomed = try node.createDatabase("doomed")
        try node.createDatabase("other")
        let reading = Mutex(false)
        async let read: Void = onThread {
            try doomed.read { _ in
                reading.withLock { $0 = true }
                usleep(3_000_000)
            }
        }
        while !reading.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        async let deleted: Void = onThread { try node.deleteDatabase("doomed") }
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            _ = try await onThread { try node.database("other").defaultCollection().count }
        }
        // (The read holds the close for 3 s: behind it, this would wait that long.)
        #expect(elapsed < .seconds(2), "another database waited \(elapsed) behind a slow delete")
        try await read
        try await deleted
        #expect(throws: SetteeError.self) { try node.database("doomed") }
        #expect(!Database.exists(name: "doomed", inDirectory: dir.path))
        node.closeAll()
    }

    /// A database deleted while it is being opened is deleted after that open, not under it; a create of a name
    /// being created is refused.
    @Test func deleteWaitsForAnOpenAndCreateRefusesAConcurrentCreate() async throws {
        let dir = TempDataDir()
        let node = try makeNode(dir: dir)
        let holder = try Self.slowToOpen("held", in: node)

        async let opened = onThread { try node.database("held") }
        try await Task.sleep(for: .milliseconds(200))
        async let deleted: Void = onThread { try node.deleteDatabase("held") }
        try await Task.sleep(for: .milliseconds(300))
        #expect(Database.exists(name: "held", inDirectory: dir.path), "deleted under an open")
        try holder.execute("ROLLBACK")
        holder.close()
        _ = try await opened
        try await deleted
        #expect(!Database.exists(name: "held", inDirectory: dir.path))
        #expect(throws: SetteeError.self) { try node.database("held") }

        try node.createDatabase("again")
        #expect(throws: SetteeError.self) { try node.createDatabase("again") }
        node.closeAll()
    }
}

/// Runs blocking `body` on a thread of its own (never on the cooperative pool, which two blocked callers would
/// exhaust on this machine) and awaits its result.
private func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
