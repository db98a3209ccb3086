import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeCore
import SetteeStore

/// Large attachments moved a piece at a time, never whole in memory: an upload goes to a staging file as it
/// arrives (gzip-compressed on the way when its type is compressible, its digest computed as it goes) and the
/// write that stores it copies the file into SQLite a megabyte at a time; a download is read from SQLite a megabyte
/// at a time as the client takes it (and decompressed on the way for a client that doesn't accept gzip).
enum AttachmentStreaming {
    /// Attachments larger than this stream; smaller ones are handled whole, which is faster.
    static let threshold = HTTP1ConnectionHandler.streamingThreshold
    /// The piece read from SQLite and written to the client at a time.
    static let pieceSize = 1 << 20

    /// Where uploads are staged: `.staging` in the node's data directory (the same file system as the databases,
    /// not a memory-backed `/tmp`). Emptied when the node starts.
    static func stagingDirectory(_ node: Node) -> String {
        (node.configuration.dataDirectory as NSString).appendingPathComponent(".staging")
    }

    /// Removes what a node that stopped mid-upload left in the staging directory.
    static func clearStaging(_ node: Node) {
        let directory = stagingDirectory(node)
        for file in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            unlink((directory as NSString).appendingPathComponent(file))
        }
    }

    /// An upload in its staging file, ready for ``RevisionWrite/stagedBlobs``.
    struct Upload {
        var blob: StagedBlob
        /// The attachment's own length (``StagedBlob/length`` is what is stored, compressed or not).
        var length: Int

        /// Deletes the staging file (the write that stored it has copied it).
        func discard() { unlink(blob.path) }
    }

    /// Writes a request body to a staging file as it arrives.
    /// - Throws: 413 `too_large` past the request limit, 413 `attachment_too_large` past the attachment limit
    ///   (the file removed either way).
    static func stage(_ body: RequestBody, name: String, contentType: String, node: Node) async throws -> Upload {
        let settings = node.configuration.attachments
        let requestLimit = node.configuration.maxRequestSize, attachmentLimit = node.configuration.maxAttachmentSize
        let file = try StagingFile(node: node, compressingAt: settings.compresses(contentType) ? settings.compressionLevel : nil)
        var chunks = body.makeAsyncIterator()
        while true {
            let next: ByteBuffer?
            do { next = try await chunks.next() } catch {
                // The client went away mid-body, or its chunked framing broke: nothing is stored.
                throw CouchError.badRequest("the attachment's body ended before its end")
            }
            guard let chunk = next else { break }
            guard chunk.readableBytes > 0 else { continue }
            if file.length + chunk.readableBytes > requestLimit { throw CouchError.tooLarge }
            if file.length + chunk.readableBytes > attachmentLimit { throw CouchError(.contentTooLarge, "attachment_too_large", name) }
            try chunk.withUnsafeReadableBytes { try file.append($0) }
        }
        return try file.finish()
    }

    /// A file in the node's staging directory being written (``SetteeStore/StagingFile``), ended as an ``Upload``.
    final class StagingFile {
        private let file: SetteeStore.StagingFile

        /// - Parameter level: The gzip level to compress at, or nil to store the bytes as given.
        init(node: Node, compressingAt level: Int?) throws {
            file = try SetteeStore.StagingFile(directory: AttachmentStreaming.stagingDirectory(node), compressingAt: level)
        }

        /// The bytes given so far (the attachment's own length).
        var length: Int { file.length }

        /// Appends bytes of the attachment.
        func append(_ bytes: UnsafeRawBufferPointer) throws { try file.append(bytes) }

        /// Ends the file: the upload, ready to be stored.
        func finish() throws -> Upload { Upload(blob: try file.finish(), length: file.length) }
    }

    /// Whether a PUT's body should be staged rather than read whole: larger than ``threshold``, or of unknown
    /// length, and not itself encoded (a gzip request body is decoded whole, within the request limit).
    static func streams(_ call: Call) -> Bool {
        guard call.header(.contentEncoding).map({ $0.lowercased() == "identity" }) ?? true else { return false }
        return call.header(.contentLength).flatMap { Int($0) }.map { $0 > threshold } ?? true
    }

    /// The answer to a GET or HEAD of a large attachment (as ``AttachmentRoutes/read(_:meta:stored:)`` answers a
    /// small one), its body read a piece at a time, several byte ranges as a `multipart/byteranges` body whose
    /// parts are read so. `nil` when the request needs the whole body in memory: a gzip-stored attachment sent
    /// decoded whose decoded length isn't known.
    static func read(_ call: Call, db: Database, meta: JSONObject, digest: String, storedLength: Int,
                     encoding: String?) throws -> Response? {
        let (etag, baseHeaders) = AttachmentRoutes.headers(meta)
        if let match = call.header(.ifNoneMatch), ETags.matches(match, etag) {
            return Response(status: .notModified, headers: [.eTag: etag, .contentLength: "0"])
        }
        var headers = baseHeaders
        let acceptsGzip = AttachmentRoutes.acceptsGzip(call.header(.acceptEncoding))
        let range = call.header(.range)
        let gzipped = encoding == "gzip"
        // The bytes to send: a span of the stored body, or (inflating) the whole of it decoded.
        var span = 0..<storedLength
        var status = HTTPResponse.Status.ok
        var inflate = false
        var length = storedLength
        // A compressed attachment is always sent whole, a `Range` ignored (CouchDB serves ranges of attachments
        // stored as they are only, and says `Accept-Ranges: none` of the others).
        if gzipped { headers[.acceptRanges] = "none" }
        if gzipped && acceptsGzip {
            headers[.contentEncoding] = "gzip"
        } else if gzipped {
            guard let identity = meta["length"]?.intValue else { return nil }
            inflate = true
            length = Int(identity)
        } else if let range, let ranges = ByteRanges.parse(range, length: storedLength) {
            guard !ranges.isEmpty else {
                return Response(status: .rangeNotSatisfiable, headers: [.contentRange: "bytes */\(storedLength)"])
            }
            guard ranges.count == 1 else {
                return AttachmentRoutes.byteRanges(ranges, of: storedLength, call: call, meta: meta, headers: headers,
                                                   database: db) { .payload(StoredAttachmentPayload(digest: digest, range: $0)) }
            }
            span = ranges[0]
            length = span.count
            status = .partialContent
            headers[.contentRange] = "bytes \(span.lowerBound)-\(span.upperBound - 1)/\(storedLength)"
        }
        if call.method == .head {
            headers[.contentLength] = String(length)
            return Response(status: status, headers: headers)
        }
        let (piece, decodes) = (span, inflate)
        let body = ResponseBody(contentLength: length) { writer in
            try await writeBlob(digest: digest, span: piece, inflate: decodes, database: db, to: &writer)
            try await writer.finish(nil)
        }
        return Response(status: status, headers: headers, body: body)
    }

    /// Writes `span` of an attachment body as stored, read from SQLite a piece at a time (decoded on the way when
    /// `inflate`: then `span` must be the whole body).
    /// - Throws: 404 if the body is compacted away meanwhile (the connection then closes short of its length).
    static func writeBlob(digest: String, span: Range<Int>, inflate: Bool, database db: Database,
                          to writer: inout any ResponseBodyWriter) async throws {
        let decoder = inflate ? try GzipStream() : nil
        var offset = span.lowerBound
        while offset < span.upperBound {
            // (Compressed pieces are smaller: each is written out decoded, several times its size.)
            let count = min(decoder == nil ? pieceSize : pieceSize / 8, span.upperBound - offset)
            let start = offset
            let piece = try await blocking { try db.readBlob(digest: digest, offset: start, count: count) }
            guard let piece, !piece.isEmpty else { throw CouchError.notFound("Document is missing attachment") }
            offset += piece.count
            if let decoder {
                var out = ByteBuffer()
                try piece.withUnsafeBytes { bytes in
                    try decoder.process(bytes, finish: offset >= span.upperBound) { out.writeBytes($0) }
                }
                try await writer.write(out)
            } else {
                try await writer.write(ByteBuffer(bytes: piece))
            }
        }
    }
}
