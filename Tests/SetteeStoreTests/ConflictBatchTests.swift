import Foundation
import Testing
import SetteeCore
@testable import SetteeStore

/// A batch that gives one document many revisions at once (replicated conflicting leaves, as `_bulk_docs` with
/// `new_edits: false` or a replicator delivers them) is merged in memory and stored once: it must leave exactly
/// what writing the same revisions one by one leaves.
@Suite struct ConflictBatchTests {
    /// Random replicated revisions of a few documents: new branches off the base, extensions of earlier branches,
    /// tombstones, repeats; with local edits of the winner and other documents' writes between them.
    static func writes(seed: UInt64, count: Int) -> [RevisionWrite] {
        var rng = SeededGenerator(seed: seed)
        var out: [RevisionWrite] = []
        var branches: [String: [[RevID]]] = [:]
        for id in ["a", "b", "c"] {
            let base = RevID("1-" + String(repeating: "0", count: 31) + id.unicodeScalars.first!.value.description.suffix(1))!
            out.append(RevisionWrite(id: id, body: ["n": 0], mode: .replicated(history: [base])))
            branches[id] = [[base]]
        }
        for i in 0..<count {
            let id = ["a", "a", "a", "b", "c"][Int.random(in: 0..<5, using: &rng)]
            switch Int.random(in: 0..<10, using: &rng) {
            case 0:
                // A local edit of the winner: stores the tree held in memory first.
                out.append(RevisionWrite(id: id, body: ["edit": .int(Int64(i))], mode: .overwrite))
            case 1 where !out.isEmpty:
                out.append(out[Int.random(in: 0..<out.count, using: &rng)])  // a revision again: idempotent
            case 2:
                // A new document and, in the same run of writes, a child of its first revision: the first
                // revision's body goes to the archive of a row the batch has just made.
                let id = "new\(i)"
                let base = RevID(generation: 1, digest: String(format: "%032x", i))
                let child = RevID(generation: 2, digest: String(format: "%032x", i + 1_000_000))
                out.append(RevisionWrite(id: id, body: ["first": .int(Int64(i))], mode: .replicated(history: [base])))
                out.append(RevisionWrite(id: id, body: ["second": .int(Int64(i))], mode: .replicated(history: [child, base])))
            default:
                let parent = branches[id]!.randomElement(using: &rng)!
                let digest = String(format: "%032x", UInt64.random(in: 0...UInt64.max, using: &rng))
                let history = [RevID(generation: parent[0].generation + 1, digest: digest)] + parent
                let deleted = Int.random(in: 0..<6, using: &rng) == 0
                out.append(RevisionWrite(id: id, body: ["i": .int(Int64(i))], deleted: deleted, mode: .replicated(history: history)))
                branches[id]!.append(history)
            }
        }
        return out
    }

    /// What a reader sees of a document: its winner, body, flags, tree (with the leaves' bodies) and every
    /// archived body.
    static func state(_ c: SetteeStore.Collection, _ id: String) throws -> String {
        guard let r = try c.record(id: id, withTree: true, archived: .all) else { return "missing" }
        let archived = r.archived.map { "\($0.key)=\(String(decoding: $0.value, as: UTF8.self))" }.sorted()
        return "\(r.revID) \(r.deleted) \(r.conflicted) \(String(decoding: r.body, as: UTF8.self)) "
            + "\(r.tree.map { "\($0)" } ?? "-") \(archived)"
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func aBatchLeavesWhatOneByOneLeaves(seed: UInt64) throws {
        let dir = TempDir()
        let batched = try dir.open("batched"), single = try dir.open("single")
        defer { batched.close(); single.close() }
        let writes = Self.writes(seed: seed, count: 400)
        let cb = try batched.defaultCollection(), cs = try single.defaultCollection()
        // In batches of varying size (so trees held in memory meet batch ends), and one write at a time.
        var results: [String] = []
        var start = 0, size = 37
        while start < writes.count {
            let end = min(writes.count, start + size)
            results += try cb.write(Array(writes[start..<end])).map { "\($0)" }
            start = end
            size = size == 37 ? 250 : 37
        }
        let oneByOne = try writes.map { "\(try cs.write([$0])[0])" }
        #expect(results == oneByOne)
        let ids = Set(writes.map(\.id)).sorted()
        for id in ids {
            #expect(try Self.state(cb, id) == Self.state(cs, id))
        }
        #expect(try cb.documentCounts().live == cs.documentCounts().live)
        // Every replaced revision's body is kept in the archive until compaction (the row's archive chain).
        var written: [String: [RevID: [UInt8]]] = [:]
        for w in writes {
            guard case .replicated(let history) = w.mode, !w.deleted else { continue }
            if written[w.id]?[history[0]] == nil { written[w.id, default: [:]][history[0]] = JSON.object(w.body).serializedBytes }
        }
        for id in ids {
            let record = try #require(try cb.record(id: id, withTree: true, archived: .all))
            let tree = try #require(record.tree)
            let leaves = Set(tree.leafIndices.map { tree.nodes[$0].rev })
            for (rev, body) in written[id] ?? [:] where !leaves.contains(rev) && tree.index(of: rev) != nil {
                #expect(record.archived[rev] == body, "\(id) \(rev) is not in the archive")
            }
        }
        // The winners' bodies hold what they should after compaction too.
        try batched.compact()
        try single.compact()
        for id in ids {
            #expect(try Self.state(cb, id) == Self.state(cs, id))
        }
    }

    /// A thousand conflicting leaves of one document in one batch: all stored, one winner, one change.
    @Test func aThousandConflictingLeavesInOneBatch() throws {
        let dir = TempDir()
        let db = try dir.open()
        defer { db.close() }
        let c = try db.defaultCollection()
        let base = RevID("1-" + String(repeating: "a", count: 32))!
        _ = try c.write([RevisionWrite(id: "doc", body: ["base": true], mode: .replicated(history: [base]))])
        let before = try c.changes(Collection.ChangesOptions(since: 0)).last?.sequence ?? 0
        let leaves = (0..<1000).map { i in
            RevisionWrite(id: "doc", body: ["leaf": .int(Int64(i))],
                          mode: .replicated(history: [RevID(generation: 2, digest: String(format: "%032x", i + 1)), base]))
        }
        let results = try c.write(leaves)
        #expect(results.allSatisfy { if case .success = $0 { true } else { false } })
        let record = try #require(try c.record(id: "doc", withTree: true))
        #expect(record.conflicted)
        #expect(record.tree?.leafIndices.count == 1000)
        #expect(record.revID == RevID(generation: 2, digest: String(format: "%032x", 1000)))
        let changes = try c.changes(Collection.ChangesOptions(since: before))
        #expect(changes.count == 1)
    }
}
