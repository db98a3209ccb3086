import Foundation
import Testing
import SetteeCore
@testable import SetteeStore

@Suite struct MVCCTests {
    @Test func createThenUpdateWithCurrentRev() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let r1 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":1}"#), mode: .edit(parent: nil)))
        #expect(r1.generation == 1)
        let r2 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":2}"#), mode: .edit(parent: r1)))
        #expect(r2.generation == 2)
        let record = try #require(try c.record(id: "a"))
        #expect(record.revID == r2)
        #expect(try record.json() == obj(#"{"x":2}"#))
    }

    @Test func staleOrMissingRevIsAConflictAndChangesNothing() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let r1 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":1}"#), mode: .edit(parent: nil)))
        let r2 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":2}"#), mode: .edit(parent: r1)))
        let seq = db.lastSequence
        for parent in [nil, r1, rev("9-nope")] {
            #expect {
                try c.write(RevisionWrite(id: "a", body: obj(#"{"x":3}"#), mode: .edit(parent: parent)))
            } throws: { ($0 as? SetteeError)?.code == .conflict }
        }
        #expect(try c.record(id: "a")?.revID == r2)
        #expect(db.lastSequence == seq)
    }

    @Test func updatingAMissingDocumentWithARevIsAConflict() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        #expect { try c.write(RevisionWrite(id: "nope", body: [:], mode: .edit(parent: rev("1-abc")))) }
            throws: { ($0 as? SetteeError)?.code == .conflict }
        #expect(try c.record(id: "nope") == nil)
    }

    @Test func bulkWritesReportPerDocumentOutcomes() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try c.write(RevisionWrite(id: "dup", body: [:], mode: .edit(parent: nil)))
        let results = try c.write([
            RevisionWrite(id: "n1", body: [:], mode: .edit(parent: nil)),
            RevisionWrite(id: "dup", body: [:], mode: .edit(parent: nil)),
            RevisionWrite(id: "_bad", body: [:], mode: .edit(parent: nil)),
            RevisionWrite(id: "n2", body: [:], mode: .edit(parent: nil)),
        ])
        #expect((try? results[0].get()) != nil)
        #expect(results[1].error?.code == .conflict)
        #expect(results[2].error?.code == .badDocID)
        #expect((try? results[3].get()) != nil)
        #expect(try c.documentCounts().live == 3)
    }
}

@Suite struct TombstoneTests {
    @Test func deleteWritesATombstoneThatCanBeRecreated() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let r1 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":1}"#), mode: .edit(parent: nil)))
        let r2 = try c.write(RevisionWrite(id: "a", body: [:], deleted: true, mode: .edit(parent: r1)))
        #expect(r2.generation == 2)
        let record = try #require(try c.record(id: "a", withTree: true))
        #expect(record.deleted)
        #expect(try c.document(id: "a") == nil)
        #expect(try c.documentCounts() == (0, 1))
        // Re-creating without a rev extends the tombstone.
        let r3 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":4}"#), mode: .edit(parent: nil)))
        #expect(r3.generation == 3)
        #expect(try c.document(id: "a")?.int(forKey: "x") == 4)
    }
}

@Suite struct ConflictTests {
    /// Two replicas edit 1-a; both edits arrive by replication.
    func conflicted(_ c: SetteeStore.Collection) throws {
        let results = try c.write([
            RevisionWrite(id: "c", body: obj(#"{"v":"b"}"#), mode: .replicated(history: [rev("2-bbb"), rev("1-aaa")])),
            RevisionWrite(id: "c", body: obj(#"{"v":"c"}"#), mode: .replicated(history: [rev("2-ccc"), rev("1-aaa")])),
            RevisionWrite(id: "c", body: [:], deleted: true,
                          mode: .replicated(history: [rev("3-ddd"), rev("2-zzz"), rev("1-aaa")])),
        ])
        for result in results { _ = try result.get() }
    }

    @Test func liveBranchBeatsDeletedAndHigherDigestWins() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try conflicted(c)
        let record = try #require(try c.record(id: "c", withTree: true))
        #expect(record.revID == rev("2-ccc"))
        #expect(record.conflicted)
        #expect(record.tree?.conflicts == [rev("2-bbb")])
        #expect(record.tree?.deletedConflicts == [rev("3-ddd")])
        // Losing leaves keep their bodies.
        #expect(record.revision(rev("2-bbb")).map { String(decoding: $0.body, as: UTF8.self) } == #"{"v":"b"}"#)
    }

    @Test func resolvingByDeletingTheLoserClearsTheConflict() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try conflicted(c)
        try c.write(RevisionWrite(id: "c", body: [:], deleted: true, mode: .edit(parent: rev("2-bbb"))))
        let record = try #require(try c.record(id: "c", withTree: true))
        #expect(record.revID == rev("2-ccc"))
        #expect(!record.conflicted)
        #expect(record.tree?.conflicts == [])
    }

    @Test func deletingTheWinnerPromotesTheLoserWithItsBody() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try conflicted(c)
        try c.write(RevisionWrite(id: "c", body: [:], deleted: true, mode: .edit(parent: rev("2-ccc"))))
        let record = try #require(try c.record(id: "c", withTree: true))
        #expect(record.revID == rev("2-bbb"))
        #expect(try record.json() == obj(#"{"v":"b"}"#))
    }

    @Test func replicatingTheSameRevisionTwiceIsIdempotent() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try conflicted(c)
        let seq = db.lastSequence
        try conflicted(c)
        #expect(db.lastSequence == seq)
    }

    @Test func revsDiffAcrossDocuments() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try conflicted(c)
        let diff = try c.revsDiff([("c", [rev("2-bbb"), rev("4-eee")]), ("zz", [rev("1-abc")]), ("c", [rev("2-ccc")])])
        #expect(diff.count == 2)
        #expect(diff[0].diff.missing == [rev("4-eee")])
        #expect(diff[1].id == "zz")
    }

    /// Replicated children of the current leaf extend the stored chain in place; a child of an older
    /// revision branches (a conflict), and a history whose generations skip is refused — as in the general path.
    @Test func replicatedRevisionsExtendTheChainOrBranch() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try c.write(RevisionWrite(id: "r", body: obj(#"{"v":1}"#), mode: .replicated(history: [rev("1-aaa")])))
        try c.write(RevisionWrite(id: "r", body: obj(#"{"v":2}"#), mode: .replicated(history: [rev("2-bbb"), rev("1-aaa")])))
        try c.write(RevisionWrite(id: "r", body: obj(#"{"v":3}"#),
                                  mode: .replicated(history: [rev("3-ccc"), rev("2-bbb"), rev("1-aaa")])))
        var record = try #require(try c.record(id: "r", withTree: true))
        #expect(record.revID == rev("3-ccc"))
        #expect(try record.json() == obj(#"{"v":3}"#))
        #expect(record.tree?.history(of: rev("3-ccc")) == [rev("3-ccc"), rev("2-bbb"), rev("1-aaa")])
        #expect(!record.conflicted)

        let skipping = try c.write([RevisionWrite(id: "r", body: [:], mode: .replicated(history: [rev("5-eee"), rev("3-ccc")]))])
        #expect(throws: SetteeError.self) { try skipping[0].get() }
        try c.write(RevisionWrite(id: "r", body: obj(#"{"v":"d"}"#),
                                  mode: .replicated(history: [rev("3-ddd"), rev("2-bbb"), rev("1-aaa")])))
        record = try #require(try c.record(id: "r", withTree: true))
        #expect(record.revID == rev("3-ddd"))
        #expect(record.conflicted)
        #expect(record.tree?.conflicts == [rev("3-ccc")])
        #expect(record.revision(rev("3-ccc")).map { String(decoding: $0.body, as: UTF8.self) } == #"{"v":3}"#)

        // A replicated tombstone on a chain.
        try c.write(RevisionWrite(id: "t", body: [:], mode: .replicated(history: [rev("1-a")])))
        try c.write(RevisionWrite(id: "t", body: [:], deleted: true, mode: .replicated(history: [rev("2-b"), rev("1-a")])))
        record = try #require(try c.record(id: "t", withTree: true))
        #expect(record.deleted && record.revID == rev("2-b"))
    }

    @Test func stemmingFollowsRevsLimit() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        try db.setRevsLimit(5)
        let c = try db.defaultCollection()
        var parent: RevID?
        for i in 0..<20 {
            parent = try c.write(RevisionWrite(id: "s", body: obj("{\"i\":\(i)}"), mode: .edit(parent: parent)))
        }
        let record = try #require(try c.record(id: "s", withTree: true))
        #expect(record.tree?.count == 5)
        #expect(record.tree?.history(of: record.revID).count == 5)
    }
}

@Suite struct ChangeFeedTests {
    @Test func feedHasEachDocumentOnceAtItsLatestChange() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        var revs: [String: RevID] = [:]
        for id in ["a", "b", "c"] {
            revs[id] = try c.write(RevisionWrite(id: id, body: [:], mode: .edit(parent: nil)))
        }
        try c.write(RevisionWrite(id: "a", body: obj(#"{"v":2}"#), mode: .edit(parent: revs["a"])))
        try c.write(RevisionWrite(id: "b", body: [:], deleted: true, mode: .edit(parent: revs["b"])))
        try c.putLocal(id: "_local/cp", body: obj(#"{"seq":1}"#), rev: nil)
        let rows = try c.changes(.init())
        #expect(rows.map(\.id) == ["c", "a", "b"])
        #expect(rows.map(\.sequence) == [3, 4, 5])
        #expect(rows.last?.deleted == true)
        let since = try c.changes(.init(since: 4))
        #expect(since.map(\.id) == ["b"])
        var opts = Collection.ChangesOptions()
        opts.descending = true
        opts.limit = 2
        #expect(try c.changes(opts).map(\.id) == ["b", "a"])
        opts = .init()
        opts.documentIDs = ["c", "zz"]
        opts.includeDocs = true
        let filtered = try c.changes(opts)
        #expect(filtered.map(\.id) == ["c"])
        #expect(filtered.first?.body.map { String(decoding: $0, as: UTF8.self) } == "{}")
    }

    @Test func allDocsStyleListsEveryLeaf() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        _ = try c.write([
            RevisionWrite(id: "c", body: [:], mode: .replicated(history: [rev("2-b"), rev("1-a")])),
            RevisionWrite(id: "c", body: [:], mode: .replicated(history: [rev("2-c"), rev("1-a")])),
        ])
        var opts = Collection.ChangesOptions()
        opts.allLeaves = true
        opts.conflicts = true
        let row = try #require(try c.changes(opts).first)
        #expect(row.leaves == [rev("2-c"), rev("2-b")])
        #expect(row.conflicts == [rev("2-b")])
    }

    @Test func commitsAreAnnouncedToAsyncListeners() async throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let stream = db.commits()
        try c.write(RevisionWrite(id: "x", body: [:], mode: .edit(parent: nil)))
        var iterator = stream.makeAsyncIterator()
        let seq = await iterator.next()
        #expect(seq == 1)
    }

    @Test func changeListenersGetTheDocumentIDs() async throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let (stream, cont) = AsyncStream<[String]>.makeStream()
        let token = c.addChangeListener { cont.yield($0.documentIDs) }
        let docToken = c.addDocumentChangeListener(id: "b") { cont.yield(["doc:" + $0.documentID]) }
        _ = try c.write([RevisionWrite(id: "a", body: [:], mode: .edit(parent: nil)),
                         RevisionWrite(id: "b", body: [:], mode: .edit(parent: nil))])
        var got: [[String]] = []
        for await ids in stream {
            got.append(ids)
            if got.count == 2 { break }
        }
        #expect(got.contains(["a", "b"]))
        #expect(got.contains(["doc:b"]))
        token.remove()
        docToken.remove()
    }
}

@Suite struct AllDocsTests {
    @Test func rangesKeysDescendingAndOffset() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        _ = try c.write((0..<10).map { RevisionWrite(id: "k\($0)", body: obj("{\"i\":\($0)}"), mode: .edit(parent: nil)) })
        var o = Collection.AllDocsOptions()
        o.startKey = "k3"
        o.endKey = "k5"
        o.includeDocs = true
        let r = try c.allDocs(o)
        #expect(r.rows.map(\.id) == ["k3", "k4", "k5"])
        #expect(r.totalRows == 10)
        #expect(r.offset == 3)
        o.inclusiveEnd = false
        #expect(try c.allDocs(o).rows.map(\.id) == ["k3", "k4"])
        var d = Collection.AllDocsOptions()
        d.descending = true
        d.startKey = "k5"
        d.limit = 2
        #expect(try c.allDocs(d).rows.map(\.id) == ["k5", "k4"])
        let keyed = try c.allDocs(keys: ["k1", "nope"], includeDocs: false)
        #expect(keyed[0]?.id == "k1")
        #expect(keyed[1] == nil)
    }
}

@Suite struct LocalAndPurgeTests {
    @Test func localDocumentsAreVersionedAndStayOutOfTheFeed() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let r1 = try c.putLocal(id: "_local/cp", body: obj(#"{"seq":5}"#), rev: nil)
        #expect(r1 == "0-1")
        #expect { try c.putLocal(id: "cp", body: [:], rev: nil) } throws: { ($0 as? SetteeError)?.code == .conflict }
        let r2 = try c.putLocal(id: "cp", body: obj(#"{"seq":6}"#), rev: r1)
        #expect(r2 == "0-2")
        #expect(try c.localDocument(id: "_local/cp")?.body["seq"] == 6)
        #expect(try c.changes(.init()).isEmpty)
        try c.deleteLocal(id: "cp", rev: r2)
        #expect(try c.localDocument(id: "cp") == nil)
    }

    @Test func purgeRemovesTheDocumentAndRecordsIt() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try c.write(RevisionWrite(id: "p", body: [:], mode: .edit(parent: nil)))
        try c.purge(id: "p")
        #expect(try c.record(id: "p") == nil)
        #expect(try c.changes(.init()).isEmpty)
        #expect(try c.purges(since: 0).map(\.id) == ["p"])
        #expect { try c.purge(id: "p") } throws: { ($0 as? SetteeError)?.code == .notFound }
        // It can be created again from scratch.
        #expect(try c.write(RevisionWrite(id: "p", body: [:], mode: .edit(parent: nil))).generation == 1)
    }
}

@Suite struct PersistenceTests {
    @Test func documentsSequenceAndUUIDSurviveReopen() throws {
        let dir = TempDir()
        var uuid = ""
        do {
            let db = try dir.open("persist")
            uuid = db.uuid
            let c = try db.defaultCollection()
            _ = try c.write((0..<50).map { RevisionWrite(id: "d\($0)", body: [:], mode: .edit(parent: nil)) })
            try c.purge(id: "d0")
            db.close()
        }
        let db = try dir.open("persist")
        defer { db.close() }
        #expect(db.uuid == uuid)
        #expect(db.lastSequence == 51)
        #expect(try db.defaultCollection().documentCounts().live == 49)
        #expect(Database.names(inDirectory: dir.path) == ["persist"])
    }

    @Test func namedCollectionsAreSeparateKeyspaces() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let users = try db.createCollection(name: "users", scope: "app")
        try users.write(RevisionWrite(id: "u1", body: [:], mode: .edit(parent: nil)))
        #expect(try db.defaultCollection().record(id: "u1") == nil)
        #expect(try db.collection(name: "users", scope: "app")?.record(id: "u1") != nil)
        #expect(try db.collections(scope: "app").map(\.name) == ["users"])
        #expect { try db.createCollection(name: "_bad") } throws: { ($0 as? SetteeError)?.code == .badRequest }
        try db.deleteCollection(name: "users", scope: "app")
        #expect(try db.collection(name: "users", scope: "app") == nil)
    }

    @Test func closedDatabaseThrowsClosed() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        db.close()
        #expect { try c.record(id: "x") } throws: { ($0 as? SetteeError)?.code == .closed }
    }

    @Test func concurrentSingleSavesAreAllCommitted() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        DispatchQueue.concurrentPerform(iterations: 400) { i in
            _ = try? c.write(RevisionWrite(id: "w\(i)", body: obj("{\"i\":\(i)}"), mode: .edit(parent: nil)))
        }
        #expect(try c.documentCounts().live == 400)
        #expect(db.lastSequence == 400)
        #expect(Set(try c.changes(.init()).map(\.sequence)).count == 400)
    }
}

extension Result {
    var error: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
