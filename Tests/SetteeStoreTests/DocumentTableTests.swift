import CSQLite
import Testing
import SetteeCore
@testable import SetteeStore

/// The document table's flags, as written by the store and read through ``DocumentTable``'s conditions.
@Suite struct DocumentTableTests {
    @Test func flagsAreComputedFromTheWinnerAndItsLeaves() {
        #expect(DocFlags(deleted: false, hasAttachments: false) == [])
        #expect(DocFlags(deleted: true, hasAttachments: false) == .deleted)
        #expect(DocFlags(deleted: false, liveLeaves: 2, hasAttachments: true) == [.conflicted, .hasAttachments])
        #expect(DocFlags(deleted: true, liveLeaves: 3, hasAttachments: true).rawValue == 7)
    }

    @Test func conditionsSelectTheRowsTheStoreFlagged() throws {
        let dir = TempDir()
        let db = try dir.open()
        let c = try db.defaultCollection()
        _ = try c.write(RevisionWrite(id: "live", body: ["a": 1], mode: .edit(parent: nil)))
        let gone = try c.write(RevisionWrite(id: "gone", body: ["a": 2], mode: .edit(parent: nil)))
        _ = try c.write(RevisionWrite(id: "gone", body: [:], deleted: true, mode: .edit(parent: gone)))
        // Two live leaves: a conflict.
        _ = try c.write(RevisionWrite(id: "split", body: ["b": 1], mode: .replicated(history: [rev("1-aaaa")])))
        _ = try c.write(RevisionWrite(id: "split", body: ["b": 2], mode: .replicated(history: [rev("1-bbbb")])))
        _ = try c.write(RevisionWrite(id: "files", body: ["_attachments": ["f.txt": ["stub": true, "digest": "md5-x", "length": 1]]],
                                      mode: .replicated(history: [rev("1-cccc")])))

        func ids(_ condition: String) throws -> [String] {
            try db.read { conn in
                try conn.withStatement("SELECT d.id FROM \(c.docsTable) AS d WHERE \(condition) ORDER BY d.id") { stmt in
                    var out: [String] = []
                    while try stmt.step() { out.append(stmt.string(0) ?? "") }
                    return out
                }
            }
        }
        #expect(try ids(DocumentTable.live("d")) == ["files", "live", "split"])
        #expect(try ids(DocumentTable.has(.deleted, "d")) == ["gone"])
        #expect(try ids(DocumentTable.has(.conflicted, "d")) == ["split"])
        #expect(try ids(DocumentTable.has(.hasAttachments, "d")) == ["files"])
        // The tombstone count names the partial index, whose condition must be the same text.
        #expect(try c.documentCounts().deleted == 1)
    }
}
