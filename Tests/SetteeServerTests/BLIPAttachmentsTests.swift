import Crypto
import Foundation
@testable import SetteeServer
import SetteeReplication
import SetteeCore
import SetteeStore
import SetteeTestSupport
import Testing

/// How attachments are named at `_blipsync`'s edge (``BLIPAttachments``), against a real store, no sockets.
@Suite struct BLIPAttachmentsTests {
    static func sha1(_ bytes: [UInt8]) -> String { "sha1-" + Base64.encode(Array(Insecure.SHA1.hash(data: bytes))) }

    @Test func byteSearchFindsANeedleAnywhereAndOnlyWhereItIs() {
        let needle = Array("\"_attachments\"".utf8)
        #expect(Array(#"{"a":1,"_attachments":{}}"#.utf8).contains(bytes: needle))
        #expect(Array(#""_attachments""#.utf8).contains(bytes: needle))
        #expect(!Array(#"{"_attachment":1,"attachments":"_attachments_"}"#.utf8).contains(bytes: needle))
        #expect(!Array(#"{"_"#.utf8).contains(bytes: needle))
        #expect(!([UInt8]()).contains(bytes: needle))
        #expect(Array("\"\"\"_attachments\"".utf8).contains(bytes: needle))  // the first byte repeats before the match
    }

    /// LiteCore's proof: SHA-1 over the nonce's length as one byte, the nonce, then the bytes.
    @Test func proofIsTheSHA1OfTheLengthPrefixedNonceAndTheBytes() {
        let nonce: [UInt8] = [1, 2, 3], data = Array("blob".utf8)
        #expect(BlobDigest.proof(nonce: nonce, data: data) == Self.sha1([3, 1, 2, 3] + data))
        #expect(BlobDigest.sha1(data) == Self.sha1(data))
    }

    @Test func compressibleTypesAreLiteCoresOnes() {
        #expect(BLIPAttachments.isCompressible("text/plain") && BLIPAttachments.isCompressible("application/json"))
        #expect(BLIPAttachments.isCompressible("image/svg+xml") && BLIPAttachments.isCompressible(nil))
        #expect(!BLIPAttachments.isCompressible("image/png") && !BLIPAttachments.isCompressible("application/zip"))
        #expect(!BLIPAttachments.isCompressible("video/mp4"))
    }

    /// A stored revision goes out with its stubs and blobs named by SHA-1 and lengths of the attachment's own bytes
    /// (a gzip-stored one included); the names are recorded, and the store then finds the bodies by them.
    @Test func outgoingBodiesNameAttachmentsBySHA1AndRecordTheNames() throws {
        let dir = TempDir()
        let database = try Database(name: "out", config: DatabaseConfiguration(directory: dir.path))
        defer { database.close() }
        let c = try database.defaultCollection()
        let photo = Array("not really a png".utf8), text = Array(String(repeating: "squeeze me ", count: 50).utf8)
        let packed = try Gzip.compress(text, level: 6)
        let photoDigest = Database.attachmentDigest(photo), textDigest = Database.attachmentDigest(packed)
        var write = RevisionWrite(id: "d", body: [
            "photo": ["@type": "blob", "content_type": "image/png", "digest": .string(photoDigest), "length": .int(Int64(photo.count))],
            "_attachments": [
                "blob_/photo": Blob.attachmentStub(contentType: "image/png", digest: photoDigest, length: photo.count, revpos: 1),
                "notes.txt": Blob.attachmentStub(contentType: "text/plain", digest: textDigest, length: text.count, revpos: 1),
            ]], mode: .edit(parent: nil), blobs: [(photoDigest, photo), (textDigest, packed)])
        write.blobEncodings = [textDigest: "gzip"]
        try c.write(write)
        let stored = try #require(try c.record(id: "d")).body

        let out = try #require(try BLIPAttachments.outgoing(stored, database: database))
        let body = try #require(try JSON.parse(out.body).objectValue)
        #expect(body["photo"]?["digest"]?.stringValue == Self.sha1(photo))
        #expect(body["_attachments"]?["blob_/photo"]?["digest"]?.stringValue == Self.sha1(photo))
        #expect(body["_attachments"]?["notes.txt"] == ["content_type": "text/plain", "digest": .string(Self.sha1(text)),
                                                       "length": .int(Int64(text.count)), "revpos": 1, "stub": true])
        #expect(Set(out.names.map(\.sha1)) == [Self.sha1(photo), Self.sha1(text)])
        #expect(try database.blobDigest(sha1: Self.sha1(text)) == textDigest)
        #expect(try database.blobSHA1(digest: photoDigest) == Self.sha1(photo))
        // A body without attachments is left alone (nil: sent as stored).
        #expect(try BLIPAttachments.outgoing(Array(#"{"n":1}"#.utf8), database: database) == nil)
    }
}
