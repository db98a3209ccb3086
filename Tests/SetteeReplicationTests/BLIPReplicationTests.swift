import AsyncHTTPClient
import Foundation
import NIOCore
import NIOWebSocket
import NIOHTTP1
import SetteeCore
import SetteeStore
@testable import SetteeReplication
import Synchronization
import Testing

/// Settee's replicator speaking Couchbase Lite's protocol (a `ws://` ``URLEndpoint``) to a real `settee serve`
/// process's `/{db}/_blipsync`, over real sockets: push, pull, updates, deletions, conflicts, continuous mode,
/// checkpoints that resume, errors reported through the status.
@Suite(.serialized) struct BLIPReplicationTests {
    static func http(_ s: ServerProcess, _ db: String) -> String { "http://127.0.0.1:\(s.port)/\(db)" }
    static func ws(_ s: ServerProcess, _ db: String, user: String = "admin", password: String = "secret") -> String {
        "ws://\(user):\(password)@127.0.0.1:\(s.port)/\(db)"
    }

    /// Pushes and pulls once each (push first, as Couchbase Lite's push-and-pull does both at once).
    static func sync(_ local: SetteeStore.Collection, _ url: String, options: ReplicationOptions = ReplicationOptions()) async throws
        -> (push: ReplicationResult, pull: ReplicationResult) {
        let remote = try RemoteEndpoint(url: url)
        defer { remote.disconnect() }
        let push = try await Replication(source: LocalEndpoint(collection: local), target: remote, options: options).run()
        let pull = try await Replication(source: remote, target: LocalEndpoint(collection: local), options: options).run()
        return (push, pull)
    }

    /// The server's copy, pulled over CouchDB's protocol into a database of its own.
    static func serverCopy(_ server: ServerProcess, _ db: String, in dir: TempDir, name: String) async throws -> SetteeStore.Collection {
        let copy = try dir.open(name).defaultCollection()
        _ = try await Replication(source: try RemoteEndpoint(url: "http://admin:secret@127.0.0.1:\(server.port)/\(db)"),
                                  target: LocalEndpoint(collection: copy)).run()
        return copy
    }

    @Test func pushAndPullOverWebSocketMatchCouchDBsProtocol() async throws {
        let dir = TempDir(), serverDir = TempDir()
        let server = try ServerProcess(dataDirectory: serverDir.path)
        defer { server.stop() }
        try await HTTP.send(.PUT, Self.http(server, "app"))
        try await HTTP.load(Self.http(server, "app"), prefix: "server-", count: 250)
        let local = try dir.open("local").defaultCollection()
        for i in 0..<120 { try local.put(String(format: "local-%03d", i), #"{"n":\#(i),"side":"local"}"#) }
        let r1 = try local.put("edited", #"{"v":1}"#)
        let r2 = try local.put("edited", #"{"v":2}"#, parent: r1)
        let gone = try local.put("gone", #"{"v":1}"#)
        try local.remove("gone", parent: gone)

        let (push, pull) = try await Self.sync(local, Self.ws(server, "app"))
        #expect(push.status.error == nil && pull.status.error == nil)
        #expect(push.status.docsWritten == 122)
        #expect(pull.status.docsWritten == 250)
        #expect(try await HTTP.docCount(Self.http(server, "app")) == 371)
        let doc = try await HTTP.send(.GET, Self.http(server, "app") + "/edited?revs=true")
        #expect(doc.json?["_rev"]?.stringValue == r2.description)
        #expect(doc.json?["_revisions"]?["ids"]?.arrayValue?.count == 2, "the history travelled with the revision")
        #expect(try await HTTP.send(.GET, Self.http(server, "app") + "/gone").status == 404)

        // Identical trees on both sides: the server's copy over CouchDB's protocol equals the local database.
        let copy = try await Self.serverCopy(server, "app", in: dir, name: "copy")
        try expectSameTrees(local, copy)

        // A second run finds nothing to do: the checkpoints (on the server, `getCheckpoint`) resume.
        let (again, againPull) = try await Self.sync(local, Self.ws(server, "app"))
        #expect(again.status.docsWritten == 0 && againPull.status.docsWritten == 0)
        #expect(again.status.revisionsChecked == 250, "the push resumed from its checkpoint (only the pulled documents are new)")
        // New documents on the server: only they come.
        try await HTTP.load(Self.http(server, "app"), prefix: "later-", count: 30)
        let (_, third) = try await Self.sync(local, Self.ws(server, "app"))
        #expect(third.status.docsWritten == 30)
        #expect(third.status.revisionsChecked == 30, "the pull resumed from its checkpoint")
    }

    @Test func conflictingEditsResolveTheSameWayOnBothSides() async throws {
        let dir = TempDir(), serverDir = TempDir()
        let server = try ServerProcess(dataDirectory: serverDir.path)
        defer { server.stop() }
        try await HTTP.send(.PUT, Self.http(server, "app"))
        let local = try dir.open("local").defaultCollection()
        let base = try local.put("doc", #"{"v":"base"}"#)
        _ = try await Self.sync(local, Self.ws(server, "app"))
        // Both sides edit the same revision.
        try local.put("doc", #"{"v":"local"}"#, parent: base)
        let put = try await HTTP.send(.PUT, Self.http(server, "app") + "/doc", #"{"_rev":"\#(base.description)","v":"server"}"#)
        #expect(put.status == 201)
        _ = try await Self.sync(local, Self.ws(server, "app"))
        let copy = try await Self.serverCopy(server, "app", in: dir, name: "copy")
        try expectSameTrees(local, copy)
        let record = try #require(try local.record(id: "doc", withTree: true))
        #expect(record.conflicted, "the conflict is kept, as CouchDB's protocol keeps it")
    }

    @Test func continuousReplicatorFollowsBothSides() async throws {
        let dir = TempDir(), serverDir = TempDir()
        let server = try ServerProcess(dataDirectory: serverDir.path)
        defer { server.stop() }
        try await HTTP.send(.PUT, Self.http(server, "app"))
        let db = try dir.open("local")
        defer { db.close() }
        let local = try db.defaultCollection()
        var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "ws://127.0.0.1:\(server.port)/app")!))
        config.addCollection(local)
        config.continuous = true
        config.authenticator = BasicAuthenticator(username: "admin", password: "secret")
        let replicator = Replicator(config: config)
        replicator.start()
        defer { replicator.stop() }
        #expect(try await eventually { replicator.status.activity == .idle })

        try local.put("from-local", #"{"v":1}"#)
        try await HTTP.send(.PUT, Self.http(server, "app") + "/from-server", #"{"v":2}"#)
        #expect(try await eventually { try local.record(id: "from-server") != nil })
        var arrived = false
        for _ in 0..<600 where !arrived {
            arrived = try await HTTP.send(.GET, Self.http(server, "app") + "/from-local").status == 200
            if !arrived { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(arrived, "a local save reached the server")
        // A later change on the server arrives too (the feed stays subscribed).
        try await HTTP.send(.PUT, Self.http(server, "app") + "/later", #"{"v":3}"#)
        #expect(try await eventually { try local.record(id: "later") != nil })
        replicator.stop()
        let status = await replicator.waitUntilStopped()
        #expect(status.error == nil, "\(String(describing: status.error))")
    }

    @Test func pendingDocumentsFiltersAndListenersWorkOverWebSocket() async throws {
        let dir = TempDir(), serverDir = TempDir()
        let server = try ServerProcess(dataDirectory: serverDir.path)
        defer { server.stop() }
        try await HTTP.send(.PUT, Self.http(server, "app"))
        let db = try dir.open("local")
        defer { db.close() }
        let local = try db.defaultCollection()
        for id in ["a", "b", "skip"] { try local.put(id, #"{"v":"\#(id)"}"#) }
        var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "ws://127.0.0.1:\(server.port)/app")!))
        config.addCollection(local)
        config.replicatorType = .push
        config.pushFilter = { document, _ in document.id != "skip" }
        config.authenticator = BasicAuthenticator(username: "admin", password: "secret")
        let replicator = Replicator(config: config)
        #expect(try replicator.pendingDocumentIds() == ["a", "b", "skip"])
        let pushed = Mutex<Set<String>>([])
        let token = replicator.addDocumentReplicationListener { change in
            pushed.withLock { for document in change.documents where change.isPush && document.error == nil { $0.insert(document.id) } }
        }
        defer { token.remove() }
        replicator.start()
        let status = await replicator.waitUntilStopped()
        #expect(status.error == nil, "\(String(describing: status.error))")
        #expect(try replicator.pendingDocumentIds().isEmpty, "the filtered-out document is passed by the checkpoint")
        #expect(pushed.withLock { $0 } == ["a", "b"])
        #expect(try await HTTP.send(.GET, Self.http(server, "app") + "/a").status == 200)
        #expect(try await HTTP.send(.GET, Self.http(server, "app") + "/skip").status == 404)
    }

    @Test func blobsAndAttachmentsTravelBothWaysOverWebSocket() async throws {
        let dir = TempDir(), serverDir = TempDir()
        let server = try ServerProcess(dataDirectory: serverDir.path)
        defer { server.stop() }
        try await HTTP.send(.PUT, Self.http(server, "app"))
        let db = try dir.open("local")
        defer { db.close() }
        let local = try db.defaultCollection()
        // A blob saved through Couchbase Lite's API, larger than a BLIP frame.
        let photo = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let doc = MutableDocument(id: "with-blob")
        doc.setString("holiday", forKey: "title")
        doc.setBlob(Blob(contentType: "image/jpeg", data: Data(photo)), forKey: "photo")
        try local.save(document: doc)
        // An attachment written over CouchDB's API on the server.
        let put = try await HTTP.send(.PUT, Self.http(server, "app") + "/with-attachment", #"{"title":"notes"}"#)
        let rev = try #require(put.json?["rev"]?.stringValue)
        var request = HTTPClientRequest(url: Self.http(server, "app") + "/with-attachment/notes.txt?rev=" + rev)
        request.method = .PUT
        request.headers.add(name: "Authorization", value: HTTP.auth)
        request.headers.add(name: "Content-Type", value: "text/plain")
        request.body = .bytes(ByteBuffer(string: "written over CouchDB's API"))
        let stored = try await RemoteEndpoint.sharedClient.execute(request, timeout: .seconds(30))
        #expect(stored.status.code == 201)

        let (push, pull) = try await Self.sync(local, Self.ws(server, "app"))
        #expect(push.status.error == nil && pull.status.error == nil)
        // The blob is an attachment to CouchDB's API, with its bytes and content type.
        var get = HTTPClientRequest(url: Self.http(server, "app") + "/with-blob/blob_%2Fphoto")
        get.headers.add(name: "Authorization", value: HTTP.auth)
        let response = try await RemoteEndpoint.sharedClient.execute(get, timeout: .seconds(30))
        #expect(response.status.code == 200)
        #expect(response.headers.first(name: "Content-Type") == "image/jpeg")
        #expect(Array(try await response.body.collect(upTo: 1 << 22).readableBytesView) == photo)
        // The attachment arrived with its bytes, under the revision the server has. (The server keeps text
        // attachments gzip-compressed, so its stub names the compressed body; Couchbase Lite's protocol carries the
        // attachment's own bytes, and this side stores them as they are.)
        let pulled = try #require(try local.record(id: "with-attachment"))
        #expect(pulled.revID.description == (try await HTTP.send(.GET, Self.http(server, "app") + "/with-attachment")).json?["_rev"]?.stringValue)
        let stub = try #require(try JSON.parse(pulled.body)["_attachments"]?["notes.txt"])
        #expect(stub["content_type"]?.stringValue == "text/plain" && stub["length"]?.intValue == 26)
        let digest = try #require(stub["digest"]?.stringValue)
        #expect(try db.blob(digest: digest) == Array("written over CouchDB's API".utf8))
        let localBlob = try #require(try local.document(id: "with-blob")?.blob(forKey: "photo"))
        #expect(localBlob.content.map(Array.init) == photo)
        // An edit that keeps the blob: the revision names it by its SHA-1 again, and the server, which has it, keeps it.
        let edited = try #require(try local.document(id: "with-blob")).toMutable()
        edited.setString("holiday, edited", forKey: "title")
        try local.save(document: edited)
        let (again, _) = try await Self.sync(local, Self.ws(server, "app"))
        #expect(again.status.error == nil && again.status.docsWritten == 1 && again.status.docWriteFailures == 0)
        let second = try await HTTP.send(.GET, Self.http(server, "app") + "/with-blob")
        #expect(second.json?["title"]?.stringValue == "holiday, edited")
        #expect(second.json?["_rev"]?.stringValue?.hasPrefix("2-") == true)
        let refetched = try await RemoteEndpoint.sharedClient.execute(get, timeout: .seconds(30))
        #expect(Array(try await refetched.body.collect(upTo: 1 << 22).readableBytesView) == photo)
    }

    @Test func namedCollectionsAreAskedForWithGetCollections() async throws {
        let dir = TempDir(), serverDir = TempDir()
        let server = try ServerProcess(dataDirectory: serverDir.path)
        defer { server.stop() }
        try await HTTP.send(.PUT, Self.http(server, "app"))
        #expect(try await HTTP.send(.PUT, Self.http(server, "app.inventory.items")).status == 201)
        try await HTTP.send(.PUT, Self.http(server, "app.inventory.items") + "/from-server", #"{"kind":"server"}"#)
        try await HTTP.send(.PUT, Self.http(server, "app") + "/in-default", #"{"kind":"default"}"#)
        let db = try dir.open("local")
        defer { db.close() }
        let items = try db.createCollection(name: "items", scope: "inventory")
        let main = try db.defaultCollection()
        try items.put("from-local", #"{"kind":"local"}"#)
        try main.put("local-default", #"{"kind":"default"}"#)
        var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "ws://127.0.0.1:\(server.port)/app")!))
        config.addCollections([main, items])
        config.authenticator = BasicAuthenticator(username: "admin", password: "secret")
        let replicator = Replicator(config: config)
        replicator.start()
        let status = await replicator.waitUntilStopped()
        #expect(status.error == nil, "\(String(describing: status.error))")
        // Each collection went to its own: on the server, the keyspace; here, the named collection.
        #expect(try await HTTP.send(.GET, Self.http(server, "app.inventory.items") + "/from-local").status == 200)
        #expect(try await HTTP.send(.GET, Self.http(server, "app") + "/from-local").status == 404)
        #expect(try await HTTP.send(.GET, Self.http(server, "app") + "/local-default").status == 200)
        #expect(try items.record(id: "from-server") != nil && items.record(id: "in-default") == nil)
        #expect(try main.record(id: "in-default") != nil && main.record(id: "from-server") == nil)
        // A collection the server's database lacks: the replicator stops with notFound.
        let orphan = try db.createCollection(name: "nowhere", scope: "inventory")
        var missing = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "ws://127.0.0.1:\(server.port)/app")!))
        missing.addCollection(orphan)
        missing.authenticator = BasicAuthenticator(username: "admin", password: "secret")
        let refused = Replicator(config: missing)
        refused.start()
        let refusal = await refused.waitUntilStopped()
        #expect(refusal.error?.kind == .notFound, "\(String(describing: refusal.error))")
    }

    @Test func aServerKilledMidPullIsRetriedAndThePullResumes() async throws {
        let dir = TempDir(), serverDir = TempDir()
        var server = try ServerProcess(dataDirectory: serverDir.path)
        let port = server.port
        defer { server.stop() }
        try await HTTP.send(.PUT, Self.http(server, "app"))
        try await HTTP.load(Self.http(server, "app"), prefix: "d", count: 6000)
        let db = try dir.open("local")
        defer { db.close() }
        let local = try db.defaultCollection()
        var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "ws://127.0.0.1:\(port)/app")!))
        config.addCollection(local)
        config.replicatorType = .pull
        config.batchSize = 100
        config.maxAttempts = 100
        config.maxAttemptWaitTime = 0.5
        config.authenticator = BasicAuthenticator(username: "admin", password: "secret")
        let replicator = Replicator(config: config)
        replicator.start()
        // Some documents arrive, then the node dies (no shutdown at all) and comes back on the same port.
        #expect(try await eventually { replicator.status.docsWritten >= 200 })
        server.kill9()
        let before = replicator.status.docsWritten
        server = try ServerProcess(dataDirectory: serverDir.path, port: port)
        let status = await replicator.waitUntilStopped()
        #expect(status.error == nil, "\(String(describing: status.error))")
        #expect(try local.allIDs().count == 6000)
        #expect(before < 6000, "the node died mid-pull")
    }

    @Test func refusalsAndUnreachableServersAreReportedNotThrown() async throws {
        let dir = TempDir(), serverDir = TempDir()
        let server = try ServerProcess(dataDirectory: serverDir.path)
        defer { server.stop() }
        try await HTTP.send(.PUT, Self.http(server, "app"))
        try await HTTP.send(.PUT, "http://127.0.0.1:\(server.port)/_users/org.couchdb.user:reader",
                            #"{"name":"reader","password":"pw","roles":[],"type":"user"}"#)
        try await HTTP.send(.PUT, Self.http(server, "app") + "/_security",
                            #"{"members":{"names":["writer"]},"readers":{"names":["reader"]}}"#)
        try await HTTP.send(.PUT, Self.http(server, "app") + "/shared", #"{"v":1}"#)
        let db = try dir.open("local")
        defer { db.close() }
        let local = try db.defaultCollection()
        try local.put("mine", #"{"v":1}"#)

        func run(_ url: String, _ type: ReplicatorType, user: String? = nil, password: String = "") async -> ReplicatorStatus {
            var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: url)!))
            config.addCollection(local)
            config.replicatorType = type
            config.maxAttempts = 2
            config.maxAttemptWaitTime = 0.2
            if let user { config.authenticator = BasicAuthenticator(username: user, password: password) }
            let replicator = Replicator(config: config)
            replicator.start()
            return await replicator.waitUntilStopped()
        }
        // A reader pulls; its push is refused (403), as Sync Gateway refuses a read-only user.
        let pulled = await run("ws://127.0.0.1:\(server.port)/app", .pull, user: "reader", password: "pw")
        #expect(pulled.error == nil, "\(String(describing: pulled.error))")
        #expect(try local.record(id: "shared") != nil)
        let pushed = await run("ws://127.0.0.1:\(server.port)/app", .push, user: "reader", password: "pw")
        #expect(pushed.error?.kind == .forbidden, "\(String(describing: pushed.error))")
        // Wrong credentials, a missing database: the handshake's answer, at once.
        let wrong = await run("ws://127.0.0.1:\(server.port)/app", .pull, user: "reader", password: "nope")
        #expect(wrong.error?.kind == .unauthorized, "\(String(describing: wrong.error))")
        let missing = await run("ws://127.0.0.1:\(server.port)/nothere", .pull, user: "admin", password: "secret")
        #expect(missing.error?.kind == .notFound, "\(String(describing: missing.error))")
        // Nothing listening: created and started without throwing, retried, then stopped with the error.
        let closedPort = freePort()
        let unreachable = await run("ws://127.0.0.1:\(closedPort)/app", .pushAndPull)
        #expect(unreachable.error?.kind == .unreachable, "\(String(describing: unreachable.error))")
        #expect(unreachable.activity == .stopped)
    }

    /// The session's word-at-a-time unmasking gives what RFC 6455 §5.3 says, byte by byte, at any offset and length.
    @Test func unmaskingMatchesTheRFC() {
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 3, 7, 8, 9, 15, 16, 17, 100, 1031] {
            for prefix in [0, 1, 5, 8] {
                let key = WebSocketMaskingKey.random(using: &generator)
                let head = (0..<prefix).map { _ in UInt8.random(in: 0...255) }
                let payload = (0..<length).map { _ in UInt8.random(in: 0...255) }
                var bytes = head + payload
                BLIPSession.unmask(&bytes, from: prefix, key: key)
                let expected = head + payload.enumerated().map { i, b in b ^ key[key.startIndex + i % 4] }
                #expect(bytes == expected, "length \(length) after \(prefix) bytes")
            }
        }
    }
}
