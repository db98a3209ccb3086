import Foundation
import SetteeCore
import SetteeStore
import Testing

/// `settee dump` → `settee load` through the real binary: every revision tree (conflicts, tombstones, histories),
/// attachments, named collections, `_security` and `revs_limit` come back identical.
@Suite struct DumpLoadTests {
    static func run(_ args: [String], stdout: FileHandle? = nil) throws -> (Int32, String) {
        let p = SpawnedProcess()
        p.executableURL = URL(fileURLWithPath: builtProduct("settee"))
        p.arguments = args
        let err = Pipe()
        p.standardError = err
        if let stdout { p.standardOutput = stdout }
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationStatus, text)
    }

    @Test func dumpThenLoadReproducesEverything() async throws {
        try await offThePool { try Self.roundTrip() }
    }

    static func roundTrip() throws {
        let source = TempDir(), target = TempDir(), files = TempDir()
        do {
            let db = try source.open("shop")
            defer { db.close() }
            let c = try db.defaultCollection()
            for i in 0..<1200 { try c.put("doc-\(i)", #"{"i":\#(i),"name":"item \#(i)"}"#) }
            // A conflict (a second branch arriving by replication), a tombstone, a deep history.
            let base = try #require(try c.winner("doc-1"))
            try c.put("doc-1", #"{"branch":"a"}"#, parent: base)
            try c.write(RevisionWrite(id: "doc-1", body: obj(#"{"branch":"b"}"#),
                                      mode: .replicated(history: [RevID("2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")!, base])))
            try c.remove("doc-2", parent: try #require(try c.winner("doc-2")))
            var rev = try #require(try c.winner("doc-3"))
            for n in 0..<5 { rev = try c.put("doc-3", #"{"edit":\#(n)}"#, parent: rev) }
            // An attachment.
            let data = Array("attachment bytes \u{1F600}".utf8)
            let digest = Database.attachmentDigest(data)
            try c.write(RevisionWrite(id: "with-att", body: ["_attachments": ["a.txt": [
                "content_type": "text/plain", "revpos": 1, "digest": .string(digest), "length": .int(Int64(data.count)), "stub": true]]],
                                      mode: .edit(parent: nil), blobs: [(digest, data)]))
            // A named collection, _security, revs_limit.
            let named = try db.createCollection(name: "items", scope: "store")
            try named.put("n1", #"{"x":1}"#)
            try db.setMetadata("security", ["members": ["names": ["bob"]]])
            try db.setRevsLimit(77)
            let other = try source.open("other")
            try other.defaultCollection().put("o", "{}")
            other.close()
        }
        let dumpPath = files.path + "/backup.jsonl"
        let (dumpStatus, dumpLog) = try Self.run(["dump", "--data", source.path, "--output", dumpPath])
        #expect(dumpStatus == 0, "\(dumpLog)")
        #expect(dumpLog.contains("dumped"))
        let (loadStatus, loadLog) = try Self.run(["load", "--data", target.path, dumpPath])
        #expect(loadStatus == 0, "\(loadLog)")

        let a = try source.open("shop"), b = try target.open("shop")
        defer { a.close(); b.close() }
        try expectSameTrees(try a.defaultCollection(), try b.defaultCollection())
        let bNamed = try #require(try b.collection(name: "items", scope: "store"))
        try expectSameTrees(try #require(try a.collection(name: "items", scope: "store")), bNamed)
        #expect(try b.defaultCollection().record(id: "doc-1", withTree: true)?.tree?.conflicts.count == 1)
        #expect(try b.defaultCollection().record(id: "doc-2")?.deleted == true)
        #expect(try b.metadata("security") == ["members": ["names": ["bob"]]])
        #expect(b.revsLimit == 77)
        #expect(try b.blob(digest: Database.attachmentDigest(Array("attachment bytes \u{1F600}".utf8))) != nil)
        let other = try target.open("other")
        #expect(try other.defaultCollection().record(id: "o") != nil)
        other.close()

        // Loading again changes nothing; a damaged dump is refused with the line number.
        let (again, _) = try Self.run(["load", "--quiet", "--data", target.path, dumpPath])
        #expect(again == 0)
        try expectSameTrees(try a.defaultCollection(), try b.defaultCollection())
        let bad = files.path + "/bad.jsonl"
        try Data("{\"settee_dump\":1}\n{\"db\":\"shop\",\"id\":\"x\"}\n".utf8).write(to: URL(fileURLWithPath: bad))
        let (badStatus, badLog) = try Self.run(["load", "--data", target.path, bad])
        #expect(badStatus != 0)
        #expect(badLog.contains("line 2"))
    }
}
