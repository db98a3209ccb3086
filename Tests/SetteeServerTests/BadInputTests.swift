import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

@Suite("Bad input")
struct BadInputTests {
    @Test func malformedJSONIs400BadRequest() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.put("/db/doc", #"{"a":"#), .badRequest, "bad_request")
            expectError(try await c.put("/db/doc", #"{"a":1,}"#), .badRequest, "bad_request")
            expectError(try await c.post("/db", "not json"), .badRequest, "bad_request")
            expectError(try await c.post("/db/_bulk_docs", #"{"docs":[}"#), .badRequest, "bad_request")
            expectError(try await c.post("/db/_all_docs", "{"), .badRequest, "bad_request")
            expectError(try await c.post("/db/_changes", "{"), .badRequest, "bad_request")
            expectError(try await c.put("/db/_security", "nope"), .badRequest, "bad_request")
            #expect(try await c.get("/db")["doc_count"] == 0)
        }
    }

    @Test func emptyBodyIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.request(.put, "/db/doc"), .badRequest, "bad_request")
            expectError(try await c.request(.post, "/db/_bulk_docs", headers: [.contentType: "application/json"]), .badRequest, "bad_request")
            // Without a JSON content type, CouchDB answers 415 before reading the body.
            expectError(try await c.request(.post, "/db/_bulk_docs"), .unsupportedMediaType, "bad_content_type")
        }
    }

    @Test func nonObjectBodyIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.put("/db/doc", "[1,2]"), .badRequest, "bad_request")
            expectError(try await c.put("/db/doc", #""text""#), .badRequest, "bad_request")
            expectError(try await c.post("/db", "42"), .badRequest, "bad_request")
            expectError(try await c.post("/db/_bulk_get", "[]"), .badRequest, "bad_request")
        }
    }

    @Test func underscoreDocumentIDIs400IllegalDocID() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let reason = "Only reserved document ids may start with underscore."
            expectError(try await c.put("/db/_bad", "{}"), .badRequest, "illegal_docid", reason: reason)
            expectError(try await c.post("/db", #"{"_id":"_bad"}"#), .badRequest, "illegal_docid", reason: reason)
            expectError(try await c.post("/db", #"{"_id":42}"#), .badRequest, "illegal_docid")
            expectError(try await c.put("/db/_design", "{}"), .notFound, "not_found")
        }
    }

    @Test func badSpecialMemberIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let r = try await c.put("/db/doc", #"{"_foo":1}"#)
            expectError(r, .badRequest, "doc_validation")
        }
    }

    @Test func invalidRevFormatIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            try await c.putDoc("/db/doc", "{}")
            let reason = "Invalid rev format"
            expectError(try await c.put("/db/doc", #"{"_rev":"garbage"}"#), .badRequest, "bad_request", reason: reason)
            expectError(try await c.put("/db/doc", #"{"_rev":"0-abc"}"#), .badRequest, "bad_request", reason: reason)
            expectError(try await c.put("/db/doc", #"{"_rev":5}"#), .badRequest, "bad_request", reason: reason)
            expectError(try await c.get("/db/doc?rev=garbage"), .badRequest, "bad_request", reason: reason)
            expectError(try await c.delete("/db/doc?rev=garbage"), .badRequest, "bad_request", reason: reason)
            expectError(try await c.get("/db/doc?open_revs=\(q(#"["garbage"]"#))"), .badRequest, "bad_request")
        }
    }

    @Test func oversizedDocumentIs413TooLarge() async throws {
        try await withServer(maxDocumentSize: 256) { c in
            try await c.createDB("db")
            let big = #"{"blob":"\#(String(repeating: "x", count: 1000))"}"#
            expectError(try await c.put("/db/big", big), .contentTooLarge, "too_large")
            expectError(try await c.post("/db", big), .contentTooLarge, "too_large")
            let bulk = try await c.post("/db/_bulk_docs", #"{"docs":[{"_id":"big","blob":"\#(String(repeating: "x", count: 1000))"},{"_id":"small"}]}"#)
            #expect(bulk.status == .created)
            #expect(bulk.json[0]?["error"] == "too_large")
            #expect(bulk.json[1]?["ok"] == true)
            // A document under the limit is fine.
            #expect(try await c.put("/db/small2", #"{"v":1}"#).status == .created)
            expectError(try await c.get("/db/big"), .notFound, "not_found")
        }
    }

    @Test func invalidQueryOptionValuesAre400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            try await c.putDoc("/db/doc", "{}")
            expectError(try await c.get("/db/_all_docs?limit=abc"), .badRequest, "bad_request")
            expectError(try await c.get("/db/doc?revs=perhaps"), .badRequest, "bad_request")
            expectError(try await c.get("/db/doc?atts_since=notjson"), .badRequest, "bad_request")
            expectError(try await c.put("/db/doc2?new_edits=sometimes", "{}"), .badRequest, "bad_request")
            expectError(try await c.get("/_all_dbs?limit=-3"), .badRequest, "bad_request")
        }
    }

    @Test func unknownQueryOptionsAreIgnored() async throws {
        try await withServer { c in
            try await c.createDB("db")
            try await c.putDoc("/db/doc", #"{"v":1}"#)
            #expect(try await c.get("/db/doc?made_up=1")["v"] == 1)
            #expect(try await c.get("/db?made_up=1")["doc_count"] == 1)
            #expect(try await c.get("/_all_dbs?made_up=1").json == ["_replicator", "_users", "db"])
        }
    }

    @Test func badMangoRequestsAreCouchDBsErrors() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.post("/db/_find", "{}"), .badRequest, "missing_required_key")
            expectError(try await c.post("/db/_find", #"{"selector": []}"#), .badRequest, "invalid_selector_json")
            expectError(try await c.post("/db/_find", #"{"selector": {"a": {"$nope": 1}}}"#), .badRequest, "invalid_operator")
            expectError(try await c.post("/db/_find", #"{"selector": {}, "sort": "a"}"#), .badRequest, "invalid_sort_json")
            expectError(try await c.post("/db/_index", #"{"index": {"fields": "a"}}"#), .badRequest, "invalid_sort_json")
            expectError(try await c.post("/db/_index", #"{"index": []}"#), .badRequest, "invalid_index")
            expectError(try await c.post("/db/_find", #"{"selector": {}, "bookmark": "%%%"}"#), .badRequest, "invalid_bookmark")
            expectError(try await c.post("/db/_find", #"{"selector": {"a": {"$beginsWith": true}}}"#), .badRequest, "invalid_operator")
            expectError(try await c.post("/db/_find", #"{"selector": {"a": {"$regex": "("}}}"#), .badRequest, "bad_arg")
            expectError(try await c.put("/db/_design/q", #"{"language": "query", "views": {"v": {"map": "function(doc) {}"}}}"#),
                        .badRequest, "invalid_design_doc")
            // The store is untouched and the node answers.
            #expect(try await c.get("/db")["doc_count"] == 0)
        }
    }

    @Test func aReplicationWithoutSourceOrTargetIs400() async throws {
        try await withServer { c in
            expectError(try await c.post("/_replicate", "{}"), .badRequest, "bad_request")
            expectError(try await c.post("/_replicate", #"{"source":"a"}"#), .badRequest, "bad_request")
            expectError(try await c.post("/_replicate", #"{"source":"a","target":"b","doc_ids":"x"}"#), .badRequest, "bad_request")
            expectError(try await c.post("/_replicate", #"{"source":"nope","target":"b"}"#), .notFound, "db_not_found")
            expectError(try await c.post("/_replicate", #"{"source":"a","target":"b","continuous":"yes"}"#), .badRequest, "bad_request")
        }
    }

    @Test func everyErrorBodyIsErrorAndReasonOnly() async throws {
        try await withServer(admin: true) { c in
            let auth: HTTPFields = [.authorization: basicAuth(testAdmin.username, testAdmin.password)]
            var admin = c
            admin.defaultHeaders = auth
            _ = try await admin.request(.put, "/db")
            let rev = try await admin.putDoc("/db/doc", "{}")
            let cases: [(HTTPResult, HTTPResponse.Status)] = [
                (try await c.get("/db"), .unauthorized),
                (try await admin.get("/nope"), .notFound),
                (try await admin.get("/db/nope"), .notFound),
                (try await admin.request(.put, "/db"), .preconditionFailed),
                (try await admin.request(.put, "/Bad"), .badRequest),
                (try await admin.put("/db/doc", "{}"), .conflict),
                (try await admin.put("/db/doc", "{"), .badRequest),
                (try await admin.request(.patch, "/db/doc"), .methodNotAllowed),
                (try await admin.request(.post, "/db/_compact"), .unsupportedMediaType),
                (try await admin.delete("/db/doc?rev=\(rev)x"), .conflict),
            ]
            for (r, status) in cases {
                #expect(r.status == status, "\(r.text)")
                #expect(r.header(.contentType) == "application/json")
                let keys = r.json.objectValue.map { Set($0.keys) }
                #expect(keys == ["error", "reason"], "\(r.text)")
                #expect(r["error"]?.stringValue?.isEmpty == false)
                #expect(r["reason"]?.stringValue != nil)
            }
        }
    }
}
