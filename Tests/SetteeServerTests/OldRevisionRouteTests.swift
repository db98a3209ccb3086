import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

/// A replaced revision's body (and its attachments) stays readable until `POST /{db}/_compact`, as in CouchDB.
@Suite("Old revisions")
struct OldRevisionRouteTests {
    /// Compacts `db` and waits until the compaction task is over (`_compact` answers 202 and works on).
    private func compact(_ c: Couch, _ db: String) async throws {
        let r = try await c.request(.post, "/\(db)/_compact", body: [], headers: [.contentType: "application/json"])
        #expect(r.status == .accepted)
        for _ in 0..<500 {
            if try await c.get("/\(db)")["compact_running"] == false { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("compaction of \(db) did not finish")
    }

    @Test func oldRevisionIsReadableUntilCompaction() async throws {
        try await withServer(mode: .live) { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            let rev2 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev1)","v":2}"#)
            let rev3 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev2)","v":3}"#)

            let old = try await c.get("/db/doc?rev=\(rev1)")
            #expect(old.status == .ok)
            #expect(old.json == ["_id": "doc", "_rev": .string(rev1), "v": 1])
            #expect(old.header(.eTag) == "\"\(rev1)\"")
            #expect(try await c.get("/db/doc?rev=\(rev2)&revs=true")["_revisions"]?["start"] == 2)
            let info = try await c.get("/db/doc?revs_info=true")["_revs_info"]
            #expect(info == [["rev": .string(rev3), "status": "available"], ["rev": .string(rev2), "status": "available"],
                             ["rev": .string(rev1), "status": "available"]])
            let openRevs = try await c.get("/db/doc?open_revs=" + q(#"["\#(rev2)"]"#), headers: [.accept: "application/json"])
            #expect(openRevs.json == [["ok": ["_id": "doc", "_rev": .string(rev2), "v": 2]]])
            let bulk = try await c.post("/db/_bulk_get", #"{"docs":[{"id":"doc","rev":"\#(rev1)"}]}"#)
            #expect(bulk["results"]?[0]?["docs"]?[0]?["ok"]?["v"] == 1)

            try await compact(c, "db")
            expectError(try await c.get("/db/doc?rev=\(rev1)"), .notFound, "not_found", reason: "missing")
            expectError(try await c.get("/db/doc?rev=\(rev2)"), .notFound, "not_found", reason: "missing")
            #expect(try await c.get("/db/doc?rev=\(rev3)")["v"] == 3)
            let infoAfter = try await c.get("/db/doc?revs_info=true")["_revs_info"]
            #expect(infoAfter == [["rev": .string(rev3), "status": "available"], ["rev": .string(rev2), "status": "missing"],
                                  ["rev": .string(rev1), "status": "missing"]])
            let openAfter = try await c.get("/db/doc?open_revs=" + q(#"["\#(rev2)"]"#), headers: [.accept: "application/json"])
            #expect(openAfter.json == [["missing": .string(rev2)]])
        }
    }

    /// CouchDB's attachments_test.exs "saves binary": an attachment of a replaced revision, even after the
    /// attachment was deleted from the document, is readable with `?rev=` until compaction.
    @Test func oldRevisionsAttachmentIsReadableUntilCompaction() async throws {
        try await withServer(mode: .live) { c in
            try await c.createDB("db")
            let first = Array("first version".utf8), second = Array("second version".utf8)
            let type: HTTPFields = [.contentType: "text/plain;charset=utf-8"]
            let put1 = try await c.request(.put, "/db/bin/attachment.txt", body: first, headers: type)
            #expect(put1.status == .created)
            let rev1 = try #require(put1["rev"]?.stringValue)
            let put2 = try await c.request(.put, "/db/bin/attachment.txt?rev=\(rev1)", body: second, headers: type)
            #expect(put2.status == .created)
            let rev2 = try #require(put2["rev"]?.stringValue)
            let deleted = try await c.delete("/db/bin/attachment.txt?rev=\(rev2)")
            #expect(deleted.status == .ok)

            expectError(try await c.get("/db/bin/attachment.txt"), .notFound, "not_found")
            let old1 = try await c.get("/db/bin/attachment.txt?rev=\(rev1)")
            #expect(old1.status == .ok)
            #expect(old1.bytes == first)
            #expect(old1.header(.contentType)?.lowercased() == "text/plain;charset=utf-8")
            #expect(try await c.get("/db/bin/attachment.txt?rev=\(rev2)").bytes == second)
            // The old revision's document with its attachment inline.
            let doc = try await c.get("/db/bin?rev=\(rev1)&attachments=true", headers: [.accept: "application/json"])
            #expect(doc["_attachments"]?["attachment.txt"]?["data"] == .string(Base64.encode(first)))

            try await compact(c, "db")
            expectError(try await c.get("/db/bin/attachment.txt?rev=\(rev1)"), .notFound, "not_found")
            expectError(try await c.get("/db/bin?rev=\(rev2)"), .notFound, "not_found", reason: "missing")
        }
    }
}
