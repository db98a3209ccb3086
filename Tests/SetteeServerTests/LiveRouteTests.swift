import Foundation
import HTTPTypes
import SetteeCore
import Testing

@testable import SetteeServer

/// A few of the route tests again over real sockets (`.live`), to prove the responder works behind the HTTP server.
@Suite("Live routes")
struct LiveRouteTests {
    @Test func welcomeOverSocket() async throws {
        try await withServer(mode: .live) { c in
            let r = try await c.get("/")
            #expect(r.status == .ok)
            #expect(r["couchdb"] == "Welcome")
            #expect(r["uuid"]?.stringValue == c.node.uuid)
            #expect(r.header(.server) == "CouchDB/3.5.0 (Settee/0.1.0)")
        }
    }

    @Test func documentLifecycleOverSocket() async throws {
        try await withServer(mode: .live) { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            expectError(try await c.put("/db/doc", #"{"v":2}"#), .conflict, "conflict", reason: "Document update conflict.")
            let rev2 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev1)","v":2}"#)
            #expect(try await c.get("/db/doc").json == ["_id": "doc", "_rev": .string(rev2), "v": 2])
            let head = try await c.request(.head, "/db/doc")
            #expect(head.status == .ok)
            let del = try await c.delete("/db/doc?rev=\(rev2)")
            #expect(del.status == .ok)
            expectError(try await c.get("/db/doc"), .notFound, "not_found", reason: "deleted")
        }
    }

    @Test func authAndSessionOverSocket() async throws {
        try await withServer(admin: true, mode: .live) { c in
            expectError(try await c.get("/_all_dbs"), .unauthorized, "unauthorized")
            let login = try await c.post("/_session", #"{"name":"admin","password":"s3cret"}"#)
            #expect(login.status == .ok)
            let cookie = try #require(login.header(.setCookie)?.split(separator: ";").first.map(String.init))
            let dbs = try await c.get("/_all_dbs", headers: [.cookie: cookie])
            #expect(dbs.status == .ok)
            #expect(dbs.json == ["_replicator", "_users"])
        }
    }

    @Test func attachmentAndMultipartOverSocket() async throws {
        try await withServer(mode: .live) { c in
            try await c.createDB("db")
            let bytes: [UInt8] = (0..<300).map { UInt8($0 % 256) }
            let put = try await c.request(.put, "/db/bin/data.bin", body: bytes, headers: [.contentType: "application/octet-stream"])
            #expect(put.status == .created)
            let got = try await c.get("/db/bin/data.bin")
            #expect(got.bytes == bytes)
            #expect(got.header(.contentType) == "application/octet-stream")
            let mixed = try await c.get("/db/bin?open_revs=all", headers: [.accept: "multipart/mixed"])
            let boundary = try #require(mixed.header(.contentType).flatMap(Multipart.boundary(fromContentType:)))
            let parts = try Multipart.parse(mixed.bytes, boundary: boundary)
            #expect(parts.count == 1)
            // A revision with attachments is a nested multipart/related part (the JSON, then the bytes), as CouchDB
            // sends it to its replicator.
            let innerType = try #require(parts[0].header("Content-Type"))
            #expect(innerType.hasPrefix("multipart/related"))
            let inner = try Multipart.parse(parts[0].body, boundary: try #require(Multipart.boundary(fromContentType: innerType)))
            #expect(inner.count == 2)
            let doc = try JSON.parse(inner[0].body)
            #expect(doc["_rev"] == put["rev"])
            #expect(doc["_attachments"]?["data.bin"]?["follows"] == true)
            #expect(inner[1].body == bytes)
        }
    }

    @Test func longpollOverSocketReturnsAfterWrite() async throws {
        try await withServer(mode: .live) { c in
            try await c.createDB("db")
            try await c.putDoc("/db/first", "{}")
            let immediate = try await c.get("/db/_changes?feed=longpoll&timeout=10000")
            #expect(rowIDs(immediate.json, "results") == ["first"])
            // The live test client has a single connection, so the write comes straight through the node.
            let node = c.node
            let writer = Task {
                try await Task.sleep(for: .milliseconds(300))
                let db = try node.database("db")
                let c = try #require(try db.collection(name: "_default", scope: "_default"))
                _ = try c.write([.init(id: "second", body: ["x": 1], mode: .edit(parent: nil))])
            }
            // since=1 rather than since=now: on a loaded machine the request may be handled after the write, and
            // `now` would then skip it; either way the longpoll must answer with the second document.
            let r = try await c.get("/db/_changes?feed=longpoll&since=1&timeout=10000")
            try await writer.value
            #expect(rowIDs(r.json, "results") == ["second"])
            #expect(seqNumber(r["last_seq"]) == 2)
        }
    }
}
