import Testing
@testable import SetteeCore

private func r(_ s: String) -> RevID { RevID(s)! }
private func body(_ s: String) -> [UInt8] { Array(s.utf8) }

@Suite struct RevIDTests {
    @Test func parsesGenerationAndDigest() {
        let rev = RevID("12-abcdef")
        #expect(rev?.generation == 12)
        #expect(rev?.digest == "abcdef")
        #expect(rev?.description == "12-abcdef")
    }

    @Test func rejectsMalformedRevisionIDs() {
        for bad in ["", "abc", "-abc", "0-abc", "1-", "x-abc", "1 -abc", "1-a b", "99999999999999999999-a"] {
            #expect(RevID(bad) == nil, "\(bad) should not parse")
        }
    }

    /// Revision ids are part of the replication protocol's data: a change to how they are computed would give the
    /// same edit different ids on nodes running different versions (and on CouchDB). These are CouchDB 3.5's ids
    /// for the same edits (computed with `couch_db:new_revid/1`'s term; see CouchRevIDTests for recorded ones).
    @Test(arguments: [
        (300, true, "301-9e3985f05429bbce879602dc26e06526"),
        (2_147_483_648, false, "2147483649-1615cf49b1dc35de0263433834ad471f"),
    ])
    func revisionIDsAreStableAcrossVersions(generation: Int, deleted: Bool, expected: String) {
        let parent = RevID(generation: generation, digest: "0123456789abcdef0123456789abcdef")
        #expect(RevID.next(after: parent, deleted: deleted, body: ["a": 1]).description == expected)
        #expect(RevID.next(after: nil, deleted: false, body: [:]).description == "1-967a00dff5e02add41819138abb3284d")
        var written: [UInt8] = []
        parent.write(into: &written)
        RevID("1234567890123-x")!.write(into: &written)
        #expect(written == body("\(generation)-0123456789abcdef0123456789abcdef1234567890123-x"))
    }

    @Test func sameEditOnTwoNodesGivesSameRevID() {
        let parent = r("1-aaa")
        let a = RevID.next(after: parent, deleted: false, body: ["x": 1])
        let b = RevID.next(after: parent, deleted: false, body: ["x": 1])
        #expect(a == b)
        #expect(a.generation == 2)
        #expect(a.digest.count == 32)
    }

    @Test func digestDependsOnParentDeletedFlagAndBody() {
        let base = RevID.next(after: r("1-aaa"), deleted: false, body: [:])
        #expect(base != RevID.next(after: r("1-bbb"), deleted: false, body: [:]))
        #expect(base != RevID.next(after: r("1-aaa"), deleted: true, body: [:]))
        #expect(base != RevID.next(after: r("1-aaa"), deleted: false, body: ["a": 1]))
    }

    @Test func ordersByGenerationThenDigest() {
        #expect(r("2-a") < r("10-a"))
        #expect(r("3-abc") < r("3-abd"))
    }
}

@Suite struct RevTreeTests {
    /// 1-a ── 2-b, 1-a ── 2-c: two live branches of the same length.
    func twoBranches() throws -> RevTree {
        var tree = RevTree()
        try tree.addChild(r("1-a"), of: nil, deleted: false, body: body("{}"))
        try tree.addChild(r("2-b"), of: r("1-a"), deleted: false, body: body(#"{"v":"b"}"#))
        try tree.insert(path: [r("2-c"), r("1-a")], deleted: false, body: body(#"{"v":"c"}"#))
        return tree
    }

    @Test func firstRevisionCreatesARoot() throws {
        var tree = RevTree()
        try tree.addChild(r("1-a"), of: nil, deleted: false, body: body("{}"))
        #expect(tree.winner?.rev == r("1-a"))
        #expect(tree.leafIndices.count == 1)
    }

    @Test func editingANonLeafIsAConflict() throws {
        var tree = RevTree()
        try tree.addChild(r("1-a"), of: nil, deleted: false, body: body("{}"))
        try tree.addChild(r("2-b"), of: r("1-a"), deleted: false, body: body("{}"))
        #expect(throws: RevTree.EditError.conflict) {
            try tree.addChild(r("2-c"), of: r("1-a"), deleted: false, body: body("{}"))
        }
        #expect(throws: RevTree.EditError.conflict) {
            try tree.addChild(r("1-z"), of: nil, deleted: false, body: body("{}"))
        }
        #expect(tree.count == 2)
    }

    @Test func nonLeafBodiesAreDroppedWhenAChildIsAdded() throws {
        var tree = RevTree()
        try tree.addChild(r("1-a"), of: nil, deleted: false, body: body("{}"))
        try tree.addChild(r("2-b"), of: r("1-a"), deleted: false, body: body("{}"))
        #expect(tree.node(r("1-a"))?.body == nil)
        #expect(tree.node(r("2-b"))?.body != nil)
    }

    @Test func higherDigestWinsBetweenEqualGenerations() throws {
        let tree = try twoBranches()
        #expect(tree.winner?.rev == r("2-c"))
        #expect(tree.conflicts == [r("2-b")])
        #expect(tree.deletedConflicts == [])
    }

    @Test func higherGenerationWins() throws {
        var tree = try twoBranches()
        try tree.addChild(r("3-a"), of: r("2-b"), deleted: false, body: body("{}"))
        #expect(tree.winner?.rev == r("3-a"))
        #expect(tree.conflicts == [r("2-c")])
    }

    @Test func deletedWinnerLosesToLiveBranch() throws {
        var tree = try twoBranches()
        try tree.addChild(r("3-d"), of: r("2-c"), deleted: true, body: body("{}"))
        #expect(tree.winner?.rev == r("2-b"))
        #expect(tree.conflicts == [])
        #expect(tree.deletedConflicts == [r("3-d")])
    }

    @Test func allLeavesDeletedMeansHighestTombstoneWins() throws {
        var tree = try twoBranches()
        try tree.addChild(r("3-d"), of: r("2-c"), deleted: true, body: body("{}"))
        try tree.addChild(r("3-e"), of: r("2-b"), deleted: true, body: body("{}"))
        #expect(tree.winner?.rev == r("3-e"))
        #expect(tree.winner?.deleted == true)
    }

    @Test func insertingAKnownRevisionChangesNothing() throws {
        var tree = try twoBranches()
        let before = tree
        let changed = try tree.insert(path: [r("2-b"), r("1-a")], deleted: false, body: body("{}"))
        #expect(!changed)
        #expect(tree == before)
    }

    @Test func insertGraftsBelowTheNewestKnownAncestor() throws {
        var tree = try twoBranches()
        try tree.insert(path: [r("4-x"), r("3-w"), r("2-b"), r("1-a")], deleted: false, body: body("{}"))
        #expect(tree.history(of: r("4-x")) == [r("4-x"), r("3-w"), r("2-b"), r("1-a")])
        #expect(tree.winner?.rev == r("4-x"))
    }

    @Test func insertWithUnknownAncestryStartsANewBranch() throws {
        var tree = try twoBranches()
        try tree.insert(path: [r("2-q"), r("1-p")], deleted: false, body: body("{}"))
        #expect(tree.leafIndices.count == 3)
        #expect(tree.history(of: r("2-q")) == [r("2-q"), r("1-p")])
    }

    @Test func insertRejectsNonConsecutiveHistory() {
        var tree = RevTree()
        #expect(throws: RevTree.EditError.invalidHistory) {
            try tree.insert(path: [r("3-a"), r("1-b")], deleted: false, body: nil)
        }
        #expect(throws: RevTree.EditError.invalidHistory) {
            try tree.insert(path: [], deleted: false, body: nil)
        }
        #expect(tree.isEmpty)
    }

    @Test func stemmingKeepsTheNewestRevisionsOfEachPath() throws {
        var tree = RevTree()
        var parent: RevID?
        for g in 1...10 {
            let rev = RevID(generation: g, digest: "d\(g)")
            try tree.addChild(rev, of: parent, deleted: false, body: body("{}"))
            parent = rev
        }
        let removed = tree.stem(limit: 3)
        #expect(removed == 7)
        #expect(tree.history(of: r("10-d10")) == [r("10-d10"), r("9-d9"), r("8-d8")])
        #expect(tree.nodes.first?.parent == -1)
        // A replicated child of a stemmed revision still finds its parent.
        try tree.insert(path: [r("11-x"), r("10-d10"), r("9-d9"), r("8-d8"), r("7-d7")], deleted: false, body: nil)
        #expect(tree.winner?.rev == r("11-x"))
        #expect(!tree.contains(r("7-d7")))
    }

    @Test func stemmingKeepsSharedAncestorsOfBranches() throws {
        var tree = try twoBranches()
        try tree.addChild(r("3-x"), of: r("2-b"), deleted: false, body: body("{}"))
        tree.stem(limit: 2)
        #expect(tree.contains(r("1-a")))  // 2-c's path still needs it
        #expect(tree.contains(r("2-b")))
    }

    @Test func revsDiffReportsMissingAndPossibleAncestors() throws {
        let tree = try twoBranches()
        let diff = tree.revsDiff([r("2-b"), r("3-z"), r("1-a"), r("3-z")])
        #expect(diff.missing == [r("3-z")])
        #expect(Set(diff.possibleAncestors) == [r("2-b"), r("2-c")])
        #expect(tree.revsDiff([r("2-b")]).missing.isEmpty)
        #expect(tree.revsDiff([r("1-q")]).possibleAncestors.isEmpty)
    }

    @Test func revsInfoWalksTheWinnerPath() throws {
        var tree = try twoBranches()
        try tree.addChild(r("3-d"), of: r("2-c"), deleted: true, body: body("{}"))
        let info = tree.revsInfo(of: r("3-d")) { $0.body != nil }
        #expect(info.map(\.rev) == [r("3-d"), r("2-c"), r("1-a")])
        #expect(info.map(\.status) == [.deleted, .missing, .missing])
    }

    @Test func purgingALeafRemovesItsUnsharedAncestors() throws {
        var tree = try twoBranches()
        try tree.addChild(r("3-x"), of: r("2-b"), deleted: false, body: body("{}"))
        let purged = tree.purge(leaves: [r("3-x"), r("1-a")])
        #expect(purged == [r("3-x")])
        #expect(!tree.contains(r("2-b")))
        #expect(tree.contains(r("1-a")))
        #expect(tree.winner?.rev == r("2-c"))
        tree.purge(leaves: [r("2-c")])
        #expect(tree.isEmpty)
    }

    @Test func encodingRoundTripsAndCanOmitTheWinnerBody() throws {
        var tree = try twoBranches()
        try tree.addChild(r("3-d"), of: r("2-c"), deleted: true, body: body("{}"))
        let decoded = try RevTree(encoded: tree.encoded())
        #expect(decoded == tree)
        let slim = try RevTree(encoded: tree.encoded(omitBodyOf: r("2-b")))
        #expect(slim.node(r("2-b"))?.body == nil)
        #expect(slim.node(r("3-d"))?.deleted == true)
    }

    @Test func corruptEncodingIsAnErrorNotACrash() {
        // The last: a count of ~500 million nodes in 16 bytes (found by fuzzing: it reserved 24 GB).
        let hugeCount: [UInt8] = [1, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x35, 0, 0]
        for bytes: [UInt8] in [[], [2], [1, 5], [1, 1, 1, 0], [1, 1, 1, 1, 0x61, 9, 0], hugeCount] {
            #expect(throws: SetteeError.self) { try RevTree(encoded: bytes) }
        }
    }

    /// Property: appending to a chain's encoding gives the very bytes of decode + addChild + encode, and
    /// anything that isn't a plain chain ending at the parent is left to that general path.
    @Test(arguments: 0..<30)
    func appendingToAChainMatchesTheGeneralPath(seed: Int) throws {
        var rng = SeededGenerator(seed: UInt64(seed) &+ 101)
        let start = Int.random(in: 1...5, using: &rng)  // > 1: a chain whose oldest revisions were stemmed
        let length = Int.random(in: 1...8, using: &rng)
        var tree = RevTree()
        var previous: RevID?
        for g in start..<(start + length) {
            let rev = RevID(generation: g, digest: String(UInt64.random(in: 1...UInt64.max, using: &rng), radix: 16))
            if let previous {
                try tree.addChild(rev, of: previous, deleted: false, body: nil)
            } else {
                tree.nodes = [RevTree.Node(rev: rev, parent: -1, deleted: false, body: nil)]
            }
            previous = rev
        }
        let leaf = previous!
        let deleted = Bool.random(using: &rng)
        if Bool.random(using: &rng) { tree.nodes[tree.nodes.count - 1].deleted = true }  // editing a tombstone
        let encoded = tree.encoded()
        let child = RevID.next(after: leaf, deleted: deleted, body: ["s": .int(Int64(seed))])
        var fast: [UInt8] = [9]  // appends after what is there
        let appended = encoded.withUnsafeBytes {
            RevTree.appendChild(toChain: $0, parent: leaf, child: child, deleted: deleted, limit: 1000, into: &fast)
        }
        #expect(appended)
        var general = try RevTree(encoded: encoded)
        try general.addChild(child, of: leaf, deleted: deleted, body: body("{}"))
        #expect(fast == [9] + general.encoded(omitBodyOf: child))

        func declines(_ bytes: [UInt8], parent: RevID = leaf, limit: Int = 1000) -> Bool {
            var out: [UInt8] = [7]
            let done = bytes.withUnsafeBytes {
                RevTree.appendChild(toChain: $0, parent: parent, child: child, deleted: deleted, limit: limit, into: &out)
            }
            return !done && out == [7]
        }
        // Not the leaf, a full chain that would need stemming, a second child of the root (a branch, or with a\n        // one-node chain a chain that no longer ends at the leaf), a stored body, corrupt bytes.
        if length > 1 { #expect(declines(encoded, parent: tree.nodes[0].rev)) }
        #expect(declines(encoded, limit: length))
        var branched = tree
        try branched.insert(path: [RevID(generation: start + 1, digest: "branch"), tree.nodes[0].rev], deleted: false, body: nil)
        #expect(declines(branched.encoded()))
        var withBody = tree
        withBody.nodes[0].body = body("{}")
        #expect(declines(withBody.encoded()))
        #expect(declines(Array(encoded.dropLast())))
        #expect(declines(encoded + [0]))
    }

    /// Property: the same set of revisions inserted in any order gives the same tree and the same winner.
    @Test(arguments: 0..<40)
    func insertionOrderDoesNotMatter(seed: Int) throws {
        var rng = SeededGenerator(seed: UInt64(seed) &* 7919 &+ 1)
        // Build a random history: a tree of revisions, then replicate each leaf's full path.
        var paths: [[RevID]] = [[r("1-root")]]
        for i in 0..<Int.random(in: 3...12, using: &rng) {
            let base = paths.randomElement(using: &rng)!
            let cut = Int.random(in: 1...base.count, using: &rng)
            let prefix = Array(base.suffix(cut))  // newest-first suffix = an ancestor path
            let newest = prefix.first!
            let child = RevID(generation: newest.generation + 1, digest: "n\(i)x\(Int.random(in: 0...99, using: &rng))")
            paths.append([child] + prefix)
        }
        let deletedFlags = paths.map { _ in Bool.random(using: &rng) }
        func build(_ order: [Int]) throws -> RevTree {
            var tree = RevTree()
            for k in order {
                try tree.insert(path: paths[k], deleted: deletedFlags[k], body: body("{\"k\":\(k)}"))
            }
            tree.dropNonLeafBodies()
            return tree
        }
        let reference = try build(Array(paths.indices))
        for _ in 0..<5 {
            let shuffled = try build(Array(paths.indices).shuffled(using: &rng))
            #expect(shuffled.nodes.map(\.rev) == reference.nodes.map(\.rev))
            #expect(shuffled.nodes.map(\.parent) == reference.nodes.map(\.parent))
            #expect(shuffled.winner?.rev == reference.winner?.rev)
            #expect(shuffled.conflicts == reference.conflicts)
        }
    }
}
