import Foundation
import SetteeCore
import SetteeStore

/// Rendering stored revisions as CouchDB documents, with the options of `GET /{db}/{docid}`.
struct DocumentOutput: Sendable {
    var revs = false
    var revsInfo = false
    var conflicts = false
    var deletedConflicts = false
    var attachments = false
    var attsSince: [RevID] = []
    var localSeq = false
    /// Show how each attachment is stored (`encoding`, `encoded_length`) for gzip-stored ones.
    var attEncodingInfo = false
    /// For a multipart answer: attachments to send are marked `"follows": true` instead of carrying their bytes
    /// inline (``MultipartDocuments`` sends them as parts of their own, without reading them here).
    var attachmentsFollow = false

    init() {}

    init(_ q: QueryOptions) throws {
        let meta = try q.bool("meta")
        revs = try q.bool("revs")
        revsInfo = try q.bool("revs_info") || meta
        conflicts = try q.bool("conflicts") || meta
        deletedConflicts = try q.bool("deleted_conflicts") || meta
        attachments = try q.bool("attachments")
        localSeq = try q.bool("local_seq") || meta
        attEncodingInfo = try q.bool("att_encoding_info")
        if let since = try q.json("atts_since") {
            guard let list = since.arrayValue else { throw CouchError.badRequest("atts_since must be a JSON array") }
            attsSince = list.compactMap { $0.stringValue.flatMap(RevID.init) }
        }
    }

    /// Whether the plain splice of `_id`/`_rev` into the stored body is enough.
    var isPlain: Bool {
        !revs && !revsInfo && !conflicts && !deletedConflicts && !attachments && attsSince.isEmpty && !localSeq
            && !attEncodingInfo
    }

    /// Whether only `_revisions` (and attachment options, which matter only for bodies with attachments) is asked.
    var isPlainExceptRevs: Bool { !revsInfo && !conflicts && !deletedConflicts && !localSeq && !attEncodingInfo }

    /// Whether a stored body may hold `_attachments` (a byte search: a false positive only costs the slow path).
    static func mayHaveAttachments(_ body: [UInt8]) -> Bool {
        let needle = Array(#""_attachments""#.utf8)
        guard body.count >= needle.count else { return false }
        return body.withUnsafeBufferPointer { buf in
            var i = 0
            let end = buf.count - needle.count
            while i <= end {
                if buf[i] == 0x22 && buf[i + 1] == 0x5F {
                    var match = true
                    for k in 2..<needle.count where buf[i + k] != needle[k] { match = false; break }
                    if match { return true }
                }
                i += 1
            }
            return false
        }
    }

    /// Whether rendering needs the revision tree.
    var needsTree: Bool { revs || revsInfo || conflicts || deletedConflicts || !attsSince.isEmpty }

    /// The archived bodies a read must load to render `revs` (replaced revisions keep their bodies until
    /// compaction): every one for `revs_info`, which tells which are still available.
    func archived(_ revs: [RevID]) -> ArchivedBodies? {
        revsInfo ? .all : revs.isEmpty ? nil : .revisions(revs)
    }

    /// Renders one revision of a record as a JSON object.
    func render(_ record: DocumentRecord, rev: RevID, body: [UInt8], deleted: Bool,
                database: Database) throws -> JSONObject {
        var out: JSONObject = ["_id": .string(record.id), "_rev": .string(rev.description)]
        if deleted { out["_deleted"] = true }
        guard case .object(let props) = try JSON.parse(body) else {
            throw SetteeError(.internalError, "stored body is not an object")
        }
        for (k, v) in props { out[k] = v }
        if case .object(var atts)? = out["_attachments"], attachments || !attsSince.isEmpty {
            // atts_since: only attachments newer than the newest listed revision the document has.
            var knownGeneration = 0
            if let tree = record.tree, !attsSince.isEmpty {
                let history = Set(tree.history(of: rev))
                knownGeneration = attsSince.filter { history.contains($0) }.map(\.generation).max() ?? 0
            }
            for (name, meta) in atts {
                guard case .object(var m) = meta else { continue }
                let revpos = Int(m["revpos"]?.intValue ?? 0)
                guard attachments || revpos > knownGeneration, let digest = m["digest"]?.stringValue else { continue }
                if attachmentsFollow {
                    m.removeValue(forKey: "stub")
                    m["follows"] = true
                    atts[name] = .object(m)
                    continue
                }
                guard let data = try database.blob(digest: digest) else { continue }
                m.removeValue(forKey: "stub")
                m["data"] = .string(Base64.encode(data))
                atts[name] = .object(m)
            }
            out["_attachments"] = .object(atts)
        }
        if attEncodingInfo { try Self.addEncodingInfo(&out, database: database) }
        if let tree = record.tree {
            if conflicts && rev == record.revID && !tree.conflicts.isEmpty {
                out["_conflicts"] = .array(tree.conflicts.map { .string($0.description) })
            }
            if deletedConflicts && rev == record.revID && !tree.deletedConflicts.isEmpty {
                out["_deleted_conflicts"] = .array(tree.deletedConflicts.map { .string($0.description) })
            }
            if revs {
                let history = tree.history(of: rev)
                out["_revisions"] = ["start": .int(Int64(rev.generation)), "ids": .array(history.map { .string($0.digest) })]
            }
            if revsInfo {
                // Available: a leaf, or a replaced revision whose body is archived (until compaction).
                let info = tree.revsInfo(of: rev) { node in record.revision(node.rev) != nil }
                out["_revs_info"] = .array(info.map { ["rev": .string($0.rev.description), "status": .string($0.status.rawValue)] })
            }
        }
        if localSeq && rev == record.revID { out["_local_seq"] = .int(Int64(record.sequence)) }
        return out
    }

    /// `attachments=true` for a whole document: each attachment's data inline (base64 of the decoded bytes)
    /// instead of its stub.
    static func inlineAttachments(_ doc: inout JSONObject, database: Database) throws {
        guard case .object(var atts)? = doc["_attachments"] else { return }
        for (name, meta) in atts {
            guard case .object(var m) = meta, let digest = m["digest"]?.stringValue,
                  let data = try database.blob(digest: digest) else { continue }
            m.removeValue(forKey: "stub")
            m["data"] = .string(Base64.encode(data))
            atts[name] = .object(m)
        }
        doc["_attachments"] = .object(atts)
    }

    /// `att_encoding_info`: each gzip-stored attachment of a document gets `encoding` and `encoded_length`.
    static func addEncodingInfo(_ doc: inout JSONObject, database: Database) throws {
        guard case .object(var atts)? = doc["_attachments"] else { return }
        for (name, meta) in atts {
            guard case .object(var m) = meta, let digest = m["digest"]?.stringValue,
                  let stored = try database.blobInfo(digest: digest), let encoding = stored.encoding else { continue }
            m["encoding"] = .string(encoding)
            m["encoded_length"] = .int(Int64(stored.length))
            atts[name] = .object(m)
        }
        doc["_attachments"] = .object(atts)
    }

    /// Serialized JSON of a revision (the splice fast path when no option needs more).
    func bytes(_ record: DocumentRecord, rev: RevID, body: [UInt8], deleted: Bool, database: Database) throws -> [UInt8] {
        if isPlain { return DocumentBytes.splice(id: record.id, rev: rev.description, deleted: deleted, body: body) }
        return JSON.object(try render(record, rev: rev, body: body, deleted: deleted, database: database)).serializedBytes
    }

    /// The revisions asked for by `open_revs`: `nil` = all leaves; `latest` follows each to its newest leaves.
    static func openRevs(_ record: DocumentRecord, requested: [RevID]?, latest: Bool) -> [(RevID, found: Bool)] {
        record.openRevisions(requested, latest: latest).map { ($0.rev, $0.found) }
    }
}
