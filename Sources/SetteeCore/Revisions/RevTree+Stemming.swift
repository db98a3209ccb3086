/// Stemming: forgetting old ancestors beyond `revs_limit`.
extension RevTree {
    /// Keeps, on every leaf's path, only the newest `limit` revisions; older ones are removed and their
    /// surviving children become roots. `limit` below 1 is treated as 1.
    ///
    /// - Returns: the number of revisions removed.
    @discardableResult
    public mutating func stem(limit: Int) -> Int {
        let limit = max(1, limit)
        guard nodes.count > limit else { return 0 }
        var keep = [Bool](repeating: false, count: nodes.count)
        for leaf in leafIndices {
            var i = leaf
            var depth = 0
            while depth < limit {
                keep[i] = true
                depth += 1
                let p = nodes[i].parent
                if p < 0 { break }
                i = p
            }
        }
        let removed = keep.lazy.filter { !$0 }.count
        guard removed > 0 else { return 0 }
        var newIndex = [Int](repeating: -1, count: nodes.count)
        var kept: [Node] = []
        kept.reserveCapacity(nodes.count - removed)
        for i in nodes.indices where keep[i] {
            newIndex[i] = kept.count
            var node = nodes[i]
            node.parent = node.parent >= 0 ? newIndex[node.parent] : -1
            kept.append(node)
        }
        nodes = kept
        return removed
    }
}
