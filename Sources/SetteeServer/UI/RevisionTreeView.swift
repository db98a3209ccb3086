import Foundation
import SetteeCore

/// A document's revision tree as the admin UI draws it: built from every leaf's ancestry (`open_revs=all` with
/// `revs=true`), laid out left to right by generation, one row per branch, and rendered as inline SVG.
struct RevisionTreeView {
    struct Node {
        let rev: String
        let generation: Int
        var children: [String] = []
        var parent: String?
        var isLeaf = false
        var deleted = false
        var x = 0
        var y = 0
    }

    private(set) var nodes: [String: Node] = [:]
    private(set) var roots: [String] = []
    /// Live leaves, deleted leaves, and the winner by CouchDB's rule.
    private(set) var winner: String?
    private(set) var leaves: [(rev: String, deleted: Bool)] = []

    /// `leaves`: each leaf's `_rev`, `_deleted` and `_revisions` (`{start, ids}`, newest first).
    init(leaves input: [(rev: String, deleted: Bool, start: Int, ids: [String])]) {
        // The same leaves in SetteeCore's tree, for CouchDB's winner rule (live beats deleted, then the higher
        // generation, then the greater revision id).
        var revTree = RevTree()
        for leaf in input {
            var path: [String] = []
            for (i, digest) in leaf.ids.enumerated() { path.append("\(leaf.start - i)-\(digest)") }
            if path.isEmpty { path = [leaf.rev] }
            // path[0] is the leaf, path.last the oldest revision still in the tree.
            for (i, rev) in path.enumerated() {
                if nodes[rev] == nil {
                    nodes[rev] = Node(rev: rev, generation: RevID(rev)?.generation ?? (leaf.start - i))
                }
                if i + 1 < path.count {
                    let parent = path[i + 1]
                    nodes[rev]?.parent = parent
                    if nodes[parent] == nil {
                        nodes[parent] = Node(rev: parent, generation: RevID(parent)?.generation ?? (leaf.start - i - 1))
                    }
                    if !(nodes[parent]!.children.contains(rev)) { nodes[parent]!.children.append(rev) }
                }
            }
            _ = try? revTree.insert(path: path.compactMap { RevID($0) }, deleted: leaf.deleted, body: nil)
            nodes[leaf.rev]?.isLeaf = true
            nodes[leaf.rev]?.deleted = leaf.deleted
            leaves.append((leaf.rev, leaf.deleted))
        }
        roots = nodes.values.filter { $0.parent == nil }.map(\.rev).sorted(by: RevisionTreeView.order)
        winner = revTree.winner?.rev.description
        // The winner's branch goes on top.
        if let winner {
            var onWinnerPath = Set<String>()
            var cursor: String? = winner
            while let rev = cursor { onWinnerPath.insert(rev); cursor = nodes[rev]?.parent }
            for key in nodes.keys {
                nodes[key]!.children.sort { a, b in
                    let wa = onWinnerPath.contains(a), wb = onWinnerPath.contains(b)
                    return wa != wb ? wa : RevisionTreeView.order(a, b)
                }
            }
        }
        layout()
    }

    private static func order(_ a: String, _ b: String) -> Bool {
        let ga = RevID(a)?.generation ?? 0, gb = RevID(b)?.generation ?? 0
        return ga != gb ? ga < gb : a > b
    }

    private mutating func layout() {
        let minGeneration = nodes.values.map(\.generation).min() ?? 1
        var row = 0
        func place(_ rev: String) {
            guard var node = nodes[rev] else { return }
            node.x = node.generation - minGeneration
            if node.children.isEmpty {
                node.y = row
                row += 1
            } else {
                for child in node.children { place(child) }
                node.y = nodes[node.children[0]]!.y
            }
            nodes[rev] = node
        }
        for root in roots { place(root) }
    }

    var conflicts: [String] { leaves.filter { !$0.deleted && $0.rev != winner }.map(\.rev).sorted() }
    var deletedLeaves: [String] { leaves.filter(\.deleted).map(\.rev).sorted() }

    /// The tree as an SVG element. Nodes link to `href(rev)`; classes mark the winner, conflicts, tombstones and
    /// the revisions whose bodies are gone (non-leaf revisions keep no body after compaction).
    func svg(href: (String) -> String) -> String {
        let dx = 150, dy = 56, left = 60, top = 28
        let width = (nodes.values.map(\.x).max() ?? 0) * dx + 2 * left
        let height = ((nodes.values.map(\.y).max() ?? 0) + 1) * dy + top
        var out = "<svg class=\"revtree\" id=\"revtree\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\" role=\"img\" aria-label=\"Revision tree\">"
        func point(_ n: Node) -> (Int, Int) { (left + n.x * dx, top + n.y * dy) }
        for node in nodes.values.sorted(by: { $0.rev < $1.rev }) {
            guard let parent = node.parent.flatMap({ nodes[$0] }) else { continue }
            let (x1, y1) = point(parent), (x2, y2) = point(node)
            let path = y1 == y2 ? "M\(x1) \(y1) L\(x2) \(y2)" : "M\(x1) \(y1) C\(x1 + dx / 2) \(y1) \(x2 - dx / 2) \(y2) \(x2) \(y2)"
            out += "<path class=\"edge\" d=\"\(path)\"/>"
        }
        for node in nodes.values.sorted(by: { $0.rev < $1.rev }) {
            let (x, y) = point(node)
            var classes = ["rev"]
            var state = "ancestor"
            if node.isLeaf {
                if node.rev == winner { classes.append("winner"); state = "winner" }
                else if node.deleted { classes.append("tombstone"); state = "deleted" }
                else { classes.append("conflict"); state = "conflict" }
            }
            if node.isLeaf && node.deleted && node.rev == winner { classes.append("tombstone") }
            let label = UIHTML.escape(UIFormat.shortRev(node.rev))
            // Leaves link to their body; ancestors are not linked (theirs last only until compaction).
            let tag = node.isLeaf ? "a" : "g"
            let link = node.isLeaf ? "href=\"\(UIHTML.escape(href(node.rev)))\" " : ""
            out += "<\(tag) \(link)class=\"\(classes.joined(separator: " "))\" data-rev=\"\(UIHTML.escape(node.rev))\" data-state=\"\(state)\">"
            out += "<title>\(UIHTML.escape(node.rev)) (\(state))</title>"
            out += "<circle cx=\"\(x)\" cy=\"\(y)\" r=\"9\"/>"
            if node.isLeaf && node.deleted {
                out += "<path class=\"cross\" d=\"M\(x - 5) \(y - 5) L\(x + 5) \(y + 5) M\(x + 5) \(y - 5) L\(x - 5) \(y + 5)\"/>"
            }
            out += "<text x=\"\(x)\" y=\"\(y + 24)\" text-anchor=\"middle\">\(label)</text></\(tag)>"
        }
        return out + "</svg>"
    }
}

enum UIHTML {
    static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
