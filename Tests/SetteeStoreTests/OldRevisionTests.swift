import Foundation
import Testing
import SetteeCore
@testable import SetteeStore

/// Replaced revisions keep their bodies (in `revs_<cid>`, a chain per document from `docs_<cid>.arch`) until
/// compaction, as CouchDB keeps them.
@Suite struct OldRevisionTests {
    private func text(_ record: DocumentRecord?, _ rev: RevID) -> String? {
        record?.revision(rev).map { String(decoding: $0.body, as: UTF8.self) }
    }

    private func archivedCount(_ db: Database, collection: SetteeStore.Collection) throws -> Int {
        try db.read { conn in
            let stmt = try conn.prepare("SELECT count(*) FROM \(collection.archiveTable)")
            defer { stmt.reset() }
            return try stmt.step() ? stmt.int(0) : -1
        }
    }

    @Test func replacedBodyIsReadableAfterAnUpdateUntilCompaction() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let r1 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":1}"#), mode: .edit(parent: nil)))
        let r2 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":2}"#), mode: .edit(parent: r1)))
        let r3 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":3}"#), mode: .edit(parent: r2)))

        // A read that doesn't ask for archived bodies sees only the leaf's.
        #expect(text(try c.record(id: "a", withTree: true), r1) == nil)
        let one = try c.record(id: "a", archived: .revisions([r1]))
        #expect(one?.tree != nil)
        #expect(text(one, r1) == #"{"x":1}"#)
        #expect(one?.archived.keys.sorted() == [r1])
        #expect(text(one, r3) == #"{"x":3}"#)
        let all = try c.record(id: "a", withTree: true, archived: .all)
        #expect(text(all, r1) == #"{"x":1}"#)
        #expect(text(all, r2) == #"{"x":2}"#)
        #expect(all?.openRevisions([r1, r2, r3], latest: false).map(\.found) == [true, true, true])

        try db.compact()
        let after = try c.record(id: "a", withTree: true, archived: .all)
        #expect(text(after, r1) == nil)
        #expect(text(after, r2) == nil)
        #expect(text(after, r3) == #"{"x":3}"#)
        #expect(after?.openRevisions([r1, r3], latest: false).map(\.found) == [false, true])
        #expect(try archivedCount(db, collection: c) == 0)
        // Editing goes on as before; the new parent is archived again.
        try c.write(RevisionWrite(id: "a", body: obj(#"{"x":4}"#), mode: .edit(parent: r3)))
        #expect(text(try c.record(id: "a", archived: .revisions([r3])), r3) == #"{"x":3}"#)
    }

    @Test func revsInfoSaysAvailableUntilCompactionThenMissing() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let r1 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":1}"#), mode: .edit(parent: nil)))
        let r2 = try c.write(RevisionWrite(id: "a", body: obj(#"{"x":2}"#), mode: .edit(parent: r1)))
        func statuses() throws -> [RevTree.RevStatus] {
            let record = try #require(try c.record(id: "a", archived: .all))
            return try #require(record.tree).revsInfo(of: r2) { record.revision($0.rev) != nil }.map(\.status)
        }
        #expect(try statuses() == [.available, .available])
        try db.compact()
        #expect(try statuses() == [.available, .missing])
    }

    /// A losing leaf keeps its body in the tree; when it gets a child, the body moves to the archive. The
    /// winner of a conflicted document (general write path, not the single-chain shortcut) is archived too.
    @Test func editedConflictBranchesKeepTheirBodies() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        for result in try c.write([
            RevisionWrite(id: "c", body: obj(#"{"v":"a"}"#), mode: .replicated(history: [rev("1-aaa")])),
            RevisionWrite(id: "c", body: obj(#"{"v":"b"}"#), mode: .replicated(history: [rev("2-bbb"), rev("1-aaa")])),
            RevisionWrite(id: "c", body: obj(#"{"v":"c"}"#), mode: .replicated(history: [rev("2-ccc"), rev("1-aaa")])),
        ]) { _ = try result.get() }
        #expect(try c.record(id: "c")?.revID == rev("2-ccc"))

        let b3 = try c.write(RevisionWrite(id: "c", body: obj(#"{"v":"b3"}"#), mode: .edit(parent: rev("2-bbb"))))
        var record = try c.record(id: "c", archived: .revisions([rev("1-aaa"), rev("2-bbb"), rev("2-ccc")]))
        #expect(record?.revID == b3)  // the edited branch is now the longer one
        #expect(text(record, rev("1-aaa")) == #"{"v":"a"}"#)
        #expect(text(record, rev("2-bbb")) == #"{"v":"b"}"#)
        #expect(text(record, rev("2-ccc")) == #"{"v":"c"}"#)  // a losing leaf now, its body moved into the tree

        // A replicated child of the winner of a conflicted document.
        try c.write(RevisionWrite(id: "c", body: obj(#"{"v":"b4"}"#),
                                  mode: .replicated(history: [rev("4-ddd"), b3, rev("2-bbb"), rev("1-aaa")])))
        record = try c.record(id: "c", archived: .all)
        #expect(record?.revID == rev("4-ddd"))
        #expect(text(record, b3) == #"{"v":"b3"}"#)
        #expect(record?.archived.count == 3)

        try db.compact()
        record = try c.record(id: "c", archived: .all)
        #expect(record?.archived.isEmpty == true)
        #expect(text(record, rev("2-ccc")) == #"{"v":"c"}"#)  // leaves keep theirs
        #expect(text(record, rev("4-ddd")) == #"{"v":"b4"}"#)
    }

    @Test func replicatedChildOfTheLeafArchivesIt() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        try c.write(RevisionWrite(id: "r", body: obj(#"{"v":1}"#), mode: .replicated(history: [rev("1-aaa")])))
        try c.write(RevisionWrite(id: "r", body: obj(#"{"v":2}"#), mode: .replicated(history: [rev("2-bbb"), rev("1-aaa")])))
        #expect(text(try c.record(id: "r", archived: .revisions([rev("1-aaa")])), rev("1-aaa")) == #"{"v":1}"#)
        // Tombstones are archived like any revision when they get a child (a re-created document).
        let t = try c.write(RevisionWrite(id: "r", body: [:], deleted: true, mode: .edit(parent: rev("2-bbb"))))
        let r4 = try c.write(RevisionWrite(id: "r", body: obj(#"{"v":4}"#), mode: .edit(parent: nil)))
        let record = try c.record(id: "r", archived: .all)
        #expect(record?.revID == r4)
        #expect(record?.revision(t)?.deleted == true)
        #expect(text(record, rev("2-bbb")) == #"{"v":2}"#)
    }

    /// An attachment only an old revision refers to stays readable until compaction frees it.
    @Test func compactionFreesAttachmentsOnlyOldRevisionsReferTo() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let data = Array("old attachment".utf8)
        let digest = Database.attachmentDigest(data)
        let stub = obj(#"{"_attachments":{"a.txt":{"content_type":"text/plain","digest":"\#(digest)","length":\#(data.count),"revpos":1,"stub":true}}}"#)
        let r1 = try c.write(RevisionWrite(id: "d", body: stub, mode: .edit(parent: nil), blobs: [(digest, data)]))
        try c.write(RevisionWrite(id: "d", body: obj(#"{"plain":true}"#), mode: .edit(parent: r1)))
        let old = try #require(try c.record(id: "d", archived: .revisions([r1]))?.revision(r1))
        #expect(String(decoding: old.body, as: UTF8.self).contains(digest))
        #expect(try db.blob(digest: digest) == data)
        try db.compact()
        #expect(try db.blob(digest: digest) == nil)
        #expect(try c.record(id: "d", archived: .revisions([r1]))?.revision(r1) == nil)
    }

    @Test func purgeDropsArchivedRevisions() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        var parent = try c.write(RevisionWrite(id: "p", body: obj(#"{"i":0}"#), mode: .edit(parent: nil)))
        for i in 1...3 { parent = try c.write(RevisionWrite(id: "p", body: obj("{\"i\":\(i)}"), mode: .edit(parent: parent))) }
        #expect(try archivedCount(db, collection: c) == 3)
        try c.purge(id: "p")
        #expect(try archivedCount(db, collection: c) == 0)
        // The same id (and rowid) again starts with an empty archive.
        let r1 = try c.write(RevisionWrite(id: "p", body: obj(#"{"new":1}"#), mode: .edit(parent: nil)))
        #expect(try c.record(id: "p", archived: .all)?.archived.isEmpty == true)

        // Purging one branch drops the archived revisions only it had.
        try c.write(RevisionWrite(id: "p", body: obj(#"{"new":2}"#), mode: .edit(parent: r1)))
        try c.write(RevisionWrite(id: "p", body: obj(#"{"x":2}"#), mode: .replicated(history: [rev("2-xxx"), rev("1-xxx")])))
        try c.write(RevisionWrite(id: "p", body: obj(#"{"x":3}"#), mode: .replicated(history: [rev("3-xxx"), rev("2-xxx")])))
        #expect(try c.record(id: "p", archived: .all)?.archived.count == 2)
        #expect(try c.purge(id: "p", revisions: [rev("3-xxx")]) == [rev("3-xxx")])
        #expect(try c.record(id: "p", archived: .all)?.archived.keys.sorted() == [r1])
        #expect(try archivedCount(db, collection: c) == 1)
    }

    /// Stemming leaves the archived bodies of revisions it removed unreachable; compaction drops them.
    @Test func stemmedRevisionsAreUnreachableAndCompactionDropsThem() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        try db.setRevsLimit(3)
        let c = try db.defaultCollection()
        var revs: [RevID] = []
        for i in 0..<6 {
            revs.append(try c.write(RevisionWrite(id: "s", body: obj("{\"i\":\(i)}"), mode: .edit(parent: revs.last))))
        }
        let record = try c.record(id: "s", archived: .revisions(revs))
        #expect(record?.tree?.count == 3)
        #expect(revs.map { record?.revision($0) != nil } == [false, false, false, true, true, true])
        #expect(try c.record(id: "s", archived: .all)?.archived.count == 2)
        try db.compact()
        #expect(try archivedCount(db, collection: c) == 0)
    }

    @Test func namedCollectionsHaveTheirOwnArchiveDroppedWithThem() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.createCollection(name: "things", scope: "app")
        let r1 = try c.write(RevisionWrite(id: "t", body: obj(#"{"v":1}"#), mode: .edit(parent: nil)))
        try c.write(RevisionWrite(id: "t", body: obj(#"{"v":2}"#), mode: .edit(parent: r1)))
        #expect(text(try c.record(id: "t", archived: .revisions([r1])), r1) == #"{"v":1}"#)
        let table = c.archiveTable
        try db.deleteCollection(name: "things", scope: "app")
        let left: Int = try db.read { conn in
            let stmt = try conn.prepare("SELECT count(*) FROM sqlite_master WHERE name = ?")
            defer { stmt.reset() }
            stmt.bind(table, at: 1)
            return try stmt.step() ? stmt.int(0) : -1
        }
        #expect(left == 0)
    }

    /// A database made before the archive existed (schema version 2) gets it when opened.
    @Test func existingDatabasesMigrate() throws {
        let dir = TempDir()
        var db = try dir.open()
        let c = try db.defaultCollection()
        let r1 = try c.write(RevisionWrite(id: "m", body: obj(#"{"v":1}"#), mode: .edit(parent: nil)))
        let path = db.filePath
        db.close()
        do {
            let conn = try Connection(path: path)
            try conn.execute("DROP TABLE revs_1; ALTER TABLE docs_1 DROP COLUMN arch; PRAGMA user_version = 2;")
        }
        db = try dir.open()
        defer { db.close() }
        let reopened = try db.defaultCollection()
        try reopened.write(RevisionWrite(id: "m", body: obj(#"{"v":2}"#), mode: .edit(parent: r1)))
        #expect(text(try reopened.record(id: "m", archived: .revisions([r1])), r1) == #"{"v":1}"#)
    }

    /// Each document's archived revisions are a chain of its own: many documents edited in turn interleave their
    /// rows, a purge in the middle of a chain relinks the rest, and archive rows reused after compaction never
    /// reach a document that had archived revisions before it.
    @Test func chainsStayPerDocumentThroughPurgeAndCompaction() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        var revs: [String: [RevID]] = [:]
        for id in ["a", "b", "c"] {
            revs[id] = [try c.write(RevisionWrite(id: id, body: obj(#"{"\#(id)":0}"#), mode: .edit(parent: nil)))]
        }
        for round in 1...5 {
            for id in ["a", "b", "c"] {
                let parent = revs[id]!.last!
                revs[id]!.append(try c.write(RevisionWrite(id: id, body: obj(#"{"\#(id)":\#(round)}"#), mode: .edit(parent: parent))))
            }
        }
        for id in ["a", "b", "c"] {
            let record = try c.record(id: id, archived: .all)
            #expect(record?.archived.count == 5)
            for (round, rev) in revs[id]!.enumerated() {
                #expect(text(record, rev) == #"{"\#(id)":\#(round)}"#)
            }
            // Asking for one walks only as far as it must, and finds it.
            #expect(text(try c.record(id: id, archived: .revisions([revs[id]![0]])), revs[id]![0]) == #"{"\#(id)":0}"#)
        }
        // A conflicting branch on b, edited (its first revision archived at the head of b's chain), then purged:
        // that archived body goes, the rest of the chain is linked again.
        let side = try c.write(RevisionWrite(id: "b", body: obj(#"{"b":"side"}"#),
                                             mode: .replicated(history: [RevID("5-ffffffffffffffffffffffffffffffff")!, revs["b"]![3]])))
        let sideChild = try c.write(RevisionWrite(id: "b", body: obj(#"{"b":"side2"}"#), mode: .edit(parent: side)))
        #expect(text(try c.record(id: "b", archived: .revisions([side])), side) == #"{"b":"side"}"#)
        #expect(try archivedCount(db, collection: c) == 16)
        #expect(try c.purge(id: "b", revisions: [sideChild]).contains(sideChild))
        #expect(try archivedCount(db, collection: c) == 15)
        let b = try c.record(id: "b", archived: .all)
        #expect(b?.revID == revs["b"]!.last!)
        for (round, rev) in revs["b"]!.enumerated() {
            #expect(text(b, rev) == #"{"b":\#(round)}"#)
        }
        try db.compact()
        #expect(try archivedCount(db, collection: c) == 0)
        // New archive rows may take the ids compaction freed: only the document that wrote them reads them.
        let a6 = try c.write(RevisionWrite(id: "a", body: obj(#"{"a":6}"#), mode: .edit(parent: revs["a"]!.last!)))
        let a = try c.record(id: "a", archived: .all)
        #expect(a?.archived.keys.sorted() == [revs["a"]!.last!])
        #expect(text(a, a6) == #"{"a":6}"#)
        let cRecord = try c.record(id: "c", archived: .all)
        #expect(cRecord?.archived.isEmpty == true)
        #expect(text(cRecord, revs["c"]![0]) == nil)
    }
}
