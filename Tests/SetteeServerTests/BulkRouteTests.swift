import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

/// Creates `/db` with documents a…e (`{"n": i}`) and returns their revisions by id.
private func seedAlphabet(_ c: Couch) async throws -> [String: String] {
    try await c.createDB("db")
    var revs: [String: String] = [:]
    for (i, id) in ["c", "a", "e", "b", "d"].enumerated() {
        revs[id] = try await c.putDoc("/db/\(id)", #"{"n":\#(i)}"#)
    }
    return revs
}

@Suite("_bulk_docs")
struct BulkDocsTests {
    @Test func createsEveryDocumentAndReturnsRevs() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let r = try await c.post("/db/_bulk_docs", #"{"docs":[{"_id":"a","v":1},{"_id":"b","v":2},{"v":3}]}"#)
            #expect(r.status == .created)
            let rows = try #require(r.json.arrayValue)
            #expect(rows.count == 3)
            #expect(rows[0]["ok"] == true)
            #expect(rows[0]["id"] == "a")
            #expect(rows[0]["rev"]?.stringValue?.hasPrefix("1-") == true)
            #expect(rows[1]["id"] == "b")
            let generated = try #require(rows[2]["id"]?.stringValue)
            #expect(generated.count == 32)
            #expect(try await c.get("/db/\(generated)")["v"] == 3)
            #expect(try await c.get("/db")["doc_count"] == 3)
        }
    }

    @Test func mixedSuccessAndConflictReportedPerDocument() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let revA = try await c.putDoc("/db/a", #"{"v":1}"#)
            let revB = try await c.putDoc("/db/b", #"{"v":1}"#)
            let body = #"{"docs":[{"_id":"a","v":2},{"_id":"c","v":1},{"_id":"b","_rev":"\#(revB)","v":2},{"_id":"a","_rev":"\#(revA)","_deleted":true}]}"#
            let r = try await c.post("/db/_bulk_docs", body)
            #expect(r.status == .created)
            let rows = try #require(r.json.arrayValue)
            #expect(rows.count == 4)
            #expect(rows[0] == ["id": "a", "error": "conflict", "reason": "Document update conflict."])
            #expect(rows[1]["ok"] == true)
            #expect(rows[1]["id"] == "c")
            #expect(rows[2]["ok"] == true)
            #expect(rows[2]["rev"]?.stringValue?.hasPrefix("2-") == true)
            #expect(rows[3]["ok"] == true)
            #expect(try await c.get("/db/b")["v"] == 2)
            expectError(try await c.get("/db/a"), .notFound, "not_found", reason: "deleted")
        }
    }

    @Test func invalidDocumentsFailAloneWithErrorRows() async throws {
        try await withServer { c in
            try await c.createDB("db")
            // An illegal id fails the whole request, as in CouchDB; nothing is written.
            expectError(try await c.post("/db/_bulk_docs", #"{"docs":[{"_id":"_bad"},{"_id":"ok0"}]}"#), .badRequest, "illegal_docid")
            expectError(try await c.get("/db/ok0"), .notFound, "not_found")
            let r = try await c.post("/db/_bulk_docs", #"{"docs":[{"_id":"ok1"},{"_id":"x","_rev":"nodash"}]}"#)
            #expect(r.status == .created)
            let rows = try #require(r.json.arrayValue)
            #expect(rows.count == 2)
            #expect(rows[0]["ok"] == true)
            #expect(rows[1]["id"] == "x")
            #expect(rows[1]["error"] == "bad_request")
            #expect(rowIDs(try await c.get("/db/_all_docs").json) == ["ok1"])
        }
    }

    @Test func newEditsFalseReturnsEmptyListAndStoresRevisions() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let body = #"""
            {"new_edits":false,"docs":[
              {"_id":"r1","_rev":"2-\#(digest("b"))","_revisions":{"start":2,"ids":["\#(digest("b"))","\#(digest("a"))"]},"v":1},
              {"_id":"r2","_rev":"1-\#(digest("d"))","v":2}
            ]}
            """#
            let r = try await c.post("/db/_bulk_docs", body)
            #expect(r.status == .created)
            #expect(r.json == [])
            #expect(try await c.get("/db/r1")["_rev"]?.stringValue == "2-\(digest("b"))")
            #expect(try await c.get("/db/r2")["v"] == 2)
            // A conflicting revision is simply added as another leaf.
            let conflict = try await c.post("/db/_bulk_docs", #"{"new_edits":false,"docs":[{"_id":"r2","_rev":"1-\#(digest("e"))","v":3}]}"#)
            #expect(conflict.json == [])
            #expect(try await c.get("/db/r2?conflicts=true")["_conflicts"] == [.string("1-\(digest("d"))")])
        }
    }

    @Test func missingDocsMemberIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.post("/db/_bulk_docs", #"{"documents":[]}"#), .badRequest, "bad_request")
            expectError(try await c.post("/db/_bulk_docs", #"[]"#), .badRequest, "bad_request")
        }
    }
}

@Suite("_bulk_get")
struct BulkGetTests {
    @Test func returnsRequestedRevisionsAndErrors() async throws {
        try await withServer { c in
            let revs = try await seedAlphabet(c)
            let revA = try #require(revs["a"])
            let body = #"{"docs":[{"id":"a","rev":"\#(revA)"},{"id":"b"},{"id":"zz"},{"id":"c","rev":"9-\#(digest("9"))"}]}"#
            let r = try await c.post("/db/_bulk_get", body)
            #expect(r.status == .ok)
            let results = try #require(r["results"]?.arrayValue)
            #expect(results.count == 4)
            #expect(results[0]["id"] == "a")
            #expect(results[0]["docs"]?[0]?["ok"] == ["_id": "a", "_rev": .string(revA), "n": 1])
            #expect(results[1]["docs"]?[0]?["ok"]?["_rev"]?.stringValue == revs["b"])
            let missingDoc = results[2]["docs"]?[0]?["error"]
            #expect(missingDoc?["id"] == "zz")
            #expect(missingDoc?["error"] == "not_found")
            #expect(missingDoc?["reason"] == "missing")
            let missingRev = results[3]["docs"]?[0]?["error"]
            #expect(missingRev?["id"] == "c")
            #expect(missingRev?["rev"]?.stringValue == "9-\(digest("9"))")
            #expect(missingRev?["error"] == "not_found")
        }
    }

    @Test func revsTrueAddsRevisionsAndLatestFollowsToLeaf() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            let rev2 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev1)","v":2}"#)
            let r = try await c.post("/db/_bulk_get?revs=true&latest=true", #"{"docs":[{"id":"doc","rev":"\#(rev1)"}]}"#)
            let doc = try #require(r["results"]?[0]?["docs"]?[0]?["ok"])
            #expect(doc["_rev"]?.stringValue == rev2)
            #expect(doc["v"] == 2)
            #expect(doc["_revisions"]?["start"] == 2)
            #expect(doc["_revisions"]?["ids"]?.arrayValue?.count == 2)
        }
    }

    @Test func missingDocsListIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.post("/db/_bulk_get", #"{"ids":[]}"#), .badRequest, "bad_request")
            expectError(try await c.get("/db/_bulk_get"), .methodNotAllowed, "method_not_allowed")
        }
    }
}

@Suite("_revs_diff")
struct RevsDiffTests {
    @Test func reportsMissingRevisionsAndPossibleAncestors() async throws {
        try await withServer { c in
            let revs = try await seedAlphabet(c)
            let revA = try #require(revs["a"]), revB = try #require(revs["b"])
            let body = #"{"a":["\#(revA)","2-\#(digest("f"))"],"b":["\#(revB)"],"zz":["1-\#(digest("1"))","2-\#(digest("2"))"]}"#
            let r = try await c.post("/db/_revs_diff", body)
            #expect(r.status == .ok)
            #expect(r["a"]?["missing"] == [.string("2-\(digest("f"))")])
            #expect(r["a"]?["possible_ancestors"] == [.string(revA)])
            #expect(r["b"] == nil, "nothing is missing for b")
            let zz = r["zz"]?["missing"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(Set(zz) == ["1-\(digest("1"))", "2-\(digest("2"))"])
            #expect(r["zz"]?["possible_ancestors"] == nil)
        }
    }

    @Test func malformedRevsDiffIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.post("/db/_revs_diff", #"{"a":"1-abc"}"#), .badRequest, "bad_request")
            expectError(try await c.post("/db/_revs_diff", #"{"a":["bad"]}"#), .badRequest, "bad_request")
        }
    }
}

@Suite("_all_docs")
struct AllDocsTests {
    @Test func listsEveryDocumentSortedByID() async throws {
        try await withServer { c in
            let revs = try await seedAlphabet(c)
            let r = try await c.get("/db/_all_docs")
            #expect(r.status == .ok)
            #expect(r["total_rows"] == 5)
            #expect(r["offset"] == 0)
            #expect(rowIDs(r.json) == ["a", "b", "c", "d", "e"])
            let first = r["rows"]?[0]
            #expect(first == ["id": "a", "key": "a", "value": ["rev": .string(revs["a"] ?? "")]])
        }
    }

    @Test func startkeyEndkeyAndInclusiveEnd() async throws {
        try await withServer { c in
            _ = try await seedAlphabet(c)
            let range = try await c.get("/db/_all_docs?startkey=\(q(#""b""#))&endkey=\(q(#""d""#))")
            #expect(rowIDs(range.json) == ["b", "c", "d"])
            #expect(range["total_rows"] == 5)
            let exclusive = try await c.get("/db/_all_docs?startkey=\(q(#""b""#))&endkey=\(q(#""d""#))&inclusive_end=false")
            #expect(rowIDs(exclusive.json) == ["b", "c"])
            let underscored = try await c.get("/db/_all_docs?start_key=\(q(#""d""#))")
            #expect(rowIDs(underscored.json) == ["d", "e"])
            let key = try await c.get("/db/_all_docs?key=\(q(#""c""#))")
            #expect(rowIDs(key.json) == ["c"])
        }
    }

    @Test func descendingReversesOrderAndRange() async throws {
        try await withServer { c in
            _ = try await seedAlphabet(c)
            #expect(rowIDs(try await c.get("/db/_all_docs?descending=true").json) == ["e", "d", "c", "b", "a"])
            let range = try await c.get("/db/_all_docs?descending=true&startkey=\(q(#""d""#))&endkey=\(q(#""b""#))")
            #expect(rowIDs(range.json) == ["d", "c", "b"])
        }
    }

    @Test func limitAndSkipPage() async throws {
        try await withServer { c in
            _ = try await seedAlphabet(c)
            let limited = try await c.get("/db/_all_docs?limit=2")
            #expect(rowIDs(limited.json) == ["a", "b"])
            #expect(limited["total_rows"] == 5)
            let page = try await c.get("/db/_all_docs?skip=1&limit=2")
            #expect(rowIDs(page.json) == ["b", "c"])
            #expect(page["offset"] == 1)
            #expect(rowIDs(try await c.get("/db/_all_docs?skip=10").json) == [])
            #expect(rowIDs(try await c.get("/db/_all_docs?limit=0").json) == [])
        }
    }

    @Test func includeDocsEmbedsDocuments() async throws {
        try await withServer { c in
            let revs = try await seedAlphabet(c)
            let r = try await c.get("/db/_all_docs?include_docs=true&limit=1")
            #expect(r["rows"]?[0]?["doc"] == ["_id": "a", "_rev": .string(revs["a"] ?? ""), "n": 1])
            #expect(try await c.get("/db/_all_docs?limit=1")["rows"]?[0]?["doc"] == nil)
        }
    }

    @Test func postKeysReturnsRowsInKeyOrderWithErrorsAndDeletions() async throws {
        try await withServer { c in
            let revs = try await seedAlphabet(c)
            let del = try await c.delete("/db/e?rev=\(revs["e"] ?? "")")
            let tomb = try #require(del["rev"]?.stringValue)
            let r = try await c.post("/db/_all_docs?include_docs=true", #"{"keys":["c","zz","a","e"]}"#)
            #expect(r.status == .ok)
            let rows = try #require(r["rows"]?.arrayValue)
            #expect(rows.count == 4)
            #expect(rows[0]["id"] == "c")
            #expect(rows[0]["doc"]?["n"] == 0)
            #expect(rows[1] == ["key": "zz", "error": "not_found"])
            #expect(rows[2]["id"] == "a")
            #expect(rows[3] == ["id": "e", "key": "e", "value": ["rev": .string(tomb), "deleted": true], "doc": nil])
        }
    }

    @Test func keysInQueryStringAndOptionsInPostBody() async throws {
        try await withServer { c in
            _ = try await seedAlphabet(c)
            let get = try await c.get("/db/_all_docs?keys=\(q(#"["e","b"]"#))")
            #expect(rowIDs(get.json) == ["e", "b"])
            let post = try await c.post("/db/_all_docs", #"{"startkey":"b","limit":2,"descending":false}"#)
            #expect(rowIDs(post.json) == ["b", "c"])
        }
    }

    @Test func updateSeqOptionAddsSequence() async throws {
        try await withServer { c in
            _ = try await seedAlphabet(c)
            let r = try await c.get("/db/_all_docs?update_seq=true&limit=0")
            #expect(seqNumber(r["update_seq"]) == 5)
        }
    }

    @Test func invalidOptionValuesAre400() async throws {
        try await withServer { c in
            _ = try await seedAlphabet(c)
            expectError(try await c.get("/db/_all_docs?limit=abc"), .badRequest, "bad_request")
            expectError(try await c.get("/db/_all_docs?skip=-1"), .badRequest, "bad_request")
            expectError(try await c.get("/db/_all_docs?descending=maybe"), .badRequest, "bad_request")
            expectError(try await c.get("/db/_all_docs?startkey=%7Bnot-json"), .badRequest, "bad_request")
            expectError(try await c.post("/db/_all_docs", #"{"keys":"a"}"#), .badRequest, "bad_request")
            // Unknown options are ignored.
            #expect(rowIDs(try await c.get("/db/_all_docs?colour=blue").json).count == 5)
        }
    }
}
