/// New revision ids, computed exactly as CouchDB computes them.
///
/// CouchDB 3.5's `couch_db:new_revid/1` hashes one Erlang term:
///
/// ```erlang
/// couch_hash:md5_hash(term_to_binary([Deleted, OldStart, OldRev, Body, DigestedAtts], [{minor_version, 1}]))
/// ```
///
/// - `Deleted`: the atom `true` or `false`.
/// - `OldStart`, `OldRev`: the parent's generation and digest; `0` and `0` for a document's first revision.
///   CouchDB holds a 32-hex digest as its 16 bytes (`couch_doc:parse_rev`, either letter case) and any other
///   digest as its text, so `OldRev` is that binary.
/// - `Body`: the document as jiffy decoded it, in its own key order, without the members CouchDB takes out of a
///   body (`_id`, `_rev`, `_attachments`, `_deleted`, `_revisions`, `_revs_info`, `_local_seq`, `_conflicts`,
///   `_deleted_conflicts`; `couch_doc:transfer_fields`). Other `_` members CouchDB keeps (`_access`,
///   `_replication_*`) stay in.
/// - `DigestedAtts`: `{Name, ContentType, Md5}` for each attachment, built by a left fold, so in the REVERSE of
///   the `_attachments` order. `Md5` is the attachment's MD5 as 16 bytes. If any attachment has no MD5, CouchDB
///   gives up on hashing and the digest is a random 32-bit number in decimal; so does Settee.
///
/// For example, `PUT /db/doc {}` hashes `[false, 0, 0, {[]}, []]` and gets `1-967a00dff5e02add41819138abb3284d`
/// on CouchDB and on Settee.
///
/// Where Settee cannot give CouchDB's id (the same edit gets another, equally valid id; nothing breaks):
/// - Attachments are hashed by the `md5-` digest their stub carries. For types CouchDB compresses (`text/*`,
///   `application/json`, `application/javascript`, `application/xml` by default) that is the MD5 of the gzip
///   stream CouchDB stores, which Settee's server matches by storing them the same way (zlib level 8). Attachments
///   stored before Settee did, or pulled by the replicator (which stores and digests the bytes as received), carry
///   the MD5 of the bytes sent, and gzip from a zlib whose output differs gives another MD5: edits of such a
///   document get other ids than on CouchDB.
/// - Numbers outside `Int64` written as integers: jiffy keeps them exact (a bignum), Settee's ``JSON`` holds them
///   as doubles and stores them so; the id hashes what is stored, a float.
/// - An object with a repeated key: jiffy keeps the last value at the last key's position, ``JSONObject`` the last
///   value at the first position. Keys that differ only by Unicode normalization are one key in ``JSONObject``.
extension RevID {
    /// The id of a new revision of a document that follows `parent` (nil for a document's first revision) —
    /// the id CouchDB gives the same edit.
    ///
    /// `body` is the document as stored: its own members and `_attachments` stubs, each with `content_type`
    /// and an `md5-`base64 `digest`. Other special members (see the file's header) are left out of the hash.
    ///
    /// ```swift
    /// let first = RevID.next(after: nil, deleted: false, body: [:])
    /// first.description   // "1-967a00dff5e02add41819138abb3284d"
    /// let second = RevID.next(after: first, deleted: false, body: ["a": 1])   // 2-…
    /// ```
    public static func next(after parent: RevID?, deleted: Bool, body: JSONObject) -> RevID {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { storage in
            var scratch = ByteWriter(initialStorage: storage)
            return next(after: parent, deleted: deleted, body: body, text: &scratch)
        }
    }

    /// ``next(after:deleted:body:)``, appending the body's JSON text to `json` on the way — exactly the bytes
    /// `JSON.object(body).serialize(into:)` appends — so that a write visits its body once.
    public static func next(after parent: RevID?, deleted: Bool, body: JSONObject,
                            serializingInto json: inout [UInt8]) -> RevID {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { storage in
            var text = ByteWriter(initialStorage: storage)
            let rev = next(after: parent, deleted: deleted, body: body, text: &text)
            text.withBytes { json.append(contentsOf: $0) }
            return rev
        }
    }

    private static func next(after parent: RevID?, deleted: Bool, body: JSONObject, text: inout ByteWriter) -> RevID {
        let generation = (parent?.generation ?? 0) + 1
        var attachments: [DigestedAttachment] = []
        var digestless = false
        body.entries.withUnsafeBufferPointer { members in
            guard let base = members.baseAddress else { return }
            for i in 0..<members.count where base[i].key.utf8.count == 12 && base[i].key == "_attachments" {
                guard case .object(let stubs) = base[i].value, !stubs.isEmpty else { return }
                if let digested = digestedAttachments(stubs) { attachments = digested } else { digestless = true }
                return
            }
        }
        if digestless {
            // couch_db:new_revid: "We must have old style non-md5 attachments".
            JSONWriter.write(.object(body), sortingKeys: false, into: &text)
            return RevID(generation: generation, digest: String(UInt32.random(in: .min ... .max)))
        }
        let md5 = ErlangTermHasher.withHasher { term -> [UInt8] in
            term.versionMagic()
            term.listHeader(5)
            term.atom(deleted)
            if let parent {
                term.integer(Int64(parent.generation))
                var digest = parent.digest
                digest.withUTF8 { text in
                    if isHexDigest(text) {
                        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { raw in
                            for i in 0..<16 { raw[i] = hexValue(text[2 * i]) << 4 | hexValue(text[2 * i + 1]) }
                            term.binary(UnsafeRawBufferPointer(raw))
                        }
                    } else {
                        term.binary(UnsafeRawBufferPointer(text))
                    }
                }
            } else {
                term.integer(0)
                term.integer(0)
            }
            term.object(body, skippingSpecials: true, text: &text)
            if attachments.isEmpty {
                term.nilList()
            } else {
                term.listHeader(attachments.count)
                for attachment in attachments.reversed() {
                    term.tupleHeader(3)
                    term.binary(attachment.name)
                    term.binary(attachment.contentType)
                    attachment.md5.withUnsafeBytes { term.binary($0) }
                }
                term.nilList()
            }
            term.nilList()
            return term.finish()
        }
        return md5.withUnsafeBytes { RevID(generation: generation, digest: Hex.encode($0)) }
    }

    /// Whether a top-level member is one CouchDB takes out of a document's body before hashing it.
    @inline(__always)
    static func isBodySpecial(_ key: String) -> Bool {
        guard key.utf8.first == UInt8(ascii: "_") else { return false }
        switch key {
        case "_id", "_rev", "_attachments", "_deleted", "_revisions", "_revs_info", "_local_seq", "_conflicts",
             "_deleted_conflicts":
            return true
        default:
            return false
        }
    }

    /// One attachment's part of the hash (`{Name, Type, Md5}`).
    struct DigestedAttachment {
        var name: String
        var contentType: String
        var md5: [UInt8]
    }

    /// The attachments in `_attachments` order, or nil when one has no MD5 (no `md5-` digest). Members that
    /// are not objects are skipped, as CouchDB's `transfer_fields` skips them; a missing content type is
    /// CouchDB's default, `application/octet-stream`.
    static func digestedAttachments(_ stubs: JSONObject) -> [DigestedAttachment]? {
        var out: [DigestedAttachment] = []
        out.reserveCapacity(stubs.count)
        for member in stubs.entries {
            guard case .object(let meta) = member.value else { continue }
            guard let digest = meta["digest"]?.stringValue, digest.hasPrefix("md5-"),
                  let md5 = Base64.decode(String(digest.dropFirst(4))), !md5.isEmpty
            else { return nil }
            out.append(DigestedAttachment(name: member.key,
                                          contentType: meta["content_type"]?.stringValue ?? "application/octet-stream",
                                          md5: md5))
        }
        return out
    }
}
