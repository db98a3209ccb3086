import Foundation
import Testing
import Settee

/// Couchbase Lite's replicator configuration, filters, document listeners and pending documents (Swift), run
/// against Settee with a database endpoint (replication without sockets; the HTTP peers are the same code path
/// behind the `Endpoint` protocol, tested in SetteeReplicationTests).
@Suite struct ReplicatorSnippetTests {
    @Test func urlEndpointTakesCouchbaseLitesURLs() {
        let url = URL(string: "ws://localhost:4984/db")!
        let target = URLEndpoint(url: url)
        // A WebSocket URL speaks Couchbase Lite's protocol; an HTTP one CouchDB's.
        #expect(target.url.absoluteString == "ws://localhost:4984/db")
        #expect(target.speaksCouchbaseLiteProtocol)
        let secure = URLEndpoint(url: URL(string: "wss://sync.example.com/app")!)
        #expect(secure.url.absoluteString == "wss://sync.example.com/app" && secure.speaksCouchbaseLiteProtocol)
        #expect(!URLEndpoint(url: URL(string: "http://localhost:5984/db")!).speaksCouchbaseLiteProtocol)
        var config = ReplicatorConfiguration(target: target)
        #expect(config.collections.isEmpty)
        config.replicatorType = .push
        #expect(Replicator(config: config).status.activity == .stopped)
    }

    @Test func collectionsFiltersAndDocumentListeners() async throws {
        let local = try SnippetDatabase("local"), remote = try SnippetDatabase("remote")
        let collection = local.collection
        let users = try local.database.createCollection(name: "users", scope: "app")
        for i in 0..<6 {
            try collection.save(document: MutableDocument(id: "doc\(i)").setString(i % 2 == 0 ? "public" : "private", forKey: "access"))
        }
        try users.save(document: MutableDocument(id: "ada").setString("Ada", forKey: "name"))
        try remote.collection.save(document: MutableDocument(id: "incoming").setBoolean(true, forKey: "wanted"))
        try remote.collection.save(document: MutableDocument(id: "unwanted").setBoolean(false, forKey: "wanted"))

        var config = ReplicatorConfiguration(target: DatabaseEndpoint(database: remote.database))
        var collectionConfig = CollectionConfiguration()
        collectionConfig.pushFilter = { document, flags in
            document.string(forKey: "access") == "public" || flags.contains(.deleted)
        }
        collectionConfig.pullFilter = { document, _ in document.boolean(forKey: "wanted") }
        config.addCollection(collection, config: collectionConfig)
        config.addCollections([users])
        config.replicatorType = .pushAndPull
        #expect(config.collections.count == 2)

        let replicator = Replicator(config: config)
        #expect(try replicator.pendingDocumentIds(collection: collection) == ["doc0", "doc2", "doc4"])
        #expect(try replicator.isDocumentPending("doc0", collection: collection))
        #expect(try !replicator.isDocumentPending("doc1", collection: collection))

        let seen = Seen()
        let token = replicator.addDocumentReplicationListener { replication in
            for document in replication.documents {
                seen.add("\(replication.isPush ? "push" : "pull"):\(document.collection):\(document.id)")
            }
        }
        replicator.start()
        let status = await replicator.waitUntilStopped()
        token.remove()
        #expect(status.error == nil)
        #expect(try remote.collection.document(id: "doc0") != nil)
        #expect(try remote.collection.document(id: "doc1") == nil)  // filtered out of the push
        #expect(try collection.document(id: "incoming") != nil)
        #expect(try collection.document(id: "unwanted") == nil)     // filtered out of the pull
        // A named collection replicates with the same-named collection of the peer.
        #expect(try remote.database.collection(name: "users", scope: "app")?.document(id: "ada")?.string(forKey: "name") == "Ada")
        #expect(seen.all.isSuperset(of: ["push:_default:doc0", "push:_default:doc2", "push:_default:doc4",
                                         "pull:_default:incoming", "push:users:ada"]))
        #expect(!seen.all.contains("push:_default:doc1") && !seen.all.contains("pull:_default:unwanted"))
        #expect(try replicator.pendingDocumentIds(collection: collection).isEmpty)
        try collection.save(document: MutableDocument(id: "doc6").setString("public", forKey: "access"))
        #expect(try replicator.pendingDocumentIds(collection: collection) == ["doc6"])
        #expect(throws: ReplicationError.self) { try replicator.pendingDocumentIds(collection: try local.database.createCollection(name: "other")) }
    }

    @Test func conflictsResolveAsCouchbaseLiteByDefault() async throws {
        let a = try SnippetDatabase("a"), b = try SnippetDatabase("b")
        try a.collection.save(document: MutableDocument(id: "d").setInt(1, forKey: "v"))
        var push = ReplicatorConfiguration(target: DatabaseEndpoint(database: b.database))
        push.addCollection(a.collection)
        let first = Replicator(config: push)
        first.start()
        _ = await first.waitUntilStopped()
        // Both sides edit: the local side twice (a longer history), the remote side once.
        let local = try #require(try a.collection.document(id: "d")).toMutable()
        try a.collection.save(document: local.setInt(2, forKey: "v"))
        try a.collection.save(document: try #require(try a.collection.document(id: "d")).toMutable().setInt(3, forKey: "v"))
        try b.collection.save(document: try #require(try b.collection.document(id: "d")).toMutable().setInt(9, forKey: "v"))
        var pull = ReplicatorConfiguration(target: DatabaseEndpoint(database: b.database))
        pull.addCollection(a.collection)
        pull.replicatorType = .pull
        let second = Replicator(config: pull)
        second.start()
        _ = await second.waitUntilStopped()
        #expect(try a.collection.conflictedDocumentIDs().isEmpty)
        #expect(try a.collection.document(id: "d")?.int(forKey: "v") == 3)
    }
}

/// Lines heard by a listener on another thread.
final class Seen: @unchecked Sendable {
    // @unchecked: `lines` is guarded by `lock`.
    private let lock = NSLock()
    private var lines: Set<String> = []
    func add(_ line: String) { lock.withLock { _ = lines.insert(line) } }
    var all: Set<String> { lock.withLock { lines } }
}
