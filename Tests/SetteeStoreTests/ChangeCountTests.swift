import Foundation
import Testing
import SetteeCore
@testable import SetteeStore

/// The feed's `pending`: exact up to `exactChangeCount`, an upper bound (sequence numbers left) past it, never
/// below the documents actually left.
@Suite struct ChangeCountTests {
    @Test func exactWhenFewAnUpperBoundWhenMany() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let total = Collection.exactChangeCount + 2_000
        let revs = try c.write((0..<total).map { RevisionWrite(id: String(format: "d%06d", $0), body: obj(#"{"n":\#($0)}"#),
                                                               mode: .edit(parent: nil)) }).map { try $0.get() }
        // Each document written once: one sequence per document, so the bound is exact too.
        #expect(try c.changeCount(since: 0) == total)
        #expect(try c.changeCount(since: UInt64(total - 10)) == 10)
        // 500 documents changed again: they move to the end of the feed, leaving gaps in the sequences before.
        _ = try c.write((0..<500).map { RevisionWrite(id: String(format: "d%06d", $0), body: obj(#"{"n":-1}"#),
                                                      mode: .edit(parent: revs[$0])) })
        let top = UInt64(total + 500)
        #expect(try c.changeCount(since: top - 300) == 300)
        let counted = try c.changeCount(since: 0)
        #expect(counted >= total && counted <= total + 500)
        #expect(try c.changeCount(since: top) == 0)
    }
}
