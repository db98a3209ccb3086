import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

@Suite("Database routes")
struct DatabaseRouteTests {
    @Test func putCreatesDatabaseWith201AndLocation() async throws {
        try await withServer { c in
            let r = try await c.request(.put, "/db")
            #expect(r.status == .created)
            #expect(r.json == ["ok": true])
            #expect(r.header(.location) == "http://localhost/db")
            #expect(c.node.databaseNames() == ["_replicator", "_users", "db"])
        }
    }

    @Test func putExistingDatabaseIs412FileExists() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.request(.put, "/db"), .preconditionFailed, "file_exists")
        }
    }

    @Test func illegalDatabaseNamesAre400() async throws {
        try await withServer { c in
            for name in ["Upper", "1digit", "has%20space", "_underscore", "a.b.c.d"] {
                let r = try await c.request(.put, "/\(name)")
                expectError(r, .badRequest, "illegal_database_name")
            }
            let long = String(repeating: "a", count: 239)
            expectError(try await c.request(.put, "/\(long)"), .badRequest, "illegal_database_name")
            #expect(try await c.request(.put, "/" + String(repeating: "a", count: 238)).status == .created)
            // Allowed punctuation, and the system databases.
            // (A raw `+` in a path is a space, as CouchDB's decode_plus_to_space; `%2B` is the `+`.)
            #expect(try await c.request(.put, "/a_$()%2B-z").status == .created)
            _ = try await c.delete("/_users")
            #expect(try await c.request(.put, "/_users").status == .created)
        }
    }

    @Test func getReturnsDatabaseInfo() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let empty = try await c.get("/db")
            #expect(empty.status == .ok)
            #expect(empty["db_name"] == "db")
            #expect(empty["doc_count"] == 0)
            #expect(empty["doc_del_count"] == 0)
            #expect(empty["instance_start_time"] == "0")
            #expect(seqNumber(empty["update_seq"]) == 0)
            #expect(empty["sizes"]?["file"]?.intValue != nil)
            #expect(empty["sizes"]?["active"]?.intValue != nil)
            #expect(empty["sizes"]?["external"]?.intValue != nil)
            #expect(empty["purge_seq"] != nil)

            let rev = try await c.putDoc("/db/a", #"{"x":1}"#)
            try await c.putDoc("/db/b", #"{"x":2}"#)
            _ = try await c.delete("/db/a?rev=\(rev)")
            let info = try await c.get("/db")
            #expect(info["doc_count"] == 1)
            #expect(info["doc_del_count"] == 1)
            #expect(seqNumber(info["update_seq"]) == 3)
        }
    }

    @Test func headOnDatabaseIs200OrMissing404() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let r = try await c.request(.head, "/db")
            #expect(r.status == .ok)
            #expect(r.bytes.isEmpty)
            #expect(try await c.request(.head, "/nope").status == .notFound)
        }
    }

    @Test func deleteRemovesDatabase() async throws {
        try await withServer { c in
            try await c.createDB("db")
            try await c.putDoc("/db/doc", "{}")
            let r = try await c.delete("/db")
            #expect(r.status == .ok)
            #expect(r.json == ["ok": true])
            expectError(try await c.get("/db"), .notFound, "not_found", reason: "Database does not exist.")
            expectError(try await c.delete("/db"), .notFound, "not_found")
            // Recreating gives an empty database, and document routes use it (not the deleted one's collection).
            try await c.createDB("db")
            #expect(try await c.get("/db")["doc_count"] == 0)
            expectError(try await c.get("/db/doc"), .notFound, "not_found")
            _ = try await c.putDoc("/db/doc", #"{"again":true}"#)
            #expect(try await c.get("/db/doc")["again"] == true)
            #expect(try await c.get("/db")["doc_count"] == 1)
        }
    }

    @Test func deleteWithRevParameterIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.delete("/db?rev=1-abc"), .badRequest, "bad_request")
            #expect(try await c.get("/db").status == .ok)
        }
    }

    @Test func missingDatabaseIs404ForEveryRoute() async throws {
        try await withServer { c in
            let reason = "Database does not exist."
            expectError(try await c.get("/nope"), .notFound, "not_found", reason: reason)
            expectError(try await c.get("/nope/doc"), .notFound, "not_found", reason: reason)
            expectError(try await c.put("/nope/doc", "{}"), .notFound, "not_found", reason: reason)
            expectError(try await c.get("/nope/_all_docs"), .notFound, "not_found", reason: reason)
            expectError(try await c.get("/nope/_changes"), .notFound, "not_found", reason: reason)
            expectError(try await c.post("/nope/_bulk_docs", #"{"docs":[]}"#), .notFound, "not_found", reason: reason)
            expectError(try await c.get("/nope/_local/x"), .notFound, "not_found", reason: reason)
            expectError(try await c.get("/nope/_security"), .notFound, "not_found", reason: reason)
            expectError(try await c.post("/nope", "{}"), .notFound, "not_found", reason: reason)
        }
    }

    @Test func wrongMethodOnDatabaseIs405() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.request(.patch, "/db"), .methodNotAllowed, "method_not_allowed")
            expectError(try await c.get("/db/_bulk_docs"), .methodNotAllowed, "method_not_allowed")
            expectError(try await c.post("/db/_revs_limit", "5"), .methodNotAllowed, "method_not_allowed")
        }
    }

    @Test func postToDatabaseCreatesDocumentWithGeneratedID() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let r = try await c.post("/db", #"{"v":1}"#)
            #expect(r.status == .created)
            #expect(r["ok"] == true)
            let id = try #require(r["id"]?.stringValue)
            #expect(id.count == 32)
            #expect(r["rev"]?.stringValue?.hasPrefix("1-") == true)
            let doc = try await c.get("/db/\(id)")
            #expect(doc["v"] == 1)
            let named = try await c.post("/db", #"{"_id":"given","v":2}"#)
            #expect(named["id"] == "given")
        }
    }
}

@Suite("Keyspaces")
struct KeyspaceRouteTests {
    @Test func collectionHoldsDocumentsSeparateFromDefault() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let created = try await c.request(.put, "/db.inventory.items")
            #expect(created.status == .created)
            #expect(created.json == ["ok": true])
            expectError(try await c.request(.put, "/db.inventory.items"), .preconditionFailed, "file_exists")

            try await c.putDoc("/db.inventory.items/widget", #"{"kind":"item"}"#)
            try await c.putDoc("/db/widget", #"{"kind":"default"}"#)
            try await c.putDoc("/db/other", #"{"kind":"default"}"#)

            #expect(try await c.get("/db.inventory.items/widget")["kind"] == "item")
            #expect(try await c.get("/db/widget")["kind"] == "default")
            expectError(try await c.get("/db.inventory.items/other"), .notFound, "not_found", reason: "missing")

            let info = try await c.get("/db.inventory.items")
            #expect(info["db_name"] == "db.inventory.items")
            #expect(info["scope"] == "inventory")
            #expect(info["collection"] == "items")
            #expect(info["doc_count"] == 1)
            #expect(try await c.get("/db")["doc_count"] == 2)

            #expect(rowIDs(try await c.get("/db.inventory.items/_all_docs").json) == ["widget"])
            #expect(rowIDs(try await c.get("/db/_all_docs").json) == ["other", "widget"])
            #expect(rowIDs(try await c.get("/db.inventory.items/_changes").json, "results") == ["widget"])
        }
    }

    @Test func twoPartKeyspaceUsesDefaultScope() async throws {
        try await withServer { c in
            try await c.createDB("db")
            #expect(try await c.request(.put, "/db.things").status == .created)
            try await c.putDoc("/db.things/t1", "{}")
            let info = try await c.get("/db._default.things")
            #expect(info["doc_count"] == 1)
            #expect(info["scope"] == "_default")
        }
    }

    @Test func missingCollectionIs404() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.get("/db.s.nope"), .notFound, "not_found")
            expectError(try await c.put("/db.s.nope/doc", "{}"), .notFound, "not_found")
            expectError(try await c.request(.put, "/nodb.s.c"), .notFound, "not_found", reason: "Database does not exist.")
        }
    }

    @Test func deletingCollectionLeavesDatabase() async throws {
        try await withServer { c in
            try await c.createDB("db")
            _ = try await c.request(.put, "/db.s.c")
            try await c.putDoc("/db/keep", "{}")
            #expect(try await c.delete("/db.s.c").status == .ok)
            expectError(try await c.get("/db.s.c"), .notFound, "not_found")
            #expect(try await c.get("/db/keep").status == .ok)
        }
    }
}

@Suite("Database maintenance routes")
struct DatabaseMaintenanceTests {
    @Test func revsLimitDefaultsTo1000AndCanBeChanged() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let initial = try await c.get("/db/_revs_limit")
            #expect(initial.status == .ok)
            #expect(initial.json == 1000)
            let set = try await c.put("/db/_revs_limit", "5")
            #expect(set.status == .ok)
            #expect(set.json == ["ok": true])
            #expect(try await c.get("/db/_revs_limit").json == 5)
        }
    }

    @Test func revsLimitRejectsNonPositiveOrNonInteger() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.put("/db/_revs_limit", #""abc""#), .badRequest, "bad_request")
            expectError(try await c.put("/db/_revs_limit", "0"), .badRequest, "bad_request")
            expectError(try await c.put("/db/_revs_limit", "{"), .badRequest, "bad_request")
            #expect(try await c.get("/db/_revs_limit").json == 1000)
        }
    }

    @Test func compactRequiresJSONContentType() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let without = try await c.request(.post, "/db/_compact")
            expectError(without, .unsupportedMediaType, "bad_content_type")
            let wrong = try await c.request(.post, "/db/_compact", body: [], headers: [.contentType: "text/plain"])
            expectError(wrong, .unsupportedMediaType, "bad_content_type")
            let ok = try await c.request(.post, "/db/_compact", headers: [.contentType: "application/json"])
            #expect(ok.status == .accepted)
            #expect(ok.json == ["ok": true])
            let cleanup = try await c.request(.post, "/db/_view_cleanup", headers: [.contentType: "application/json"])
            #expect(cleanup.status == .accepted)
        }
    }

    @Test func ensureFullCommitReturns201WithInstanceStartTime() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let r = try await c.request(.post, "/db/_ensure_full_commit", headers: [.contentType: "application/json"])
            #expect(r.status == .created)
            #expect(r.json == ["ok": true, "instance_start_time": "0"])
        }
    }

    @Test func purgeRemovesRevisionsAndReportsThem() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev = try await c.putDoc("/db/gone", #"{"a":1}"#)
            try await c.putDoc("/db/kept", #"{"a":2}"#)
            let r = try await c.post("/db/_purge", #"{"gone":["\#(rev)"]}"#)
            #expect(r.status == .created)
            #expect(r["purged"]?["gone"] == [.string(rev)])
            #expect(r.json.objectValue?.contains(key: "purge_seq") == true)
            expectError(try await c.get("/db/gone"), .notFound, "not_found")
            #expect(try await c.get("/db/kept").status == .ok)
            #expect(rowIDs(try await c.get("/db/_all_docs").json) == ["kept"])
        }
    }

    @Test func purgeRejectsMalformedRequests() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.post("/db/_purge", #"{"a":"1-abc"}"#), .badRequest, "bad_request")
            expectError(try await c.post("/db/_purge", #"{"a":["nodash"]}"#), .badRequest, "bad_request")
            expectError(try await c.post("/db/_purge", "[]"), .badRequest, "bad_request")
        }
    }

    @Test func securityDefaultsToAdminOnlyAndRoundTrips() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let initial = try await c.get("/db/_security")
            #expect(initial.status == .ok)
            // CouchDB 3's default_security = admin_only.
            #expect(initial.json == ["members": ["roles": ["_admin"]], "admins": ["roles": ["_admin"]]])
            let sec = #"{"admins":{"names":["root"],"roles":[]},"members":{"names":["bob"],"roles":["staff"]}}"#
            let put = try await c.put("/db/_security", sec)
            #expect(put.status == .ok)
            #expect(put.json == ["ok": true])
            let got = try await c.get("/db/_security")
            let expected = try JSON.parse(sec)
            #expect(got.json == expected)
        }
    }

    @Test func securityRejectsMalformedSections() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.put("/db/_security", #"{"members":[]}"#), .badRequest, "bad_request")
            expectError(try await c.put("/db/_security", #"{"members":{"names":"bob"}}"#), .badRequest, "bad_request")
            expectError(try await c.put("/db/_security", #"{"admins":{"roles":[1]}}"#), .badRequest, "bad_request")
            #expect(try await c.get("/db/_security").json == ["members": ["roles": ["_admin"]], "admins": ["roles": ["_admin"]]])
        }
    }
}
