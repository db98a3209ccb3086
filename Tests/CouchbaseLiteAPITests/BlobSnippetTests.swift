import Foundation
import Testing
import Settee

/// Couchbase Lite's "Blobs" guide (Swift), run against Settee: blobs are stored as CouchDB attachments.
@Suite struct BlobSnippetTests {
    @Test func saveAndReadABlob() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        let imageData = Data((0..<4096).map { UInt8($0 % 251) })

        let newTask = MutableDocument(id: "task1")
        // Add a blob to the document
        let blob = Blob(contentType: "image/jpeg", data: imageData)
        newTask.setBlob(blob, forKey: "avatar")
        try collection.save(document: newTask)

        // Retrieve the blob
        if let taskBlob = newTask.blob(forKey: "avatar") {
            #expect(taskBlob.content == imageData)
        }
        let read = try #require(try collection.document(id: "task1"))
        let stored = try #require(read.blob(forKey: "avatar"))
        #expect(stored.content == imageData)
        #expect(stored.contentType == "image/jpeg")
        #expect(stored.length == 4096)
        #expect(stored.digest == blob.digest)
        #expect(stored.digest?.hasPrefix("md5-") == true)
        #expect(stored.properties["@type"] as? String == "blob")
        #expect(Blob.isBlob(properties: stored.properties))
        // The document holds the metadata; the content is a CouchDB attachment named after the key path.
        #expect(read.json(forKey: "avatar")?["digest"]?.stringValue == blob.digest)
        #expect(read.dictionary(forKey: "avatar") == nil)  // a blob, not a dictionary, as in Couchbase Lite
        let stub = try #require(read.attachments?["blob_/avatar"])
        #expect(stub["digest"]?.stringValue == blob.digest && stub["stub"] == true)
        #expect(stub["content_type"]?.stringValue == "image/jpeg")

        // An edit keeps the blob; removing the property drops its attachment.
        let edit = read.toMutable().setString("done", forKey: "state")
        try collection.save(document: edit)
        #expect(try collection.document(id: "task1")?.blob(forKey: "avatar")?.content == imageData)
        try collection.save(document: edit.removeValue(forKey: "avatar"))
        #expect(try collection.document(id: "task1")?.attachments == nil)
    }

    @Test func blobsFromStreamsFilesAndNestedValues() throws {
        let s = try SnippetDatabase()
        let collection = s.collection
        let bytes = Data("hello, blob".utf8)
        let file = s.dir.path + "/note.txt"
        try bytes.write(to: URL(fileURLWithPath: file))

        let doc = MutableDocument(id: "d")
            .setBlob(Blob(contentType: "text/plain", contentStream: InputStream(data: bytes)), forKey: "streamed")
            .setBlob(try Blob(contentType: "text/plain", fileURL: URL(fileURLWithPath: file)), forKey: "file")
            .setValue(["photos": [Blob(contentType: "image/png", data: Data([1, 2, 3]))]], forKey: "album")
        try collection.save(document: doc)
        let read = try #require(try collection.document(id: "d"))
        #expect(read.blob(forKey: "streamed")?.content == bytes)
        #expect(read.blob(forKey: "file")?.content == bytes)
        #expect(read["album"]["photos"][0].blob?.content == Data([1, 2, 3]))
        #expect(Set(read.attachments?.keys ?? []) == ["blob_/streamed", "blob_/file", "blob_/album/photos/0"])
        #expect(throws: SetteeError.self) { try Blob(contentType: "text/plain", fileURL: URL(string: "https://example.com/x")!) }

        // A key with a slash and the nested path it looks like are different attachments.
        let twins = MutableDocument(id: "twins")
            .setBlob(Blob(contentType: "text/plain", data: Data("flat".utf8)), forKey: "a/b")
            .setValue(["b": Blob(contentType: "text/plain", data: Data("nested".utf8))], forKey: "a")
        try collection.save(document: twins)
        let back = try #require(try collection.document(id: "twins"))
        #expect(Set(back.attachments?.keys ?? []) == ["blob_/a~1b", "blob_/a/b"])
        #expect(back.blob(forKey: "a/b")?.content == Data("flat".utf8))
        #expect(back["a"]["b"].blob?.content == Data("nested".utf8))
    }

    @Test func saveBlobAndGetBlob() throws {
        let s = try SnippetDatabase()
        let database = s.database
        let blob = Blob(contentType: "application/octet-stream", data: Data([9, 8, 7]))
        try database.saveBlob(blob: blob)
        let again = try #require(try database.getBlob(properties: blob.properties))
        #expect(again.content == Data([9, 8, 7]))
        #expect(try database.getBlob(properties: ["@type": "blob", "digest": "md5-AAAAAAAAAAAAAAAAAAAAAA=="]) == nil)
        #expect(throws: SetteeError.self) { try database.getBlob(properties: ["name": "not a blob"]) }
    }

    @Test func blobsReplicateAsAttachments() async throws {
        let a = try SnippetDatabase("a"), b = try SnippetDatabase("b")
        let doc = MutableDocument(id: "pic").setBlob(Blob(contentType: "image/png", data: Data(repeating: 7, count: 10_000)), forKey: "image")
        try a.collection.save(document: doc)
        let replicator = Replicator(config: ReplicatorConfiguration(collection: a.collection, target: DatabaseEndpoint(collection: b.collection)))
        replicator.start()
        let status = await replicator.waitUntilStopped()
        #expect(status.error == nil)
        let copy = try #require(try b.collection.document(id: "pic"))
        #expect(copy.blob(forKey: "image")?.content == Data(repeating: 7, count: 10_000))
    }
}
