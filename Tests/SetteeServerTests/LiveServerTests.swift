import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SetteeCore
import SetteeTestSupport
import Synchronization
import Testing

/// Live tests: a real `settee serve` process, real sockets, real kills.
@Suite(.serialized) struct LiveServerTests {
    static let auth: HTTPFields = [.authorization: "Basic " + Base64.encode(Array("admin:secret".utf8)),
                                   .contentType: "application/json"]

    static func client(_ server: ServerProcess, timeout: Duration = .seconds(30)) -> TestClient {
        let client = TestClient(host: "127.0.0.1", port: server.port, configuration: .init(timeout: timeout))
        client.connect()
        return client
    }

    static func send(_ client: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil) async throws -> (Int, JSON?) {
        let response = try await client.execute(.init(uri, method: method, headers: auth,
                                                      body: body.map { ByteBuffer(string: $0) }))
        let bytes = response.body.map { Array($0.readableBytesView) } ?? []
        return (Int(response.status.code), try? JSON.parse(bytes))
    }

    /// A client writes batches through `_bulk_docs`; the server is killed with SIGKILL mid-stream and restarted.
    /// Every document whose batch was acknowledged (201) must be there, at the acknowledged revision.
    @Test func killDuringBulkDocsLosesNoAcknowledgedDocument() async throws {
        let dir = TempDir()
        var acknowledged: [String: String] = [:]
        for round in 0..<3 {
            let server = try ServerProcess(dataDirectory: dir.path)
            let client = Self.client(server)
            if round == 0 { _ = try await Self.send(client, .put, "/crash") }
            let progress = Mutex<Int>(0)
            let writer = Task { () -> [String: String] in
                var acks: [String: String] = [:]
                var batch = 0
                while !Task.isCancelled {
                    let docs = (0..<100).map { "{\"_id\":\"r\(round)-b\(batch)-\($0)\",\"v\":\($0),\"pad\":\"\(String(repeating: "p", count: 200))\"}" }
                    guard let (status, json) = try? await Self.send(client, .post, "/crash/_bulk_docs",
                                                                    "{\"docs\":[\(docs.joined(separator: ","))]}"),
                          status == 201, let rows = json?.arrayValue
                    else { break }
                    for row in rows {
                        if let id = row["id"]?.stringValue, let rev = row["rev"]?.stringValue { acks[id] = rev }
                    }
                    batch += 1
                    progress.withLock { $0 = batch }
                }
                return acks
            }
            // Kill mid-stream: after the first acknowledged batch (however slow the machine), at a random moment.
            let deadline = ContinuousClock.now + .seconds(20)
            while progress.withLock({ $0 }) == 0 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 100...600)))
            server.kill9()
            let acks = await writer.value
            try? await client.shutdown()
            #expect(!acks.isEmpty, "round \(round): nothing acknowledged before the kill")
            acknowledged.merge(acks) { $1 }
        }
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let client = Self.client(server)
        let ids = Array(acknowledged.keys)
        for chunk in stride(from: 0, to: ids.count, by: 500) {
            let keys = ids[chunk..<min(ids.count, chunk + 500)].map { "\"\($0)\"" }.joined(separator: ",")
            let (status, json) = try await Self.send(client, .post, "/crash/_all_docs", "{\"keys\":[\(keys)]}")
            #expect(status == 200)
            for row in json?["rows"]?.arrayValue ?? [] {
                let id = row["key"]?.stringValue ?? ""
                #expect(row["error"] == nil, "acknowledged document \(id) was lost")
                #expect(row["value"]?["rev"]?.stringValue == acknowledged[id])
            }
        }
        try await client.shutdown()
    }

    /// A continuous `_changes` listener sees every one of 1,000 writes exactly once.
    @Test func continuousFeedSeesEveryWriteExactlyOnce() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let setup = Self.client(server)
        _ = try await Self.send(setup, .put, "/feed")
        let listener = Self.client(server, timeout: .seconds(120))
        let feed = Task {
            try await listener.execute(.init("/feed/_changes?feed=continuous&since=0&timeout=3000", method: .get,
                                             headers: Self.auth))
        }
        try await Task.sleep(for: .milliseconds(200))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<10 {
                group.addTask {
                    let c = Self.client(server)
                    for i in 0..<100 {
                        let (status, _) = try await Self.send(c, .put, "/feed/w\(w)-\(i)", "{\"i\":\(i)}")
                        #expect(status == 201)
                    }
                    try await c.shutdown()
                }
            }
            try await group.waitForAll()
        }
        let response = try await feed.value
        let lines = String(buffer: response.body ?? ByteBuffer()).split(separator: "\n")
        var seen: [String: Int] = [:]
        for line in lines {
            guard let json = try? JSON.parse(String(line)), let id = json["id"]?.stringValue else { continue }
            seen[id, default: 0] += 1
        }
        #expect(seen.count == 1000)
        #expect(seen.values.allSatisfy { $0 == 1 })
        #expect(lines.last.map { $0.contains("last_seq") } == true)
        try await setup.shutdown()
        try await listener.shutdown()
    }

    /// 100 concurrent writers and 50 continuous listeners: no error, and every listener sees every change.
    @Test func manyWritersAndListenersLoseNothing() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let setup = Self.client(server)
        _ = try await Self.send(setup, .put, "/busy")
        let listeners = (0..<50).map { _ in Self.client(server, timeout: .seconds(120)) }
        let feeds = listeners.map { listener in
            Task {
                try await listener.execute(.init("/busy/_changes?feed=continuous&since=0&timeout=4000", method: .get,
                                                 headers: Self.auth))
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let failures = try await withThrowingTaskGroup(of: Int.self) { group in
            for w in 0..<100 {
                group.addTask {
                    let c = Self.client(server)
                    var failed = 0
                    for i in 0..<10 {
                        let (status, _) = try await Self.send(c, .put, "/busy/c\(w)-\(i)", "{\"w\":\(w)}")
                        if status != 201 { failed += 1 }
                    }
                    try await c.shutdown()
                    return failed
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(failures == 0)
        for feed in feeds {
            let response = try await feed.value
            let ids = String(buffer: response.body ?? ByteBuffer()).split(separator: "\n").compactMap {
                (try? JSON.parse(String($0)))?["id"]?.stringValue
            }
            #expect(ids.count == 1000)
            #expect(Set(ids).count == 1000)
        }
        for l in listeners { try await l.shutdown() }
        try await setup.shutdown()
    }

    /// SIGTERM shuts the node down gracefully and the data is intact after a restart.
    @Test func gracefulShutdownKeepsData() async throws {
        let dir = TempDir()
        var server = try ServerProcess(dataDirectory: dir.path)
        var client = Self.client(server)
        _ = try await Self.send(client, .put, "/graceful")
        let (status, json) = try await Self.send(client, .put, "/graceful/doc", "{\"v\":1}")
        #expect(status == 201)
        try? await client.shutdown()
        server.stop()
        #expect(server.process.terminationReason == .exit)
        server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        client = Self.client(server)
        let (s2, doc) = try await Self.send(client, .get, "/graceful/doc")
        #expect(s2 == 200)
        #expect(doc?["_rev"] == json?["rev"])
        try await client.shutdown()
    }

    /// Without an admin the node refuses a non-loopback address and says why.
    @Test func refusesPublicBindWithoutAdmin() throws {
        let dir = TempDir()
        #expect(throws: ServerProcessError.self) {
            _ = try ServerProcess(dataDirectory: dir.path, admin: nil, extraArguments: ["--host", "0.0.0.0"])
        }
    }
}
