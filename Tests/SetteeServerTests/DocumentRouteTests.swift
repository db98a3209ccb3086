import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

/// Builds `doc` with three leaves by replication: `1-aaa…`, `1-bbb…` and `1-ccc…` (the winner), then deletes
/// `1-aaa…`, leaving a deleted conflict. Returns the tombstone's revision.
private func makeConflictedDoc(_ c: Couch, _ path: String = "/db/doc") async throws -> String {
    for (ch, v) in [("a", 1), ("b", 2), ("c", 3)] {
        let r = try await c.put("\(path)?new_edits=false", #"{"_rev":"1-\#(digest(Character(ch)))","v":\#(v)}"#)
        #expect(r.status == .created, "\(r.text)")
    }
    let del = try await c.delete("\(path)?rev=1-\(digest("a"))")
    #expect(del.status == .ok, "\(del.text)")
    return del["rev"]?.stringValue ?? ""
}

@Suite("Document routes")
struct DocumentRouteTests {
    @Test func putCreatesDocumentAndGetReturnsIt() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let r = try await c.put("/db/doc", #"{"name":"sofa","legs":4,"tags":["a","b"],"n":null}"#)
            #expect(r.status == .created)
            #expect(r["ok"] == true)
            #expect(r["id"] == "doc")
            let rev = try #require(r["rev"]?.stringValue)
            #expect(rev.hasPrefix("1-"))
            #expect(rev.count == 34)
            #expect(r.header(.eTag) == "\"\(rev)\"")

            let doc = try await c.get("/db/doc")
            #expect(doc.status == .ok)
            #expect(doc.json == ["_id": "doc", "_rev": .string(rev), "name": "sofa", "legs": 4, "tags": ["a", "b"], "n": nil])
        }
    }

    @Test func updateWithCurrentRevMakesNextGeneration() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            let rev2 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev1)","v":2}"#)
            #expect(rev2.hasPrefix("2-"))
            // The rev can also come from the query string or If-Match.
            let rev3 = try await c.putDoc("/db/doc?rev=\(rev2)", #"{"v":3}"#)
            #expect(rev3.hasPrefix("3-"))
            let r4 = try await c.put("/db/doc", #"{"v":4}"#, headers: [.ifMatch: "\"\(rev3)\""])
            #expect(r4.status == .created)
            let doc = try await c.get("/db/doc")
            #expect(doc["v"] == 4)
            #expect(doc["_rev"] == r4["rev"])
        }
    }

    @Test func staleRevIsConflict() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            try await c.putDoc("/db/doc", #"{"_rev":"\#(rev1)","v":2}"#)
            let stale = try await c.put("/db/doc", #"{"_rev":"\#(rev1)","v":3}"#)
            expectError(stale, .conflict, "conflict", reason: "Document update conflict.")
            let noRev = try await c.put("/db/doc", #"{"v":3}"#)
            expectError(noRev, .conflict, "conflict", reason: "Document update conflict.")
            let unknown = try await c.put("/db/doc", #"{"_rev":"9-\#(digest("9"))","v":3}"#)
            expectError(unknown, .conflict, "conflict")
            #expect(try await c.get("/db/doc")["v"] == 2)
        }
    }

    @Test func deleteWritesTombstoneAndGetSaysDeleted() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            let del = try await c.delete("/db/doc?rev=\(rev1)")
            #expect(del.status == .ok)
            #expect(del["ok"] == true)
            #expect(del["id"] == "doc")
            let tomb = try #require(del["rev"]?.stringValue)
            #expect(tomb.hasPrefix("2-"))
            expectError(try await c.get("/db/doc"), .notFound, "not_found", reason: "deleted")
            // The tombstone itself is readable by rev.
            let t = try await c.get("/db/doc?rev=\(tomb)")
            #expect(t.status == .ok)
            #expect(t.json == ["_id": "doc", "_rev": .string(tomb), "_deleted": true])
            // Recreating after deletion continues the branch.
            let again = try await c.putDoc("/db/doc", #"{"v":"back"}"#)
            #expect(again.hasPrefix("3-"))
        }
    }

    @Test func deleteWithoutRevIsConflictAndMissingDocIs404() async throws {
        try await withServer { c in
            try await c.createDB("db")
            try await c.putDoc("/db/doc", "{}")
            expectError(try await c.delete("/db/doc"), .conflict, "conflict")
            expectError(try await c.delete("/db/nope"), .notFound, "not_found", reason: "missing")
            expectError(try await c.delete("/db/nope?rev=1-abc"), .notFound, "not_found")
            expectError(try await c.delete("/db/doc?rev=1-\(digest("0"))"), .conflict, "conflict")
        }
    }

    @Test func missingDocumentIs404Missing() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.get("/db/nope"), .notFound, "not_found", reason: "missing")
            #expect(try await c.request(.head, "/db/nope").status == .notFound)
        }
    }

    @Test func headReturnsContentLengthWithoutBody() async throws {
        try await withServer { c in
            try await c.createDB("db")
            try await c.putDoc("/db/doc", #"{"v":1}"#)
            let full = try await c.get("/db/doc")
            let head = try await c.request(.head, "/db/doc")
            #expect(head.status == .ok)
            #expect(head.bytes.isEmpty)
            #expect(head.header(.contentLength).flatMap(Int.init) == full.bytes.count)
        }
    }

    @Test func revParamReadsANonWinningLeafAndUnknownRevIs404() async throws {
        try await withServer { c in
            try await c.createDB("db")
            _ = try await makeConflictedDoc(c)
            let winner = try await c.get("/db/doc")
            #expect(winner["_rev"]?.stringValue == "1-\(digest("c"))")
            #expect(winner["v"] == 3)
            let loser = try await c.get("/db/doc?rev=1-\(digest("b"))")
            #expect(loser.status == .ok)
            #expect(loser["_rev"]?.stringValue == "1-\(digest("b"))")
            #expect(loser["v"] == 2)
            expectError(try await c.get("/db/doc?rev=7-\(digest("7"))"), .notFound, "not_found", reason: "missing")
        }
    }

    @Test func revsListsRevisionHistoryNewestFirst() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            let rev2 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev1)","v":2}"#)
            let rev3 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev2)","v":3}"#)
            let r = try await c.get("/db/doc?revs=true")
            let ids = [rev3, rev2, rev1].map { JSON.string(String($0.split(separator: "-")[1])) }
            #expect(r["_revisions"] == ["start": 3, "ids": .array(ids)])
            #expect(r["v"] == 3)
            // Without the option there is no _revisions.
            #expect(try await c.get("/db/doc")["_revisions"] == nil)
        }
    }

    @Test func revsInfoReportsStatusOfEachAncestor() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            let rev2 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev1)","v":2}"#)
            let r = try await c.get("/db/doc?revs_info=true")
            let info = try #require(r["_revs_info"]?.arrayValue)
            #expect(info.count == 2)
            #expect(info.first == ["rev": .string(rev2), "status": "available"])
            #expect(info.last?["rev"]?.stringValue == rev1)
            // Replaced revisions keep their bodies until compaction, as in CouchDB.
            #expect(info.last == ["rev": .string(rev1), "status": "available"])
        }
    }

    @Test func conflictsListsLosingLeaves() async throws {
        try await withServer { c in
            try await c.createDB("db")
            _ = try await makeConflictedDoc(c)
            let r = try await c.get("/db/doc?conflicts=true")
            #expect(r["_rev"]?.stringValue == "1-\(digest("c"))")
            #expect(r["_conflicts"] == [.string("1-\(digest("b"))")])
            #expect(try await c.get("/db/doc")["_conflicts"] == nil)
        }
    }

    @Test func deletedConflictsListsDeletedLeaves() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let tomb = try await makeConflictedDoc(c)
            #expect(tomb.hasPrefix("2-"))
            let r = try await c.get("/db/doc?deleted_conflicts=true")
            #expect(r["_deleted_conflicts"] == [.string(tomb)])
            #expect(r["_conflicts"] == nil)
        }
    }

    @Test func metaIncludesRevsInfoConflictsAndDeletedConflicts() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let tomb = try await makeConflictedDoc(c)
            let r = try await c.get("/db/doc?meta=true")
            #expect(r["_conflicts"] == [.string("1-\(digest("b"))")])
            #expect(r["_deleted_conflicts"] == [.string(tomb)])
            #expect(r["_revs_info"] == [["rev": .string("1-\(digest("c"))"), "status": "available"]])
        }
    }

    @Test func openRevsAllReturnsEveryLeafIncludingTombstones() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let tomb = try await makeConflictedDoc(c)
            let r = try await c.get("/db/doc?open_revs=all")
            #expect(r.status == .ok)
            let entries = try #require(r.json.arrayValue)
            #expect(entries.count == 3)
            let docs = entries.compactMap { $0["ok"] }
            #expect(docs.count == 3)
            let revs = Set(docs.compactMap { $0["_rev"]?.stringValue })
            #expect(revs == ["1-\(digest("b"))", "1-\(digest("c"))", tomb])
            let deleted = docs.first { $0["_rev"]?.stringValue == tomb }
            #expect(deleted?["_deleted"] == true)
            #expect(docs.first { $0["_rev"]?.stringValue == "1-\(digest("b"))" }?["v"] == 2)
        }
    }

    @Test func openRevsListReportsMissingAndLatestFollowsToLeaf() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            let rev2 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev1)","v":2}"#)
            let missing = "5-\(digest("5"))"
            let list = q(#"["\#(rev2)","\#(missing)"]"#)
            let r = try await c.get("/db/doc?open_revs=\(list)")
            #expect(r.status == .ok)
            let entries = try #require(r.json.arrayValue)
            #expect(entries.count == 2)
            #expect(entries[0]["ok"]?["_rev"]?.stringValue == rev2)
            #expect(entries[0]["ok"]?["v"] == 2)
            #expect(entries[1] == ["missing": .string(missing)])

            let latest = try await c.get("/db/doc?latest=true&open_revs=\(q(#"["\#(rev1)"]"#))")
            let latestEntries = try #require(latest.json.arrayValue)
            #expect(latestEntries.count == 1)
            #expect(latestEntries.first?["ok"]?["_rev"]?.stringValue == rev2)
            #expect(latestEntries.first?["ok"]?["v"] == 2)
        }
    }

    @Test func openRevsOnMissingDocument() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.get("/db/nope?open_revs=all"), .notFound, "not_found")
            let r = try await c.get("/db/nope?open_revs=\(q(#"["1-abc"]"#))")
            #expect(r.status == .ok)
            #expect(r.json == [["missing": "1-abc"]])
            expectError(try await c.get("/db/nope?open_revs=notjson"), .badRequest, "bad_request")
        }
    }

    @Test func openRevsAsMultipartMixed() async throws {
        try await withServer { c in
            try await c.createDB("db")
            _ = try await makeConflictedDoc(c)
            let missing = "4-\(digest("4"))"
            let list = q(#"["1-\#(digest("b"))","\#(missing)"]"#)
            let r = try await c.get("/db/doc?open_revs=\(list)", headers: [.accept: "multipart/mixed"])
            #expect(r.status == .ok)
            let contentType = try #require(r.header(.contentType))
            #expect(contentType.hasPrefix("multipart/mixed"))
            let boundary = try #require(Multipart.boundary(fromContentType: contentType))
            let parts = try Multipart.parse(r.bytes, boundary: boundary)
            #expect(parts.count == 2)
            #expect(parts.first?.contentType == "application/json")
            let doc = try JSON.parse(parts[0].body)
            #expect(doc["_rev"]?.stringValue == "1-\(digest("b"))")
            #expect(doc["v"] == 2)
            #expect(parts.last?.contentType?.contains("error=\"true\"") == true)
            #expect(try JSON.parse(parts[1].body) == ["missing": .string(missing)])
        }
    }

    @Test func newEditsFalseStoresGivenRevisionAndHistory() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let body = #"{"_rev":"3-\#(digest("c"))","_revisions":{"start":3,"ids":["\#(digest("c"))","\#(digest("b"))","\#(digest("a"))"]},"v":"rep"}"#
            let r = try await c.put("/db/rep?new_edits=false", body)
            #expect(r.status == .created)
            #expect(r["rev"]?.stringValue == "3-\(digest("c"))")
            let doc = try await c.get("/db/rep?revs=true")
            #expect(doc["_rev"]?.stringValue == "3-\(digest("c"))")
            #expect(doc["v"] == "rep")
            #expect(doc["_revisions"] == ["start": 3, "ids": [.string(digest("c")), .string(digest("b")), .string(digest("a"))]])
            // Replaying the same revision is accepted and changes nothing.
            let again = try await c.put("/db/rep?new_edits=false", body)
            #expect(again.status == .created)
            #expect(try await c.get("/db")["doc_count"] == 1)
        }
    }

    @Test func newEditsFalseWithoutRevIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.put("/db/rep?new_edits=false", #"{"v":1}"#), .badRequest, "bad_request")
            let mismatch = #"{"_rev":"2-\#(digest("x"))","_revisions":{"start":2,"ids":["\#(digest("y"))","\#(digest("a"))"]}}"#
            expectError(try await c.put("/db/rep?new_edits=false", mismatch), .badRequest, "bad_request")
            let badHistory = #"{"_revisions":{"start":1,"ids":["a","b"]}}"#
            expectError(try await c.put("/db/rep?new_edits=false", badHistory), .badRequest, "bad_request")
        }
    }

    @Test func designDocumentsAreOrdinaryDocuments() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev = try await c.putDoc("/db/_design/app", #"{"language":"query"}"#)
            let doc = try await c.get("/db/_design/app")
            #expect(doc["_id"] == "_design/app")
            #expect(doc["_rev"]?.stringValue == rev)
            #expect(rowIDs(try await c.get("/db/_all_docs").json) == ["_design/app"])
        }
    }

    @Test func percentEncodedSlashStaysInDocumentID() async throws {
        try await withServer { c in
            try await c.createDB("db")
            try await c.putDoc("/db/a%2Fb", #"{"v":1}"#)
            let doc = try await c.get("/db/a%2Fb")
            #expect(doc["_id"] == "a/b")
        }
    }

    @Test func unknownQueryOptionIsIgnored() async throws {
        try await withServer { c in
            try await c.createDB("db")
            try await c.putDoc("/db/doc?frobnicate=yes", #"{"v":1}"#)
            let r = try await c.get("/db/doc?frobnicate=yes&whatever")
            #expect(r.status == .ok)
            #expect(r["v"] == 1)
        }
    }

    @Test func postToDocumentTakesOnlyFormUploads() async throws {
        try await withServer { c in
            try await c.createDB("db")
            // POST to a document is CouchDB's form upload: anything but multipart/form-data is 415.
            expectError(try await c.post("/db/doc", "{}"), .unsupportedMediaType, "bad_content_type")
            let rev = try await c.putDoc("/db/doc", #"{"v":1}"#)
            let form = "--B\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n\(rev)\r\n"
                + "--B\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nhi\r\n--B--"
            let type: HTTPFields = [.contentType: "multipart/form-data; boundary=B"]
            // A form needs a Referer on this host (another site's page can't submit it).
            expectError(try await c.request(.post, "/db/doc", body: Array(form.utf8), headers: type), .badRequest, "bad_request")
            var headers = type
            headers[HTTPField.Name("Referer")!] = "http://localhost/_utils/"
            let posted = try await c.request(.post, "/db/doc", body: Array(form.utf8), headers: headers)
            #expect(posted.status == .created)
            let doc = try await c.get("/db/doc")
            #expect(doc["v"] == 1)
            #expect(doc["_attachments"]?["a.txt"]?["length"] == 2)
        }
    }
}

@Suite("Local documents")
struct LocalDocumentTests {
    @Test func localDocumentsPutGetUpdateDelete() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let put = try await c.put("/db/_local/ckpt", #"{"seq":1}"#)
            #expect(put.status == .created)
            #expect(put["ok"] == true)
            #expect(put["id"] == "_local/ckpt")
            let rev1 = try #require(put["rev"]?.stringValue)
            #expect(rev1 == "0-1")

            let got = try await c.get("/db/_local/ckpt")
            #expect(got.json == ["_id": "_local/ckpt", "_rev": "0-1", "seq": 1])

            let update = try await c.put("/db/_local/ckpt", #"{"_rev":"0-1","seq":2}"#)
            #expect(update.status == .created)
            #expect(update["rev"] == "0-2")
            #expect(try await c.get("/db/_local/ckpt")["seq"] == 2)

            let del = try await c.delete("/db/_local/ckpt?rev=0-2")
            #expect(del.status == .ok)
            #expect(del["ok"] == true)
            #expect(del["id"] == "_local/ckpt")
            expectError(try await c.get("/db/_local/ckpt"), .notFound, "not_found", reason: "missing")
        }
    }

    @Test func localDocumentsStayOutOfAllDocsChangesAndDocCount() async throws {
        try await withServer { c in
            try await c.createDB("db")
            _ = try await c.put("/db/_local/hidden", #"{"x":1}"#)
            try await c.putDoc("/db/visible", #"{"x":1}"#)
            #expect(rowIDs(try await c.get("/db/_all_docs").json) == ["visible"])
            #expect(rowIDs(try await c.get("/db/_changes").json, "results") == ["visible"])
            #expect(try await c.get("/db")["doc_count"] == 1)
        }
    }

    @Test func missingLocalDocumentIs404() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.get("/db/_local/none"), .notFound, "not_found", reason: "missing")
            expectError(try await c.get("/db/_local"), .badRequest, "bad_request")
        }
    }
}
