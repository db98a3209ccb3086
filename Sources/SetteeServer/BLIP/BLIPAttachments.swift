import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SetteeCore
import SetteeReplication
import SetteeStore
import Synchronization

/// How attachments cross `_blipsync`: one stored body, two names.
///
/// Settee stores an attachment body once, addressed by CouchDB's digest (`md5-` + base64), and a document names
/// it in `_attachments` stubs; a Couchbase Lite blob in the body (`{"@type": "blob", "digest", "length",
/// "content_type"}`) is the attachment `blob_/<key path>` (``Blob/attachmentName(path:)``, the mapping the Swift
/// API saves blobs with). Couchbase Lite names the same bytes by their SHA-1 (`sha1-` + base64), and only by it:
/// its blob store is keyed by SHA-1. So at the protocol's edge the names are swapped, and nothing else:
///
/// - Going out (a `rev` to a pulling client), stubs and blob dictionaries carry the SHA-1 name, stubs the
///   attachment's own length (no `encoding`), as Sync Gateway sends them. Couchbase Lite drops the `blob_/…` stubs
///   that stand for blobs in the body and keeps the others (attachments written over CouchDB's API) in
///   `_attachments`, where its API reads them as blobs; it then asks for every body it lacks with `getAttachment`.
/// - Coming in (a pushed `rev`), the SHA-1 names are resolved to stored bodies, or the bodies are fetched from the
///   client and stored, and the revision is stored with CouchDB digests in its stubs and its blob dictionaries,
///   exactly as the Swift API would have saved it.
///
/// The SHA-1 name of a body is computed from its bytes the first time an exchange needs it and kept beside the
/// body (``Database/recordSHA1(_:)``).
enum BLIPAttachments {
    /// Whether a content type is worth compressing in transit (LiteCore's heuristic: not images, audio or video
    /// unless XML or JSON, nothing already packed).
    static func isCompressible(_ contentType: String?) -> Bool {
        guard let type = contentType?.lowercased() else { return true }
        for packed in ["zip", "zlib", "pkcs", "mpeg", "mp4", "crypt", ".rar", "-rar"] where type.contains(packed) { return false }
        for good in ["json", "html", "xml", "yaml"] where type.contains(good) { return true }
        return !(type.hasPrefix("image/") || type.hasPrefix("audio/") || type.hasPrefix("video/"))
    }

    /// A revision body as it goes to Couchbase Lite, and the bodies it names (SHA-1 name → stored digest).
    struct Outgoing: Sendable {
        var body: [UInt8]
        var names: [(sha1: String, digest: String)]
    }

    /// A stored revision body with its attachments named for Couchbase Lite (see the type's description), or nil
    /// when it has none. A stub whose body the database lacks goes out as stored (Couchbase Lite ignores a digest
    /// that is not SHA-1). Runs blocking store reads (and records newly computed names).
    static func outgoing(_ stored: [UInt8], database: Database) throws -> Outgoing? {
        guard stored.contains(bytes: attachmentsKey), case .object(var body) = try JSON.parse(stored),
              case .object(let stubs)? = body["_attachments"], !stubs.isEmpty else { return nil }
        var names = Names(database: database)
        var out = JSONObject()
        for (name, value) in stubs {
            guard case .object(let stub) = value, let digest = stub["digest"]?.stringValue,
                  let sha1 = try names.sha1(of: digest) else {
                out[name] = value
                continue
            }
            var sent: JSONObject = [:]
            if let type = stub["content_type"] { sent["content_type"] = type }
            sent["digest"] = .string(sha1)
            sent["length"] = stub["length"] ?? .int(Int64(names.lengths[digest] ?? 0))
            if let revpos = stub["revpos"] { sent["revpos"] = revpos }
            sent["stub"] = true
            out[name] = .object(sent)
        }
        body["_attachments"] = .object(out)
        if case .object(let renamed) = try Blob.replacingMetadata(in: .object(body), { _, blob in
            guard let digest = blob["digest"]?.stringValue, let sha1 = try names.sha1(of: digest) else { return blob }
            var renamed = blob
            renamed["digest"] = .string(sha1)
            return renamed
        }) {
            body = renamed
        }
        try database.recordSHA1(names.computed)
        return Outgoing(body: JSON.object(body).serializedBytes, names: names.resolved.map { ($0.key, $0.value) })
    }

    static let attachmentsKey = Array("\"_attachments\"".utf8)

    /// SHA-1 names of stored bodies: recorded ones read, missing ones computed from the bytes (and remembered to be
    /// recorded).
    struct Names {
        let database: Database
        /// SHA-1 name → stored digest, for every body named.
        var resolved: [String: String] = [:]
        /// Stored digest → SHA-1 name, computed here.
        var computed: [String: String] = [:]
        /// The attachments' own lengths, of bodies read here.
        var lengths: [String: Int] = [:]
        private var cache: [String: String?] = [:]

        init(database: Database) { self.database = database }

        /// The SHA-1 name of the body stored as `digest`; a `sha1-` digest names itself when the database has a
        /// body by that name. Nil when the database has no such body.
        mutating func sha1(of digest: String) throws -> String? {
            if let known = cache[digest] { return known }
            var name: String?
            if digest.hasPrefix("sha1-") {
                if let stored = try database.blobDigest(sha1: digest) {
                    name = digest
                    resolved[digest] = stored
                }
            } else if let recorded = try database.blobSHA1(digest: digest) {
                name = recorded
                resolved[recorded] = digest
            } else if let bytes = try database.blob(digest: digest) {
                let sha1 = BlobDigest.sha1(bytes)
                computed[digest] = sha1
                lengths[digest] = bytes.count
                resolved[sha1] = digest
                name = sha1
            }
            cache[digest] = name
            return name
        }
    }
}

/// The attachments of the revisions a connection is sending, which its client may fetch (`getAttachment`) or be
/// asked to prove (`proveAttachment`) while the `rev` is unanswered — Couchbase Lite asks for them before it
/// answers — as Sync Gateway allows them. Keyed by document and SHA-1 name; counted, as two revisions in flight
/// may name one body.
final class BLIPOfferedAttachments: Sendable {
    private struct Key: Hashable {
        var docID: String
        var sha1: String
    }

    private let offered = Mutex<[Key: (digest: String, count: Int)]>([:])

    /// Offers a revision's attachments (SHA-1 name → stored digest).
    func add(docID: String, _ names: [(sha1: String, digest: String)]) {
        offered.withLock { offered in
            for name in names {
                offered[Key(docID: docID, sha1: name.sha1), default: (name.digest, 0)].count += 1
            }
        }
    }

    /// Withdraws what ``add(docID:_:)`` offered.
    func remove(docID: String, _ names: [(sha1: String, digest: String)]) {
        offered.withLock { offered in
            for name in names {
                let key = Key(docID: docID, sha1: name.sha1)
                guard let entry = offered[key] else { continue }
                offered[key] = entry.count > 1 ? (entry.digest, entry.count - 1) : nil
            }
        }
    }

    /// The stored digest of a body offered by that SHA-1 name: for the document named, or (a 2.x client, which
    /// sends no `docID`) for any document being sent.
    func digest(sha1: String, docID: String?) -> String? {
        offered.withLock { offered in
            if let docID { return offered[Key(docID: docID, sha1: sha1)]?.digest }
            return offered.first { $0.key.sha1 == sha1 }?.value.digest
        }
    }
}

extension Array where Element == UInt8 {
    /// Whether `needle` occurs in these bytes (`memchr` for its first byte, `memcmp` for the rest): the cheap test
    /// before a body is parsed.
    func contains(bytes needle: [UInt8]) -> Bool {
        guard let first = needle.first else { return true }
        return withUnsafeBytes { haystack in
            needle.withUnsafeBytes { needle in
                guard let base = haystack.baseAddress, haystack.count >= needle.count else { return false }
                var offset = 0
                let last = haystack.count - needle.count
                while offset <= last {
                    guard let hit = memchr(base + offset, Int32(first), last - offset + 1) else { return false }
                    let at = base.distance(to: UnsafeRawPointer(hit))
                    if memcmp(base + at, needle.baseAddress!, needle.count) == 0 { return true }
                    offset = at + 1
                }
                return false
            }
        }
    }
}
