// sync-channels: Sync Gateway's channels and sync function on a `settee serve` process (issue 48's figures), over
// HTTP with keep-alive clients, the server with an admin and users (every request authenticated):
//
//   1. The sync function's cost: `_bulk_docs` of the documents (batches of 1,000, 4 connections), each naming one
//      channel, into a database with Sync Gateway's default sync function, against the same load into a database
//      without one, rounds alternating. Goal: ≥ 0.7× (the function costs at most 30 %).
//   2. A user's `_changes` from 0: document i is in channel `ch<i % 10000>`; 1,000 users each hold 10 channels
//      (`admin_channels`), so each reads a thousandth of the documents. Baseline: `_changes` from 0 of a database
//      holding only that user's documents, read by the same user. Goal: within 2× (ratio ≥ 0.5). The channel
//      index's first catch-up over the whole database is reported beside it.
import Foundation
import SetteeCore

let syncChannelsWorkloads = ["sync-channels"]

@MainActor func runSyncChannels(ids: [String], docBytes: [[UInt8]], workDir: String, rounds: Int) throws {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("settee").path
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        throw HTTPBenchFailure(message: "no settee binary at \(binary): build it first (swift build -c release --product settee)")
    }
    let count = ids.count
    let channels = 10_000, users = 1_000, perUser = 10
    let dataDir = workDir + "/sync-data"
    try? FileManager.default.removeItem(atPath: dataDir)
    try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
    let adminAuth = "Basic " + Base64.encode(Array("admin:pw".utf8))
    let server = try SetteeServerProcess(binary: binary, dataDirectory: dataDir, logPath: workDir + "/sync-server.log",
                                         extraArguments: ["--admin", "admin:pw", "--pbkdf2-iterations", "1000"])
    defer {
        server.stop()
        try? FileManager.default.removeItem(atPath: dataDir)
    }
    let admin = try HTTPConnection(port: server.port)
    admin.authorization = adminAuth
    func call(_ c: HTTPConnection, _ method: String, _ path: String, _ body: String? = nil, contentType: String = "application/json",
              expect statuses: Set<Int> = [200, 201, 202]) throws -> HTTPResponse {
        let r = try c.send(c.encodeRequest(method: method, path: path, body: body.map { Array($0.utf8) }, contentType: contentType))
        guard statuses.contains(r.status) else {
            throw HTTPBenchFailure(message: "\(method) \(path): HTTP \(r.status): \(String(decoding: r.body.prefix(300), as: UTF8.self))")
        }
        return r
    }
    func channel(_ i: Int) -> String { "ch\(i % channels)" }
    /// `{"docs":[…]}` bodies of the documents `which`, each with its channel, batches of 1,000.
    func bodies(_ which: [Int]) -> [[UInt8]] {
        stride(from: 0, to: which.count, by: 1000).map { start in
            var body: [UInt8] = Array(#"{"docs":["#.utf8)
            for (k, i) in which[start..<min(which.count, start + 1000)].enumerated() {
                if k > 0 { body.append(UInt8(ascii: ",")) }
                body.append(contentsOf: #"{"_id":"#.utf8)
                body.append(contentsOf: JSON.string(ids[i]).serializedBytes)
                body.append(contentsOf: #","channels":["#.utf8)
                body.append(contentsOf: JSON.string(channel(i)).serializedBytes)
                body.append(contentsOf: "],".utf8)
                body.append(contentsOf: docBytes[i].dropFirst())
            }
            body.append(contentsOf: "]}".utf8)
            return body
        }
    }
    /// Loads the bodies with 4 connections; seconds.
    func load(_ db: String, _ bodies: [[UInt8]]) throws -> Double {
        let clients = min(4, bodies.count)
        let connections = try (0..<clients).map { _ -> HTTPConnection in
            let c = try HTTPConnection(port: server.port)
            c.authorization = adminAuth
            return c
        }
        let requests = (0..<clients).map { k in
            stride(from: k, to: bodies.count, by: clients).map {
                connections[k].encodeRequest(method: "POST", path: "/\(db)/_bulk_docs", body: bodies[$0])
            }
        }
        let box = UncheckedBox((connections, requests))
        var results: [ClientResult<Int>] = []
        let t = measure {
            results = onThreads(clients) { k in
                let (connections, requests) = box.value
                var out = ClientResult<Int>()
                for r in requests[k] {
                    do {
                        let response = try connections[k].send(r)
                        guard response.status == 201 else {
                            out.fail("HTTP \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
                            break
                        }
                        out.items.append(1)
                    } catch {
                        out.fail("\(error)")
                        break
                    }
                }
                return out
            }
        }
        connections.forEach { $0.disconnect() }
        if let first = results.compactMap(\.firstError).first { throw HTTPBenchFailure(message: "load \(db): \(first)") }
        return t
    }

    // 1. The sync function's cost on _bulk_docs, rounds alternating.
    let all = bodies(Array(0..<count))
    var plainBest = Double.infinity, syncedBest = Double.infinity
    let rounds = max(1, rounds)
    for round in 0..<rounds {
        let plain = "plain\(round)", synced = "synced\(round)"
        _ = try call(admin, "PUT", "/\(plain)")
        _ = try call(admin, "PUT", "/\(synced)")
        _ = try call(admin, "PUT", "/\(synced)/_config/sync", "function (doc, oldDoc) { channel(doc.channels); }",
                     contentType: "application/javascript")
        plainBest = min(plainBest, try load(plain, all))
        syncedBest = min(syncedBest, try load(synced, all))
        _ = try call(admin, "DELETE", "/\(plain)")
        if round < rounds - 1 { _ = try call(admin, "DELETE", "/\(synced)") }
    }
    let db = "synced\(rounds - 1)"
    report(Figure(workload: "sync-channels", metric: "_bulk_docs with the default sync function",
                  value: Double(count) / syncedBest, baseline: Double(count) / plainBest, baselineName: "without one",
                  goal: 0.7, unit: "docs/s"))

    // 2. 1,000 users × 10 channels; a user's _changes from 0.
    for u in 0..<users {
        let granted = (0..<perUser).map { "\"ch\(u * perUser + $0)\"" }.joined(separator: ",")
        _ = try call(admin, "PUT", "/\(db)/_user/u\(u)", #"{"admin_channels":[\#(granted)]}"#)
    }
    let measured = [0, users / 2, users - 1]
    _ = try call(admin, "PUT", "/_users", expect: [201, 202, 412])
    for u in measured {
        _ = try call(admin, "PUT", "/_users/org.couchdb.user:u\(u)", #"{"name":"u\#(u)","type":"user","roles":[],"password":"pw"}"#)
    }
    let members = measured.map { "\"u\($0)\"" }.joined(separator: ",")
    _ = try call(admin, "PUT", "/\(db)/_security", #"{"members":{"names":[\#(members)]}}"#)
    // The channel index's first catch-up over the whole database (the first reader pays it).
    let firstUser = try HTTPConnection(port: server.port)
    firstUser.authorization = "Basic " + Base64.encode(Array("u\(measured[0]):pw".utf8))
    let catchUp = try measure { _ = try call(firstUser, "GET", "/\(db)/_changes?limit=1") }
    print("sync-channels  channel index: first catch-up over \(count) documents \(String(format: "%.2f", catchUp)) s"
        + " (\(Int(Double(count) / catchUp)) docs/s)")
    var worst: (user: Double, only: Double) = (0, 0)
    for u in measured {
        let mine = (0..<count).filter { ($0 % channels) / perUser == u }
        let only = "only\(u)"
        _ = try call(admin, "PUT", "/\(only)")
        _ = try call(admin, "PUT", "/\(only)/_security", #"{"members":{"names":[\#(members)]}}"#)
        _ = try load(only, bodies(mine))
        let reader = try HTTPConnection(port: server.port)
        reader.authorization = "Basic " + Base64.encode(Array("u\(u):pw".utf8))
        let feed = reader.encodeRequest(method: "GET", path: "/\(db)/_changes?since=0")
        let baseline = reader.encodeRequest(method: "GET", path: "/\(only)/_changes?since=0")
        func rows(_ r: HTTPResponse) throws -> Int {
            guard r.status == 200, let n = (try JSON.parse(r.body))["results"]?.arrayValue?.count else {
                throw HTTPBenchFailure(message: "_changes: HTTP \(r.status)")
            }
            return n
        }
        // Same rows on both sides, then the best of 20 alternating reads of each.
        let seen = (try rows(reader.send(feed)), try rows(reader.send(baseline)))
        guard seen.0 == mine.count, seen.1 == mine.count else {
            throw HTTPBenchFailure(message: "u\(u) read \(seen.0) changes through channels and \(seen.1) alone; \(mine.count) expected")
        }
        var userBest = Double.infinity, onlyBest = Double.infinity
        for _ in 0..<20 {
            userBest = min(userBest, try measure { _ = try reader.send(feed) })
            onlyBest = min(onlyBest, try measure { _ = try reader.send(baseline) })
        }
        if userBest / onlyBest > worst.user / max(worst.only, 1e-9) { worst = (userBest, onlyBest) }
        reader.disconnect()
        _ = try call(admin, "DELETE", "/\(only)")
    }
    let share = count / users
    report(Figure(workload: "sync-channels", metric: "a user's _changes from 0 (\(share) of \(count) docs, worst of \(measured.count) users)",
                  value: Double(share) / worst.user, baseline: Double(share) / worst.only,
                  baselineName: "a database of only theirs", goal: 0.5, unit: "rows/s"))
    firstUser.disconnect()
    admin.disconnect()
}
