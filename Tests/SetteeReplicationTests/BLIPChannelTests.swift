import Foundation
import SetteeCore
import SetteeStore
import Synchronization
@testable import SetteeReplication
import Testing

/// A Couchbase Lite-style pull by channels (Settee's `Replicator` speaking Couchbase Lite's protocol) from a real
/// `settee serve` process whose database has a sync function: the user gets exactly the documents in the
/// intersection of the channels it asked for and those it may read; a document that leaves them is purged from the
/// local database (auto-purge) and reported with `accessRemoved`; a push the sync function refuses fails alone.
@Suite(.serialized) struct BLIPChannelTests {
    static func http(_ s: ServerProcess, _ path: String) -> String { "http://127.0.0.1:\(s.port)\(path)" }

    @Test func aPullByChannelsGetsTheIntersectionAndLosesWhatLeavesIt() async throws {
        let dir = TempDir(), serverDir = TempDir()
        let server = try ServerProcess(dataDirectory: serverDir.path, extraArguments: ["--pbkdf2-iterations", "1000"])
        defer { server.stop() }
        try await HTTP.send(.PUT, Self.http(server, "/_users"))
        try await HTTP.send(.PUT, Self.http(server, "/_users/org.couchdb.user:alice"),
                            #"{"name":"alice","type":"user","roles":[],"password":"pw"}"#)
        try await HTTP.send(.PUT, Self.http(server, "/app"))
        try await HTTP.send(.PUT, Self.http(server, "/app/_security"), #"{"members":{"names":["alice"]}}"#)
        let source = "function (doc, oldDoc) { if (doc.owner) requireUser(doc.owner); channel(doc.channels); }"
        let set = try await HTTP.send(.PUT, Self.http(server, "/app/_config/sync"), JSON.string(source).jsonString)
        #expect(set.status == 201)
        try await HTTP.send(.PUT, Self.http(server, "/app/_user/alice"), #"{"admin_channels":["a","b"]}"#)
        for channel in ["a", "b", "c"] {
            let docs = (0..<20).map { #"{"_id":"\#(channel)\#($0)","channels":["\#(channel)"]}"# }
            let r = try await HTTP.send(.POST, Self.http(server, "/app/_bulk_docs"), #"{"docs":[\#(docs.joined(separator: ","))]}"#)
            #expect(r.status == 201)
        }

        let db = try dir.open("local")
        defer { db.close() }
        let local = try db.defaultCollection()
        var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "ws://127.0.0.1:\(server.port)/app")!))
        config.addCollection(local)
        config.channels = ["a", "c"]
        config.continuous = true
        config.authenticator = BasicAuthenticator(username: "alice", password: "pw")
        let replicator = Replicator(config: config)
        let removed = Mutex<[String]>([])
        replicator.addDocumentReplicationListener { replication in
            for doc in replication.documents where doc.flags.contains(.accessRemoved) { removed.withLock { $0.append(doc.id) } }
        }
        replicator.start()
        defer { replicator.stop() }
        #expect(try await eventually { try local.documentCounts().live == 20 })
        #expect(try await eventually { replicator.status.activity == .idle })
        let ids = try local.allDocs(SetteeStore.Collection.AllDocsOptions()).rows.map(\.id)
        #expect(ids.sorted() == (0..<20).map { "a\($0)" }.sorted(), "channel a only: alice has no c, and b was not asked for")

        // a3 leaves channel a on the server: the pull purges the local copy and reports it.
        let a3 = try await HTTP.send(.GET, Self.http(server, "/app/a3"))
        let rev = a3.json?["_rev"]?.stringValue ?? ""
        try await HTTP.send(.PUT, Self.http(server, "/app/a3?rev=\(rev)"), #"{"channels":["b"]}"#)
        #expect(try await eventually { try local.record(id: "a3") == nil })
        #expect(try await eventually { removed.withLock { $0 } == ["a3"] })

        // alice loses channel a: every document of it is purged from the local database (a revocation).
        try await HTTP.send(.PUT, Self.http(server, "/app/_user/alice"), #"{"admin_channels":["b"]}"#)
        #expect(try await eventually { try local.documentCounts().live == 0 })
        #expect(try await eventually { removed.withLock { $0.count } == 20 })

        // A push the sync function refuses (alice writing as bob) fails alone; hers goes through.
        try local.put("mine", #"{"channels":["b"],"owner":"alice"}"#)
        try local.put("forged", #"{"channels":["b"],"owner":"bob"}"#)
        var stored = false
        for _ in 0..<300 where !stored {
            stored = try await HTTP.send(.GET, Self.http(server, "/app/mine")).status == 200
            if !stored { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(stored)
        #expect(try await HTTP.send(.GET, Self.http(server, "/app/forged")).status == 404)
        replicator.stop()
        _ = await replicator.waitUntilStopped()
    }
}
