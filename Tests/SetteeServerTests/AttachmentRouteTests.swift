import Foundation
import HTTPTypes
import SetteeCore
import SetteeStore
import Testing

@testable import SetteeServer

/// text/plain is stored gzip-compressed (CouchDB's `compressible_types`), and the digest is of the stored bytes, as
/// CouchDB's is: md5 of "hello" gzipped at level 8.
private let helloDigest = Database.attachmentDigest((try? Gzip.compress(Array("hello".utf8), level: 8)) ?? [])
private let secondDigest = "md5-qfDmGhN9hqqdtTRl4IAWEg=="   // md5("second")

/// `/db/doc` with an inline `hello.txt` ("hello"); returns rev 1.
private func docWithHello(_ c: Couch) async throws -> String {
    try await c.createDB("db")
    return try await c.putDoc("/db/doc", #"{"v":1,"_attachments":{"hello.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#)
}

@Suite("Attachments")
struct AttachmentRouteTests {
    @Test func inlineBase64IsStoredAsStubWithDigestLengthAndRevpos() async throws {
        try await withServer { c in
            let rev = try await docWithHello(c)
            #expect(rev.hasPrefix("1-"))
            let doc = try await c.get("/db/doc")
            #expect(doc["v"] == 1)
            #expect(doc["_attachments"] == ["hello.txt": ["content_type": "text/plain", "revpos": 1, "digest": .string(helloDigest),
                                                          "length": 5, "stub": true]])
        }
    }

    @Test func getAttachmentReturnsBytesAndContentType() async throws {
        try await withServer { c in
            let rev = try await docWithHello(c)
            let r = try await c.get("/db/doc/hello.txt")
            #expect(r.status == .ok)
            #expect(r.text == "hello")
            #expect(r.header(.contentType) == "text/plain")
            // CouchDB's attachment ETag: the digest's base64 MD5 without its `md5-` prefix.
            #expect(r.header(.eTag) == "\"\(helloDigest.dropFirst(4))\"")
            let head = try await c.request(.head, "/db/doc/hello.txt")
            #expect(head.status == .ok)
            #expect(head.header(.contentLength) == "5")
            #expect(head.bytes.isEmpty)
            #expect(try await c.get("/db/doc/hello.txt?rev=\(rev)").text == "hello")
            expectError(try await c.get("/db/doc/nope.txt"), .notFound, "not_found")
            expectError(try await c.get("/db/nodoc/hello.txt"), .notFound, "not_found", reason: "missing")
        }
    }

    /// As CouchDB: ranges are served of attachments stored as they are (`Accept-Ranges: bytes`); a compressed one
    /// (text/plain is stored gzip) is sent whole whatever the `Range` (`Accept-Ranges: none`).
    @Test func rangesAreOfAttachmentsStoredAsTheyAre() async throws {
        try await withServer { c in
            let rev = try await docWithHello(c)
            let put = try await c.request(.put, "/db/doc/data.bin?rev=\(rev)", body: Array("0123456789".utf8),
                                          headers: [.contentType: "application/octet-stream"])
            #expect(put.status == .created)
            let part = try await c.request(.get, "/db/doc/data.bin", headers: [.range: "bytes=2-4"])
            #expect(part.status == .partialContent && part.text == "234")
            #expect(part.header(.contentRange) == "bytes 2-4/10" && part.header(.acceptRanges) == "bytes")
            let text = try await c.request(.get, "/db/doc/hello.txt", headers: [.range: "bytes=1-2"])
            #expect(text.status == .ok && text.text == "hello" && text.header(.contentRange) == nil)
            #expect(text.header(.acceptRanges) == "none")
            let packed = try await c.request(.get, "/db/doc/hello.txt", headers: [.range: "bytes=1-2", .acceptEncoding: "gzip"])
            #expect(packed.status == .ok && packed.header(.contentEncoding) == "gzip")
            #expect(try Gzip.decompress(packed.bytes, limit: 1 << 20) == Array("hello".utf8))
        }
    }

    @Test func standalonePutAddsAttachmentAsNewRevision() async throws {
        try await withServer { c in
            let rev1 = try await docWithHello(c)
            let put = try await c.request(.put, "/db/doc/second.bin?rev=\(rev1)", body: Array("second".utf8),
                                          headers: [.contentType: "application/x-custom"])
            #expect(put.status == .created)
            #expect(put["ok"] == true)
            #expect(put["id"] == "doc")
            let rev2 = try #require(put["rev"]?.stringValue)
            #expect(rev2.hasPrefix("2-"))

            let doc = try await c.get("/db/doc")
            #expect(doc["_rev"]?.stringValue == rev2)
            #expect(doc["v"] == 1, "the document body is kept")
            #expect(doc["_attachments"]?["hello.txt"]?["revpos"] == 1)
            #expect(doc["_attachments"]?["second.bin"] == ["content_type": "application/x-custom", "revpos": 2,
                                                           "digest": .string(secondDigest), "length": 6, "stub": true])
            let bytes = try await c.get("/db/doc/second.bin")
            #expect(bytes.text == "second")
            #expect(bytes.header(.contentType) == "application/x-custom")
        }
    }

    /// The attachment writes recorded from CouchDB 3.5.0 (Tests/Fixtures/couchdb-revids.jsonl) get CouchDB's revision
    /// ids over HTTP: text/plain and application/json are stored gzipped and digested as CouchDB digests them.
    @Test(arguments: [
        ("att0", "a.txt", "text/plain", "aGVsbG8=", "1-b4dc42f2c1845a6493492184c55020e2"),
        ("att1", "b.bin", "application/octet-stream", Base64.encode((0..<256).map { UInt8($0) }),
         "1-beef291ac239fcb066fe8b327d9279db"),
        ("att2", "c.json", "application/json", "eyJ4IjoxfQ==", "1-b4acc0769042095b505647ab57fc3014"),
    ])
    func inlineAttachmentsGetCouchDBsRevisionIDs(id: String, name: String, type: String, data: String,
                                                 couchRev: String) async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev = try await c.putDoc("/db/\(id)", #"{"title": "\#(id)", "_attachments": {"\#(name)": "#
                                         + #"{"content_type": "\#(type)", "data": "\#(data)"}}}"#)
            #expect(rev == couchRev)
        }
    }

    /// CouchDB puts a standalone PUT's attachment first (chttpd_db), and the order is part of the revision id's hash:
    /// these are the ids CouchDB 3.5 gives the same three writes.
    @Test func standalonePutPutsTheNewAttachmentFirstAsCouchDBDoes() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let rev1 = try await c.putDoc("/db/doc", #"{"v":1}"#)
            #expect(rev1 == "1-7a7e4b29f3af401e69b6f86e4c26b727")
            let put2 = try await c.request(.put, "/db/doc/a.bin?rev=\(rev1)", body: Array("one".utf8),
                                           headers: [.contentType: "application/octet-stream"])
            #expect(put2["rev"] == "2-e800cc999528a79eee233d5946325884")
            let put3 = try await c.request(.put, "/db/doc/b.png?rev=2-e800cc999528a79eee233d5946325884",
                                           body: Array("two".utf8), headers: [.contentType: "image/png"])
            #expect(put3["rev"] == "3-4e5e57279d78f8dd3932333821693cf6")
            #expect(try await c.get("/db/doc")["_attachments"]?.objectValue?.keys == ["b.png", "a.bin"])
        }
    }

    @Test func standalonePutCreatesDocumentAndNeedsRevForExisting() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let created = try await c.request(.put, "/db/fresh/dir/file.txt", body: Array("hello".utf8),
                                              headers: [.contentType: "text/plain"])
            #expect(created.status == .created)
            #expect(created["rev"]?.stringValue?.hasPrefix("1-") == true)
            #expect(try await c.get("/db/fresh/dir/file.txt").text == "hello")
            #expect(try await c.get("/db/fresh")["_attachments"]?["dir/file.txt"]?["digest"] == .string(helloDigest))
            let noRev = try await c.request(.put, "/db/fresh/other.txt", body: Array("x".utf8))
            expectError(noRev, .conflict, "conflict")
            let staleRev = try await c.request(.put, "/db/fresh/other.txt?rev=1-\(digest("0"))", body: Array("x".utf8))
            expectError(staleRev, .conflict, "conflict")
        }
    }

    @Test func standaloneDeleteRemovesAttachment() async throws {
        try await withServer { c in
            let rev1 = try await docWithHello(c)
            let del = try await c.delete("/db/doc/hello.txt?rev=\(rev1)")
            #expect(del.status == .ok)
            #expect(del["ok"] == true)
            let rev2 = try #require(del["rev"]?.stringValue)
            #expect(rev2.hasPrefix("2-"))
            let doc = try await c.get("/db/doc")
            #expect(doc["_attachments"] == nil)
            #expect(doc["v"] == 1)
            expectError(try await c.get("/db/doc/hello.txt"), .notFound, "not_found")
            expectError(try await c.delete("/db/doc/hello.txt?rev=\(rev2)"), .notFound, "not_found")
            expectError(try await c.delete("/db/doc/hello.txt"), .conflict, "conflict")
        }
    }

    @Test func attachmentsTrueInlinesData() async throws {
        try await withServer { c in
            _ = try await docWithHello(c)
            let r = try await c.get("/db/doc?attachments=true")
            let att = r["_attachments"]?["hello.txt"]
            #expect(att?["data"] == "aGVsbG8=")
            #expect(att?["stub"] == nil)
            #expect(att?["digest"] == .string(helloDigest))
            #expect(att?["length"] == 5)
        }
    }

    @Test func attsSinceInlinesOnlyNewerAttachments() async throws {
        try await withServer { c in
            let rev1 = try await docWithHello(c)
            let put = try await c.request(.put, "/db/doc/second.bin?rev=\(rev1)", body: Array("second".utf8))
            #expect(put.status == .created)
            let r = try await c.get("/db/doc?atts_since=\(q(#"["\#(rev1)"]"#))")
            #expect(r["_attachments"]?["hello.txt"]?["stub"] == true)
            #expect(r["_attachments"]?["hello.txt"]?["data"] == nil)
            #expect(r["_attachments"]?["second.bin"]?["data"] == "c2Vjb25k")
            #expect(r["_attachments"]?["second.bin"]?["stub"] == nil)
            // An unknown revision in atts_since sends everything.
            let all = try await c.get("/db/doc?atts_since=\(q(#"["1-\#(digest("0"))"]"#))")
            #expect(all["_attachments"]?["hello.txt"]?["data"] == "aGVsbG8=")
        }
    }

    @Test func stubKeepsAttachmentAcrossUpdates() async throws {
        try await withServer { c in
            let rev1 = try await docWithHello(c)
            let rev2 = try await c.putDoc("/db/doc", #"{"_rev":"\#(rev1)","v":2,"_attachments":{"hello.txt":{"stub":true}}}"#)
            #expect(rev2.hasPrefix("2-"))
            let doc = try await c.get("/db/doc")
            #expect(doc["v"] == 2)
            #expect(doc["_attachments"]?["hello.txt"]?["revpos"] == 1)
            #expect(doc["_attachments"]?["hello.txt"]?["digest"] == .string(helloDigest))
            #expect(try await c.get("/db/doc/hello.txt").text == "hello")
            // Updating without _attachments drops them.
            try await c.putDoc("/db/doc", #"{"_rev":"\#(rev2)","v":3}"#)
            #expect(try await c.get("/db/doc")["_attachments"] == nil)
        }
    }

    @Test func missingStubIs412() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let noParent = try await c.put("/db/doc", #"{"_attachments":{"a.txt":{"stub":true}}}"#)
            expectError(noParent, .preconditionFailed, "missing_stub")
            let rev1 = try await c.putDoc("/db/other", #"{"v":1}"#)
            let unknownName = try await c.put("/db/other", #"{"_rev":"\#(rev1)","_attachments":{"a.txt":{"stub":true}}}"#)
            expectError(unknownName, .preconditionFailed, "missing_stub")
            let unknownDigest = try await c.put("/db/third",
                #"{"_attachments":{"a.txt":{"stub":true,"digest":"md5-AAAAAAAAAAAAAAAAAAAAAA==","length":3}}}"#)
            expectError(unknownDigest, .preconditionFailed, "missing_stub")
        }
    }

    @Test func invalidInlineAttachmentIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            expectError(try await c.put("/db/d", #"{"_attachments":{"a":{"data":"***"}}}"#), .badRequest, "bad_request")
            expectError(try await c.put("/db/d", #"{"_attachments":{"a":{"content_type":"text/plain"}}}"#), .badRequest, "bad_request")
            expectError(try await c.put("/db/d", #"{"_attachments":[]}"#), .badRequest, "bad_request")
        }
    }

    @Test func multipartRelatedUploadWithFollows() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let json = #"{"v":"mp","_attachments":{"hello.txt":{"follows":true,"content_type":"text/plain","length":5},"second.bin":{"follows":true,"content_type":"application/octet-stream","length":6}}}"#
            let body = crlfBytes("""
            --abc123
            Content-Type: application/json

            \(json)
            --abc123
            Content-Disposition: attachment; filename="hello.txt"

            hello
            --abc123

            second
            --abc123--

            """)
            let r = try await c.request(.put, "/db/mp", body: body,
                                        headers: [.contentType: #"multipart/related; boundary="abc123""#])
            #expect(r.status == .created, "\(r.text)")
            #expect(r["rev"]?.stringValue?.hasPrefix("1-") == true)
            let doc = try await c.get("/db/mp")
            #expect(doc["v"] == "mp")
            #expect(doc["_attachments"]?["hello.txt"]?["digest"] == .string(helloDigest))
            #expect(doc["_attachments"]?["hello.txt"]?["length"] == 5)
            #expect(doc["_attachments"]?["second.bin"]?["digest"] == .string(secondDigest))
            #expect(try await c.get("/db/mp/hello.txt").text == "hello")
            #expect(try await c.get("/db/mp/second.bin").text == "second")
        }
    }

    @Test func multipartMissingFollowsPartIs400() async throws {
        try await withServer { c in
            try await c.createDB("db")
            let json = #"{"_attachments":{"a.txt":{"follows":true,"content_type":"text/plain"}}}"#
            let body = crlfBytes("--b\nContent-Type: application/json\n\n\(json)\n--b--\n")
            let r = try await c.request(.put, "/db/mp", body: body, headers: [.contentType: "multipart/related; boundary=b"])
            expectError(r, .badRequest, "bad_request")
            let noBoundary = try await c.request(.put, "/db/mp", body: body, headers: [.contentType: "multipart/related"])
            expectError(noBoundary, .badRequest, "bad_request")
        }
    }
}

@Suite struct AcceptEncodingTests {
    @Test func gzipIsSentOnlyToClientsThatTakeIt() {
        #expect(AttachmentRoutes.acceptsGzip("gzip, deflate"))
        #expect(AttachmentRoutes.acceptsGzip("deflate, GZIP;q=0.5"))
        #expect(AttachmentRoutes.acceptsGzip("*"))
        #expect(!AttachmentRoutes.acceptsGzip(nil))
        #expect(!AttachmentRoutes.acceptsGzip("identity"))
        #expect(!AttachmentRoutes.acceptsGzip("gzip;q=0, identity"))
        #expect(!AttachmentRoutes.acceptsGzip("*, gzip;q=0"))
        #expect(!AttachmentRoutes.acceptsGzip("*;q=0"))
    }
}
