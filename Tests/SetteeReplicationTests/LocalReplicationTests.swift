import Foundation
import SetteeCore
import SetteeStore
@testable import SetteeReplication
import Testing

/// Local ↔ local replication in one process (LocalEndpoint on both sides, no sockets).
@Suite struct LocalReplicationTests {
    @Test func oneShotPushCopiesDocumentsTombstonesAndAttachments() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        var revs: [String: RevID] = [:]
        for i in 0..<1234 { revs["doc\(i)"] = try a.put("doc\(i)", #"{"n":\#(i)}"#) }
        let r1 = try a.put("doc1", #"{"n":1,"edited":true}"#, parent: revs["doc1"])
        try a.remove("doc2", parent: revs["doc2"]!)
        try a.write(RevisionWrite(id: "withatt", body: obj(#"{"_attachments":{"a.txt":{"content_type":"text/plain","digest":"\#(Database.attachmentDigest(Array("hello".utf8)))","length":5,"revpos":1,"stub":true}}}"#),
                                  mode: .edit(parent: nil), blobs: [(Database.attachmentDigest(Array("hello".utf8)), Array("hello".utf8))]))

        let replication = Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b))
        let result = try await replication.run()
        #expect(result.status.docsWritten == 1235)
        #expect(result.status.docWriteFailures == 0)
        #expect(result.status.activity == .stopped)
        try expectSameTrees(a, b)
        #expect(try b.winner("doc1") == r1)
        #expect(try b.record(id: "doc2")?.deleted == true)
        #expect(try b.database.blob(digest: Database.attachmentDigest(Array("hello".utf8))) == Array("hello".utf8))

        // Checkpoints on both sides, in CouchDB's shape.
        let cpA = try #require(try a.localDocument(id: replication.replicationID))
        let cpB = try #require(try b.localDocument(id: replication.replicationID))
        #expect(cpA.body["session_id"] == cpB.body["session_id"])
        #expect(cpB.body["source_last_seq"] == .int(Int64(a.database.lastSequence)))
        #expect(cpB.body["history"]?.arrayValue?.first?["docs_written"] == .int(1235))
        #expect(cpB.body["replication_id_version"] != nil)

        // Incremental: only what changed since the checkpoint travels.
        try a.put("doc3", #"{"n":3,"again":true}"#, parent: revs["doc3"])
        try a.put("new", #"{}"#)
        let again = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b)).run()
        #expect(again.status.revisionsChecked == 2)
        #expect(again.status.docsWritten == 2)
        try expectSameTrees(a, b)
    }

    @Test func aFailureOnThisSideIsALocalErrorNotTheRequests() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        try a.put("doc", #"{"v":1}"#)
        let full = FaultInjectingEndpoint(LocalEndpoint(collection: b))
        full.inject(.storageError, on: [.write])
        let error = await #expect(throws: ReplicationError.self) {
            try await Replication(source: LocalEndpoint(collection: a), target: full).run()
        }
        #expect(error?.kind == .local, "\(String(describing: error))")
        #expect(error?.isTransient == false)
    }

    @Test func pushAndPullConvergesWithIdenticalConflicts() async throws {
        let dir = TempDir()
        let dbA = try dir.open("a"), dbB = try dir.open("b")
        let a = try dbA.defaultCollection(), b = try dbB.defaultCollection()
        var base: [String: RevID] = [:]
        for i in 0..<50 { base["d\(i)"] = try a.put("d\(i)", #"{"v":0}"#) }
        let first = Replicator(config: ReplicatorConfiguration(collection: a, target: LocalEndpoint(collection: b)))
        first.start()
        let s = await first.waitUntilStopped()
        #expect(s.error == nil)
        try expectSameTrees(a, b)

        // Concurrent edits of the same documents on both sides, plus creations and a delete on each.
        for i in 0..<20 {
            try a.put("d\(i)", #"{"v":"a"}"#, parent: base["d\(i)"])
            try b.put("d\(i)", #"{"v":"b","longer":true}"#, parent: base["d\(i)"])
        }
        try a.remove("d30", parent: base["d30"]!)
        try b.put("d31", #"{"v":"b-only"}"#, parent: base["d31"])
        try a.put("onlyA", #"{}"#)
        try b.put("onlyB", #"{}"#)

        let sync = Replicator(config: ReplicatorConfiguration(collection: a, target: LocalEndpoint(collection: b)))
        sync.start()
        let status = await sync.waitUntilStopped()
        #expect(status.error == nil)
        try expectSameTrees(a, b)
        for i in 0..<20 {
            let record = try #require(try a.record(id: "d\(i)", withTree: true))
            #expect(record.conflicted, "d\(i) keeps both branches")
            #expect(record.tree?.conflicts.count == 1)
        }
        #expect(try b.record(id: "d30")?.deleted == true)
        #expect(try a.document(id: "d31")?.string(forKey: "v") == "b-only")
    }

    @Test func conflictResolversPickOrMerge() async throws {
        for mode in ["local", "remote", "merge", "default"] {
            let dir = TempDir()
            let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
            let r0 = try a.put("doc", #"{"v":0}"#)
            _ = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b)).run()
            let local = try a.put("doc", #"{"v":"local"}"#, parent: r0)
            let remote = try b.put("doc", #"{"v":"remote"}"#, parent: r0)
            var config = ReplicatorConfiguration(collection: a, target: LocalEndpoint(collection: b))
            config.replicatorType = .pull
            switch mode {
            case "local": config.conflictResolver = ConflictResolver.localWins
            case "remote": config.conflictResolver = ConflictResolver.remoteWins
            case "merge":
                config.conflictResolver = ConflictResolver.custom { conflict in
                    let merged = conflict.localDocument!.toMutable()
                    merged.setString("merged", forKey: "v")
                    return merged
                }
            default: config.conflictResolver = ConflictResolver.default
            }
            let replicator = Replicator(config: config)
            replicator.start()
            let status = await replicator.waitUntilStopped()
            #expect(status.error == nil)
            let record = try #require(try a.record(id: "doc", withTree: true))
            #expect(!record.conflicted, "\(mode): the conflict is resolved")
            let v = try a.document(id: "doc")?.string(forKey: "v")
            switch mode {
            case "local": #expect(v == "local"); #expect(record.revID == local)
            case "remote": #expect(v == "remote"); #expect(record.revID == remote)
            case "merge": #expect(v == "merged"); #expect(record.revID.generation == 3)
            default: #expect(record.revID == max(local, remote))
            }
        }
    }

    @Test func conflictsLeftByAnInterruptedRunAreResolvedOnTheNextPull() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        let r0 = try a.put("doc", #"{"v":0}"#)
        _ = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b)).run()
        try a.put("doc", #"{"v":"local"}"#, parent: r0)
        try b.put("doc", #"{"v":"remote"}"#, parent: r0)
        // A pull without a resolver (as if the resolver never ran) leaves the conflict …
        _ = try await Replication(source: LocalEndpoint(collection: b), target: LocalEndpoint(collection: a)).run()
        #expect(try a.record(id: "doc")?.conflicted == true)
        // … and the next pull with a resolver finishes the job even though nothing new arrives.
        var options = ReplicationOptions()
        options.conflictResolver = ConflictResolver.remoteWins
        _ = try await Replication(source: LocalEndpoint(collection: b), target: LocalEndpoint(collection: a), options: options).run()
        #expect(try a.record(id: "doc")?.conflicted == false)
    }

    @Test func documentIDAndSelectorFilters() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection()
        for i in 0..<100 { try a.put("d\(i)", #"{"even":\#(i % 2 == 0),"i":\#(i)}"#) }
        let b = try dir.open("b").defaultCollection()
        var byID = ReplicationOptions()
        byID.documentIDs = ["d1", "d2", "d77", "nope"]
        _ = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b), options: byID).run()
        #expect(try b.allIDs() == ["d1", "d2", "d77"])

        let c = try dir.open("c").defaultCollection()
        var bySelector = ReplicationOptions()
        bySelector.selector = try JSON.parse(#"{"even":true,"i":{"$lt":10}}"#)
        bySelector.batchSize = 3
        let r = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: c),
                                      options: bySelector).run()
        #expect(try c.allIDs() == ["d0", "d2", "d4", "d6", "d8"])
        #expect(r.status.docsWritten == 5)
    }

    @Test func aSelectorMatchingOnlyLateDocumentsStillFindsThem() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        for i in 0..<3000 { try a.put(String(format: "d%05d", i), #"{"match":\#(i >= 2500)}"#) }
        var options = ReplicationOptions()
        options.selector = try JSON.parse(#"{"match":true}"#)
        let r = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b),
                                      options: options).run()
        #expect(r.status.docsWritten == 500)
        #expect(try b.documentCounts().live == 500)
    }

    @Test func continuousReplicationFollowsTheCommitFeedUntilStopped() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        var config = ReplicatorConfiguration(collection: a, target: LocalEndpoint(collection: b))
        config.continuous = true
        let replicator = Replicator(config: config)
        let updates = replicator.statusUpdates()
        let seen = Task {
            var activities = Set<String>()
            for await s in updates { activities.insert(s.activity.name) }
            return activities
        }
        replicator.start()
        try a.put("first", "{}")
        #expect(try await eventually { try b.record(id: "first") != nil })
        try b.put("second", "{}")
        #expect(try await eventually { try a.record(id: "second") != nil })
        #expect(try await eventually { replicator.status.activity == .idle })
        for i in 0..<300 { try a.put("bulk\(i)", "{}") }
        #expect(try await eventually { try b.documentCounts().live == 302 })
        replicator.stop()
        let final = await replicator.waitUntilStopped()
        #expect(final.activity == .stopped)
        let activities = await seen.value
        #expect(activities.isSuperset(of: ["busy", "idle", "stopped"]), "\(activities)")
        try expectSameTrees(a, b)
    }

    @Test func faultsAreRetriedAndNothingIsLost() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        for i in 0..<2000 { try a.put(String(format: "doc%05d", i), #"{"i":\#(i)}"#) }
        let source = FaultInjectingEndpoint(LocalEndpoint(collection: a), seed: 7)
        let target = FaultInjectingEndpoint(LocalEndpoint(collection: b), seed: 8)
        source.inject(.serverError, on: [.changes, .fetch], probability: 0.2)
        source.inject(.drop, on: [.databaseInfo, .localDocument], probability: 0.2)
        target.inject(.truncated, on: [.write], probability: 0.25)
        target.inject(.drop, on: [.revsDiff, .putLocalDocument], probability: 0.15)
        target.inject(.delay(.milliseconds(5)), on: [.write], probability: 0.3)
        var options = ReplicationOptions()
        options.batchSize = 100
        fastRetries(&options)
        let result = try await Replication(source: source, target: target, options: options).run()
        #expect(result.status.activity == .stopped)
        #expect(source.injected.values.reduce(0, +) > 5)
        #expect(target.injected.values.reduce(0, +) > 5)
        try expectSameTrees(a, b)
    }

    @Test func aOneShotReplicationGivesUpAfterMaxAttempts() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        try a.put("x", "{}")
        let target = FaultInjectingEndpoint(LocalEndpoint(collection: b))
        target.offline = true
        var options = ReplicationOptions()
        fastRetries(&options)
        options.maxAttempts = 3
        let replication = Replication(source: LocalEndpoint(collection: a), target: target, options: options)
        await #expect(throws: ReplicationError.self) { try await replication.run() }
        #expect(replication.status.error?.kind == .unreachable)
        #expect(target.injected[.databaseInfo] == 3)
    }

    @Test func aContinuousReplicationRidesOutAPartition() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        let target = FaultInjectingEndpoint(LocalEndpoint(collection: b))
        var options = ReplicationOptions()
        options.continuous = true
        fastRetries(&options)
        options.longpollTimeout = .milliseconds(300)
        let replication = Replication(source: LocalEndpoint(collection: a), target: target, options: options)
        let task = Task { try await replication.run() }
        try a.put("before", "{}")
        #expect(try await eventually { try b.record(id: "before") != nil })
        target.offline = true
        try a.put("during", "{}")
        #expect(try await eventually { replication.status.activity == .offline })
        #expect(try b.record(id: "during") == nil)
        target.offline = false
        #expect(try await eventually { try b.record(id: "during") != nil })
        task.cancel()
        let result = try await task.value
        #expect(result.status.activity == .stopped)
    }

    @Test func startingPointFollowsCouchDBsLogComparison() {
        func doc(_ session: String, _ seq: Int64, history: [(String, Int64)]) -> JSONObject {
            ["session_id": .string(session), "source_last_seq": .int(seq),
             "history": .array(history.map { ["session_id": .string($0.0), "recorded_seq": .int($0.1)] })]
        }
        #expect(Checkpointer.startSequence(source: nil, target: nil) == .int(0))
        #expect(Checkpointer.startSequence(source: doc("s1", 10, history: [("s1", 10)]),
                                           target: doc("s1", 10, history: [("s1", 10)])) == .int(10))
        // The target missed the newest session (crash between the two writes): fall back to the common one.
        #expect(Checkpointer.startSequence(source: doc("s3", 30, history: [("s3", 30), ("s2", 20), ("s1", 10)]),
                                           target: doc("s2", 20, history: [("s2", 20), ("s1", 10)])) == .int(20))
        #expect(Checkpointer.startSequence(source: doc("x", 30, history: [("x", 30)]),
                                           target: doc("y", 20, history: [("y", 20)])) == .int(0))
    }
}

/// Attachments travel once; purges stay local (as in CouchDB).
@Suite struct AttachmentAndPurgeReplicationTests {
    @Test func unchangedAttachmentsAreNotSentAgain() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        let data = Array(repeating: UInt8(ascii: "x"), count: 10_000)
        let digest = Database.attachmentDigest(data)
        let r1 = try a.write(RevisionWrite(
            id: "doc", body: obj(#"{"v":1,"_attachments":{"big.bin":{"content_type":"application/octet-stream","digest":"\#(digest)","length":10000,"revpos":1,"stub":true}}}"#),
            mode: .edit(parent: nil), blobs: [(digest, data)]))
        _ = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b)).run()
        #expect(try b.database.blob(digest: digest) == data)

        // A second revision keeps the attachment: fetched with atts_since, it travels as a stub only.
        var body = try #require(try a.record(id: "doc")).json()
        body["v"] = 2
        let r2 = try a.write(RevisionWrite(id: "doc", body: body, mode: .edit(parent: r1)))
        let fetched = try await LocalEndpoint(collection: a).fetch([FetchRequest(id: "doc", revs: [r2], attsSince: [r1])])
        #expect(fetched.count == 1)
        #expect(fetched[0].attachments.isEmpty)
        #expect(fetched[0].body["_attachments"]?["big.bin"]?["stub"] == true)
        let withoutSince = try await LocalEndpoint(collection: a).fetch([FetchRequest(id: "doc", revs: [r2])])
        #expect(withoutSince[0].attachments[digest] == data)

        let second = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b)).run()
        #expect(second.status.docsWritten == 1)
        #expect(try b.winner("doc") == r2)
        #expect(try b.document(id: "doc")?.attachments?["big.bin"]?["digest"] == .string(digest))
    }

    @Test func purgesAreNotReplicated() async throws {
        let dir = TempDir()
        let a = try dir.open("a").defaultCollection(), b = try dir.open("b").defaultCollection()
        try a.put("keep", "{}")
        try a.put("gone", "{}")
        _ = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b)).run()
        try a.purge(id: "gone")
        try a.put("later", "{}")
        _ = try await Replication(source: LocalEndpoint(collection: a), target: LocalEndpoint(collection: b)).run()
        #expect(try b.record(id: "gone") != nil, "a purge removes the document on its own node only")
        #expect(try b.record(id: "later") != nil)
        #expect(try a.record(id: "gone") == nil)
    }
}

@Suite struct CheckpointDateTests {
    /// `start_time`/`end_time` are formatted by hand; they read as CouchDB's (and Foundation's) HTTP dates.
    @Test func httpDatesReadAsDateFormatterWritesThem() {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var rng = SeededGenerator(seed: 7)
        let dates = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 951_782_400), Date()]
            + (0..<200).map { _ in Date(timeIntervalSince1970: Double.random(in: 0..<4_102_444_800, using: &rng)) }
        for date in dates {
            #expect(Checkpointer.httpDate(date) == f.string(from: date))
        }
    }
}
