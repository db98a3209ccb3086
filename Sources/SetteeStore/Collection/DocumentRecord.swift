package import SetteeCore

/// A stored document as the store keeps it: the winning revision's body and, when asked for, the whole
/// revision tree and the archived bodies of replaced revisions. The server builds CouchDB's responses
/// (`_revisions`, `_conflicts`, `open_revs`, `revs_info`) from it.
package struct DocumentRecord: Sendable {
    /// The document id.
    public let id: String
    /// The sequence of the document's latest change.
    public let sequence: UInt64
    /// The winning revision.
    public let revID: RevID
    /// Whether the winning revision is a tombstone.
    public let deleted: Bool
    /// Whether the document has more than one live leaf.
    public let conflicted: Bool
    /// The winning revision's body (serialized JSON object without `_id`/`_rev`).
    public let body: [UInt8]
    /// The revision tree with the winner's body filled in (the leaves' bodies); nil when not loaded.
    public let tree: RevTree?
    /// Bodies of replaced (non-leaf) revisions the store still keeps (until compaction), as many as the read
    /// asked for (``ArchivedBodies``).
    public let archived: [RevID: [UInt8]]

    init(id: String, sequence: UInt64, revID: RevID, deleted: Bool, conflicted: Bool, body: [UInt8], tree: RevTree?,
         archived: [RevID: [UInt8]] = [:]) {
        self.id = id
        self.sequence = sequence
        self.revID = revID
        self.deleted = deleted
        self.conflicted = conflicted
        self.body = body
        self.tree = tree
        self.archived = archived
    }

    /// The body and tombstone flag of a revision, if the store still has its body: a leaf's, or a replaced
    /// revision's the read loaded from the archive.
    public func revision(_ rev: RevID) -> (body: [UInt8], deleted: Bool)? {
        if rev == revID { return (body, deleted) }
        guard let node = tree?.node(rev) else { return nil }
        guard let body = node.body ?? archived[rev] else { return nil }
        return (body, node.deleted)
    }

    /// The revisions CouchDB's `open_revs` names: `nil` = every leaf (winner first); with `latest`, a requested
    /// revision that is no longer a leaf stands for the leaves descending from it. `found` is false for a
    /// revision the tree lacks or whose body is gone (a replaced revision is found only when the read loaded it
    /// from the archive). Needs the tree (`record(id:withTree: true)`).
    public func openRevisions(_ requested: [RevID]?, latest: Bool) -> [(rev: RevID, found: Bool)] {
        guard let tree else { return [] }
        guard let requested else { return tree.rankedLeaves.map { ($0.rev, true) } }
        var out: [(RevID, Bool)] = []
        var seen = Set<RevID>()
        for rev in requested {
            guard let index = tree.index(of: rev) else {
                out.append((rev, false))
                continue
            }
            if latest && !tree.isLeaf(index) {
                for leaf in tree.leafIndices where tree.history(of: tree.nodes[leaf].rev).contains(rev) {
                    let r = tree.nodes[leaf].rev
                    if seen.insert(r).inserted { out.append((r, true)) }
                }
            } else if seen.insert(rev).inserted {
                out.append((rev, revision(rev) != nil))
            }
        }
        return out
    }

    /// The winning body parsed as a JSON object.
    public func json() throws(SetteeError) -> JSONObject {
        try DocumentRecord.parseBody(body)
    }

    package static func parseBody(_ bytes: [UInt8]) throws(SetteeError) -> JSONObject {
        var result: Result<JSONObject, SetteeError> = .success(JSONObject())
        bytes.withUnsafeBytes { raw in result = Result { () throws(SetteeError) in try parseBody(raw) } }
        return try result.get()
    }

    /// A stored body (borrowed bytes) as an object.
    package static func parseBody(_ bytes: UnsafeRawBufferPointer) throws(SetteeError) -> JSONObject {
        do {
            guard case .object(let object) = try JSON.parse(bytes) else {
                throw SetteeError(.internalError, "Stored body is not an object")
            }
            return object
        } catch let error as JSONError {
            throw SetteeError(.internalError, "Stored body is not valid JSON: \(error)", underlying: error)
        } catch let error as SetteeError {
            throw error
        } catch {
            throw SetteeError(.internalError, "\(error)")
        }
    }
}

/// Which archived bodies of replaced revisions a read loads besides the leaves' (a write that gives a revision a
/// child moves its body to the archive, where it stays until compaction, as CouchDB keeps it until then).
/// A read that asks for none (`nil`) has only the leaves' bodies (replication, plain reads).
package enum ArchivedBodies: Sendable, Equatable {
    /// Those of these revisions (`?rev=`, `open_revs`); a leaf or a revision the tree lacks costs nothing.
    case revisions([RevID])
    /// Every archived body of the document (`revs_info`, which tells which revisions are still available).
    case all
}
