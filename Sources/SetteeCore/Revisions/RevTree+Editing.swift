/// Adding revisions: local edits (a child of a known leaf) and replicated revisions (a path of ancestors).
extension RevTree {
    /// What went wrong adding a revision.
    public enum EditError: Error, Sendable, Equatable {
        /// The parent is not a leaf, not in the tree, or a first revision was added to a live document.
        case conflict
        /// The revision history is not consecutive generations or is empty.
        case invalidHistory
    }

    /// Adds a new revision as a child of `parent` (a local edit, CouchDB's `new_edits=true`).
    ///
    /// - `parent == nil` creates the document's first revision; it is allowed only when the tree is empty.
    ///   (The store turns a create over a deleted document into an edit of the tombstone.)
    /// - Otherwise `parent` must be a leaf of the tree.
    /// - Throws: ``EditError/conflict`` when the edit would not extend a leaf. The tree is unchanged.
    public mutating func addChild(_ rev: RevID, of parent: RevID?, deleted: Bool, body: [UInt8]?) throws(EditError) {
        guard let parent else {
            guard nodes.isEmpty, rev.generation == 1 else { throw .conflict }
            nodes = [Node(rev: rev, parent: -1, deleted: deleted, body: body)]
            return
        }
        guard let p = index(of: parent), isLeaf(p), rev.generation == parent.generation + 1, !contains(rev) else {
            throw .conflict
        }
        nodes[p].body = nil
        insertNode(Node(rev: rev, parent: p, deleted: deleted, body: body))
    }

    /// Inserts a replicated revision with its ancestry (CouchDB's `new_edits=false` with `_revisions`).
    ///
    /// `path` lists the revision first, then its ancestors newest to oldest, with consecutive generations.
    /// The part of the path the tree already holds is matched; the rest is grafted below the newest match
    /// (or becomes a new root branch when nothing matches). Inserting a revision the tree already has
    /// changes nothing.
    ///
    /// - Returns: whether the tree changed.
    /// - Throws: ``EditError/invalidHistory`` for an empty path or non-consecutive generations.
    @discardableResult
    public mutating func insert(path: [RevID], deleted: Bool, body: [UInt8]?) throws(EditError) -> Bool {
        guard let newest = path.first else { throw .invalidHistory }
        for (k, rev) in path.enumerated() where rev.generation != newest.generation - k {
            throw .invalidHistory
        }
        var matched = -1  // position in `path` of the newest revision already in the tree
        var parentIndex = -1
        for (k, rev) in path.enumerated() {
            if let i = index(of: rev) {
                matched = k
                parentIndex = i
                break
            }
        }
        if matched == 0 { return false }
        let graftCount = matched < 0 ? path.count : matched
        if parentIndex >= 0 { nodes[parentIndex].body = nil }
        // Graft oldest first so each new node's parent already exists.
        var parentRev: RevID? = parentIndex >= 0 ? nodes[parentIndex].rev : nil
        for k in stride(from: graftCount - 1, through: 0, by: -1) {
            let p = parentRev.flatMap { index(of: $0) } ?? -1
            let isNewest = k == 0
            insertNode(Node(rev: path[k], parent: p, deleted: isNewest ? deleted : false, body: isNewest ? body : nil))
            parentRev = path[k]
        }
        return true
    }

    /// Inserts a node at its sorted position and shifts parent indices at or after it.
    private mutating func insertNode(_ node: Node) {
        var lo = 0, hi = nodes.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if RevTree.storedBefore(nodes[mid].rev, node.rev) { lo = mid + 1 } else { hi = mid }
        }
        let pos = lo
        if pos < nodes.count {
            for i in nodes.indices where nodes[i].parent >= pos { nodes[i].parent += 1 }
        }
        var node = node
        if node.parent >= pos { node.parent += 1 }
        nodes.insert(node, at: pos)
    }

    /// Replaces the body kept for a revision (the store uses this to move the winner's body in and out).
    public mutating func setBody(_ body: [UInt8]?, for rev: RevID) {
        if let i = index(of: rev) { nodes[i].body = body }
    }

    /// Drops every body except those of leaves (done after each edit; kept here for decoded trees).
    public mutating func dropNonLeafBodies() {
        var hasChild = [Bool](repeating: false, count: nodes.count)
        for node in nodes where node.parent >= 0 { hasChild[node.parent] = true }
        for i in nodes.indices where hasChild[i] { nodes[i].body = nil }
    }
}
