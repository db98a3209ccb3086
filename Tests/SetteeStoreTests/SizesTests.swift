import Foundation
import Testing
import SetteeCore
@testable import SetteeStore

/// `sizes.file` and `sizes.active` as CouchDB means them: the file, and the live data in it.
@Suite struct SizesTests {
    @Test func activeIsTheLiveDataBelowTheFileAndCompactionFreesTheRest() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let empty = try db.sizes()
        #expect(empty.active > 0 && empty.active < empty.file)
        let pad = String(repeating: "x", count: 500)
        let writes = (0..<500).map { RevisionWrite(id: "d\($0)", body: obj(#"{"pad":"\#(pad)"}"#), mode: .edit(parent: nil)) }
        let revs = try c.write(writes).map { try $0.get() }
        let full = try db.sizes()
        #expect(full.active > empty.active + 500 * 500, "the documents' bytes are live data")
        #expect(full.active < full.file)
        // Deleting leaves tombstones; compaction drops the free pages, and the count is taken again after it.
        _ = try c.write(zip(writes, revs).map { RevisionWrite(id: $0.id, body: [:], deleted: true, mode: .edit(parent: $1)) })
        try db.compact()
        let compacted = try db.sizes()
        #expect(compacted.file < full.file)
        #expect(compacted.active < compacted.file)
        #expect(compacted.active < full.active)
    }

    @Test func liveBytesOfSomeTables() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        _ = try c.write((0..<100).map { RevisionWrite(id: "d\($0)", body: obj(#"{"n":\#($0)}"#), mode: .edit(parent: nil)) })
        let (docs, all, none) = try db.read { conn in
            (try Database.liveBytes(conn, tables: ["docs_1"]), try Database.liveBytes(conn, tables: nil),
             try Database.liveBytes(conn, tables: []))
        }
        #expect(docs.active > 100 * 10 && docs.active < docs.file)
        #expect(all.file > docs.file && all.active > docs.active)
        #expect(none.file == 0 && none.active == 0)
    }
}
