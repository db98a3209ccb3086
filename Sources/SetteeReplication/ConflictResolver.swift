import SetteeCore
public import SetteeStore

/// A conflict a pull created: the document's local revision and the remote one that now competes with it
/// (Couchbase Lite's `Conflict`).
public struct Conflict {
    public let documentID: String
    /// The best local live leaf (nil if it is a tombstone).
    public let localDocument: Document?
    /// The pulled revision (nil if it is a tombstone).
    public let remoteDocument: Document?
}

/// Decides a pull conflict (Couchbase Lite's `ConflictResolverProtocol`).
///
/// Return `localDocument` or `remoteDocument` to keep one side (the other branch is tombstoned), a new
/// `MutableDocument` (or any document with other content) to store a merge as a child of the remote revision
/// (the local branch is tombstoned), or nil to delete the document.
public protocol ConflictResolverProtocol: Sendable {
    func resolve(conflict: Conflict) -> Document?
}

/// Ready-made resolvers.
public enum ConflictResolver {
    /// Couchbase Lite's default rule: a deletion wins; between live revisions the longer history (higher
    /// generation), then the greater revision id. What a replicator configured in Couchbase Lite's shape
    /// (``ReplicatorConfiguration/init(target:)``) uses when no resolver is set, and what a custom resolver can
    /// fall back to, as Couchbase Lite's documentation shows.
    public static let `default`: any ConflictResolverProtocol = CouchbaseLiteDefault()
    /// The same as ``default``, named for what it is.
    public static let couchbaseLite: any ConflictResolverProtocol = CouchbaseLiteDefault()
    /// The revision CouchDB's rule would pick (live, then higher generation, then greater revision id) wins on
    /// every node; the loser is tombstoned, so no conflict remains and the document stays as CouchDB shows it.
    public static let couchDB: any ConflictResolverProtocol = Deterministic()
    /// The local revision wins.
    public static let localWins: any ConflictResolverProtocol = Custom { $0.localDocument }
    /// The remote revision wins.
    public static let remoteWins: any ConflictResolverProtocol = Custom { $0.remoteDocument }

    /// A resolver from a closure.
    public static func custom(_ resolve: @escaping @Sendable (Conflict) -> Document?) -> any ConflictResolverProtocol {
        Custom(body: resolve)
    }

    struct Custom: ConflictResolverProtocol {
        let body: @Sendable (Conflict) -> Document?
        func resolve(conflict: Conflict) -> Document? { body(conflict) }
    }

    struct CouchbaseLiteDefault: ConflictResolverProtocol {
        func resolve(conflict: Conflict) -> Document? {
            guard let local = conflict.localDocument, let remote = conflict.remoteDocument else { return nil }
            let l = local.revisionID.flatMap(RevID.init), r = remote.revisionID.flatMap(RevID.init)
            guard let l, let r else { return remote }
            return l < r ? remote : local
        }
    }

    struct Deterministic: ConflictResolverProtocol {
        func resolve(conflict: Conflict) -> Document? {
            guard let local = conflict.localDocument else { return conflict.remoteDocument }
            guard let remote = conflict.remoteDocument else { return local }
            let l = local.revisionID.flatMap(RevID.init), r = remote.revisionID.flatMap(RevID.init)
            guard let l, let r else { return local }
            return l < r ? remote : local  // CouchDB's order (RevID's), as the winning revision is picked
        }
    }
}

/// Applying a resolver to conflicted documents of a local collection.
enum ConflictResolution {
    /// Resolves the conflicts the given pulled revisions created.
    static func resolve(_ pulled: [ReplicatedRevision], in collection: SetteeStore.Collection,
                        resolver: any ConflictResolverProtocol) async throws {
        var remoteRevs: [String: [RevID]] = [:], remoteDeletions: [String: [RevID]] = [:]
        for r in pulled {
            if r.deleted { remoteDeletions[r.id, default: []].append(r.rev) } else { remoteRevs[r.id, default: []].append(r.rev) }
        }
        let work = remoteRevs, deletions = remoteDeletions
        try await Database.offload {
            for (id, revs) in work { try resolve(id: id, pulled: revs, collection, resolver) }
            for (id, revs) in deletions { try resolveDeletion(id: id, pulled: revs, collection, resolver) }
        }
    }

    /// A pulled deletion that is still a leaf beside local live revisions: the peer deleted what this side went on
    /// editing. CouchDB counts only live leaves as conflicts (the live revision simply wins), but a resolver is
    /// asked, with no remote document, as Couchbase Lite asks it: nil (its default) deletes the document, the local
    /// document keeps it, a new document is stored on the deletion's branch.
    private static func resolveDeletion(id: String, pulled: [RevID], _ c: SetteeStore.Collection,
                                        _ resolver: any ConflictResolverProtocol) throws {
        guard let record = try c.record(id: id, withTree: true), let tree = record.tree else { return }
        let leaves = tree.rankedLeaves
        guard let remote = pulled.first(where: { rev in leaves.contains { $0.rev == rev && $0.deleted } }) else { return }
        let live = leaves.filter { !$0.deleted }.map(\.rev)
        guard let local = live.first else { return }
        let localDoc = try c.document(id: id, revision: local)
        guard let resolved = resolver.resolve(conflict: Conflict(documentID: id, localDocument: localDoc, remoteDocument: nil)) else {
            // The deletion wins: every live branch is closed.
            let writes = live.map { RevisionWrite(id: id, body: [:], deleted: true, mode: .edit(parent: $0)) }
            for outcome in try c.write(writes, as: .owner) {
                if case .failure(let e) = outcome, e.code != .conflict { throw e }
            }
            return
        }
        if resolved.revisionID.flatMap(RevID.init) == local && !(resolved is MutableDocument) { return }
        // A merge: stored on the deletion's branch, the local branches closed.
        let merged = try resolved.revisionBody(for: c.database, generation: remote.generation + 1)
        var writes = [RevisionWrite(id: id, body: merged.body, mode: .edit(parent: remote), blobs: merged.blobs)]
        writes += live.map { RevisionWrite(id: id, body: [:], deleted: true, mode: .edit(parent: $0)) }
        for outcome in try c.write(writes, as: .owner) {
            if case .failure(let e) = outcome, e.code != .conflict { throw e }
        }
    }

    /// Resolves every conflicted document (after a restart: a resolution that did not finish is redone).
    static func resolveAll(in collection: SetteeStore.Collection, resolver: any ConflictResolverProtocol) async throws {
        try await Database.offload {
            for id in try collection.conflictedDocumentIDs() { try resolve(id: id, pulled: [], collection, resolver) }
        }
    }

    private static func resolve(id: String, pulled: [RevID], _ c: SetteeStore.Collection,
                                _ resolver: any ConflictResolverProtocol) throws {
        for _ in 0..<16 {
            guard let record = try c.record(id: id, withTree: true), record.conflicted, let tree = record.tree else { return }
            let live = tree.rankedLeaves.filter { !$0.deleted }.map(\.rev)
            guard live.count > 1 else { return }
            // The remote side: a pulled revision that is still a live leaf; else the runner-up leaf.
            let remote = pulled.first { live.contains($0) } ?? live[1]
            let local = live.first { $0 != remote } ?? live[0]
            let localDoc = try c.document(id: id, revision: local)
            let remoteDoc = try c.document(id: id, revision: remote)
            let conflict = Conflict(documentID: id, localDocument: localDoc, remoteDocument: remoteDoc)
            let resolved = resolver.resolve(conflict: conflict)
            var writes: [RevisionWrite] = []
            func tombstone(_ rev: RevID) {
                writes.append(RevisionWrite(id: id, body: [:], deleted: true, mode: .edit(parent: rev)))
            }
            if let resolved {
                let chosen = resolved.revisionID.flatMap(RevID.init)
                if chosen == remote && !(resolved is MutableDocument) {
                    tombstone(local)
                } else if chosen == local && !(resolved is MutableDocument) {
                    tombstone(remote)
                } else {
                    // A merge: a new revision on the remote branch, the local branch closed.
                    let merged = try resolved.revisionBody(for: c.database, generation: remote.generation + 1)
                    writes.append(RevisionWrite(id: id, body: merged.body, mode: .edit(parent: remote), blobs: merged.blobs))
                    tombstone(local)
                }
            } else {
                tombstone(local)
                tombstone(remote)
            }
            for outcome in try c.write(writes, as: .owner) {
                if case .failure(let e) = outcome, e.code != .conflict { throw e }
            }
        }
    }
}
