import Crypto
import SetteeBLIP
import SetteeCore

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
    /// CouchDB's digest of an attachment body: `md5-` and the MD5 in base64.
    static func md5Digest(_ bytes: [UInt8]) -> String {
        "md5-" + Base64.encode(MD5.hash(bytes))
    }

    /// Whether `bytes` are the body `digest` names (`sha1-` or `md5-`; another kind can't be checked and passes).
    static func matches(_ bytes: [UInt8], digest: String) -> Bool {
        if digest.hasPrefix("sha1-") { return BlobDigest.sha1(bytes) == digest }
        if digest.hasPrefix("md5-") { return md5Digest(bytes) == digest }
        return true
    }

    /// Replaces every `digest` in `body` (its `_attachments` stubs and blob dictionaries anywhere) that `renames`
    /// lists.
    static func renameDigests(in value: inout JSON, _ renames: [String: String]) {
        switch value {
        case .object(var object):
            if let digest = object["digest"]?.stringValue, let renamed = renames[digest] {
                object["digest"] = .string(renamed)
            }
            for key in object.keys {
                guard var member = object[key], member.isContainer else { continue }
                renameDigests(in: &member, renames)
                object[key] = member
            }
            value = .object(object)
        case .array(var items):
            for i in items.indices where items[i].isContainer { renameDigests(in: &items[i], renames) }
            value = .array(items)
        default:
            break
        }
    }
}

extension JSON {
    /// An object or an array.
    fileprivate var isContainer: Bool {
        switch self {
        case .object, .array: true
        default: false
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
            let stored = BLIPAttachments.md5Digest(reply.body)
            revision.attachments[stored] = reply.body
            renames[digest] = stored
        }
        guard !renames.isEmpty else { return }
        var body = JSON.object(revision.body)
        BLIPAttachments.renameDigests(in: &body, renames.filter { $0.key != $0.value })
        if case .object(let renamed) = body { revision.body = renamed }
    }
}
