import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Hummingbird
import NIOCore
import SetteeCore
import SetteeStore

/// An attachment body that came in a `multipart/related` document upload: read whole (a small request), or staged
/// to a file (``MultipartUpload``).
enum FollowingAttachment {
    case bytes([UInt8])
    case staged(AttachmentStreaming.Upload)

    /// Deletes a staged body's file (the write that stored it has copied it).
    func discard() {
        if case .staged(let upload) = self { upload.discard() }
    }
}

/// A `multipart/related` document upload too large to hold in memory — a replicator pushing a revision with its
/// attachments, as CouchDB's does, or a client writing a document and its attachments at once: the request body goes
/// to a staging file as it arrives, its parts are found in that file mapped read-only, and each attachment part is
/// copied into a staging file of its own (gzip-compressed and hashed on the way, as a standalone attachment `PUT`
/// is), which the write stores in SQLite a megabyte at a time. Only the JSON document is read into memory, so a
/// 50 MB attachment costs the node a megabyte of heap, not the attachment three times over.
enum MultipartUpload {
    /// The document and its `follows` attachment bodies, staged. The caller discards the bodies once written.
    /// - Throws: 400 for a body that isn't `multipart/related` with the document first and a part per `follows`
    ///   attachment; 413 `too_large` past the request limit, `attachment_too_large` past the attachment limit.
    static func receive(_ call: Call, contentType: String) async throws -> (JSONObject, [String: FollowingAttachment]) {
        guard let boundary = Multipart.boundary(fromContentType: contentType) else {
            throw CouchError.badRequest("multipart/related without a boundary")
        }
        let node = call.node
        let requestLimit = node.configuration.maxRequestSize
        if let length = call.header(.contentLength).flatMap(Int.init), length > requestLimit { throw CouchError.tooLarge }
        // The whole request, as it came.
        let file = try AttachmentStreaming.StagingFile(node: node, compressingAt: nil)
        var chunks = call.request.body.makeAsyncIterator()
        while true {
            let next: ByteBuffer?
            do { next = try await chunks.next() } catch {
                throw CouchError.badRequest("the multipart body ended before its end")
            }
            guard let chunk = next else { break }
            if file.length + chunk.readableBytes > requestLimit { throw CouchError.tooLarge }
            try chunk.withUnsafeReadableBytes { try file.append($0) }
        }
        let request = try file.finish()
        defer { request.discard() }
        guard request.length > 0 else { throw CouchError.badRequest("Empty multipart body") }
        return try await blocking {
            let mapped = try MappedFile(path: request.blob.path, length: request.length)
            return try split(mapped, boundary: boundary, call: call)
        }
    }

    /// The document part parsed, and each attachment part copied out of the mapped request.
    private static func split(_ mapped: MappedFile, boundary: String, call: Call) throws -> (JSONObject, [String: FollowingAttachment]) {
        let node = call.node
        let spans: [MultipartSpan]
        do { spans = try Multipart.scan(mapped.bytes, boundary: boundary) } catch {
            throw CouchError.badRequest("Invalid multipart body: \(error)")
        }
        guard let first = spans.first else { throw CouchError.badRequest("Empty multipart body") }
        if first.body.count > node.configuration.maxDocumentSize { throw CouchError.tooLarge }
        guard case .object(let doc) = try call.parseJSON(Array(mapped.bytes[first.body])) else {
            throw CouchError.badRequest("Document must be a JSON object")
        }
        let parts = try DocumentRoutes.followParts(of: doc, dispositions: spans.dropFirst().map { $0.header("Content-Disposition") })
        let settings = node.configuration.attachments
        var follows: [String: FollowingAttachment] = [:]
        do {
            for (name, index) in parts {
                let span = spans[index + 1].body
                let meta = doc["_attachments"]?[name]
                // As ``StoredAttachment``: bytes a replicator sent gzip-encoded are stored as they came; others are
                // compressed when their type is compressible.
                let givenGzip = meta?["encoding"]?.stringValue == "gzip"
                let contentType = meta?["content_type"]?.stringValue ?? "application/octet-stream"
                let level = !givenGzip && settings.compresses(contentType) ? settings.compressionLevel : nil
                let staged = try AttachmentStreaming.StagingFile(node: node, compressingAt: level)
                try mapped.forEachPiece(of: span) { try staged.append($0) }
                var upload = try staged.finish()
                follows[name] = .staged(upload)  // (its file discarded with the others if what follows throws)
                if givenGzip {
                    upload.blob.encoding = "gzip"
                    upload.length = try meta?["length"]?.intValue.map(Int.init) ?? mapped.inflatedLength(of: span)
                    follows[name] = .staged(upload)
                }
                if upload.length > node.configuration.maxAttachmentSize {
                    throw CouchError(.contentTooLarge, "attachment_too_large", name)
                }
            }
        } catch {
            for body in follows.values { body.discard() }
            throw error
        }
        return (doc, follows)
    }
}
