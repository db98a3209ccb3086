import Crypto
import SetteeBLIP
import SetteeCore
import SetteeStore

/// Attachments as Couchbase Lite's protocol carries them: `_attachments` stubs (and blob dictionaries) in a
/// revision's body, named by `sha1-` digests, whose bodies travel separately (`getAttachment`). Settee's store names
/// the same bodies by CouchDB's `md5-` digests, so a pulled body is renamed on arrival and a pushed one on departure.
/// Couchbase Lite's names for attachment bodies, for both ends of its protocol (the server's `_blipsync` and the
/// `ws://` client).
package enum BlobDigest {
    /// `sha1-` + base64 of the SHA-1 of `bytes`: Couchbase Lite's (and Sync Gateway's) name for a blob.
    package static func sha1(_ bytes: [UInt8]) -> String {
        "sha1-" + Base64.encode(Array(Insecure.SHA1.hash(data: bytes)))
    }

    /// The answer to `proveAttachment`: the SHA-1 of the nonce's length (one byte), the nonce and the attachment's
    /// bytes, named as a digest (`sha1-` + base64), as LiteCore and Sync Gateway compute it.
    package static func proof(nonce: [UInt8], data: [UInt8]) -> String {
        var hasher = Insecure.SHA1()
        hasher.update(data: [UInt8(truncatingIfNeeded: nonce.count)])
        hasher.update(data: nonce)
        hasher.update(data: data)
        return "sha1-" + Base64.encode(Array(hasher.finalize()))
    }
}

enum BLIPAttachments {
    /// Whether `bytes` are the body `digest` names (`sha1-` or `md5-`; another kind can't be checked and passes).
    static func matches(_ bytes: [UInt8], digest: String) -> Bool {
        if digest.hasPrefix("sha1-") { return BlobDigest.sha1(bytes) == digest }
        if digest.hasPrefix("md5-") { return Database.attachmentDigest(bytes) == digest }
        return true
    }

    /// Renames the digests `renames` lists in a revision's body: its `_attachments` stubs, and its blobs' metadata
    /// (found as the store finds them, ``Blob/replacingMetadata(in:path:_:)``); nothing else in the body.
    static func renameDigests(in body: inout JSONObject, _ renames: [String: String]) {
        guard !renames.isEmpty else { return }
        func renamed(_ meta: JSONObject) -> JSONObject {
            guard let digest = meta["digest"]?.stringValue, let name = renames[digest] else { return meta }
            var meta = meta
            meta["digest"] = .string(name)
            return meta
        }
        if case .object(var stubs)? = body["_attachments"] {
            for name in stubs.keys { if case .object(let stub)? = stubs[name] { stubs[name] = .object(renamed(stub)) } }
            body["_attachments"] = .object(stubs)
        }
        if case .object(let replaced) = Blob.replacingMetadata(in: .object(body), { _, meta in renamed(meta) }) {
            body = replaced
        }
    }
}

extension BLIPClientConnection {
    /// Fetches the bodies of a pulled revision's attachments that the local database can't already have (`revpos`
    /// newer than the newest ancestor it has, as CouchDB's replicator decides) with `getAttachment`, checks each
    /// against its digest, and renames `sha1-` digests to the `md5-` ones Settee stores bodies under.
    func fetchAttachments(of revision: inout ReplicatedRevision, known: [RevID]) async throws {
        guard case .object(let attachments)? = revision.body["_attachments"] else { return }
        let knownGeneration = known.map(\.generation).max() ?? 0
        var renames: [String: String] = [:]
        for (name, meta) in attachments {
            guard case .object(let stub) = meta, let digest = stub["digest"]?.stringValue else { continue }
            let revpos = Int(stub["revpos"]?.intValue ?? Int64(revision.rev.generation))
            guard revpos > knownGeneration, renames[digest] == nil else { continue }
            let reply = try await request(.request(profile: "getAttachment",
                                                   properties: ["digest": digest, "docID": revision.id]))
            if let error = reply.errorInfo { throw self.error(error, "getAttachment \(name) of \(revision.id)") }
            guard BLIPAttachments.matches(reply.body, digest: digest) else {
                throw ReplicationError(.badRequest, "the body of attachment \(name) of \(revision.id) does not match its digest \(digest)")
            }
            let stored = Database.attachmentDigest(reply.body)
            revision.attachments[stored] = reply.body
            renames[digest] = stored
        }
        BLIPAttachments.renameDigests(in: &revision.body, renames.filter { $0.key != $0.value })
    }
}
