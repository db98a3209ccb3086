import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// A document's revision tree and conflicts (`/_utils/db/{db}/tree/{id}`): the tree drawn as SVG, every leaf's
/// body, what the live leaves disagree on, and resolving by keeping one leaf or saving a merged body.
extension AdminUI {
    /// Every leaf of a document with its ancestry (`open_revs=all&revs=true`) and body.
    func leaves(_ db: String, _ id: String) async -> (APIResult, [(rev: String, deleted: Bool, start: Int, ids: [String], body: JSONObject)]) {
        let result = await api(.get, docSegments(db, id), query: "open_revs=all&revs=true")
        var out: [(rev: String, deleted: Bool, start: Int, ids: [String], body: JSONObject)] = []
        for entry in result.json.arrayValue ?? [] {
            guard case .object(let doc)? = entry["ok"], let rev = doc["_rev"]?.stringValue else { continue }
            let revisions = doc["_revisions"]
            let start = Int(revisions?["start"]?.intValue ?? Int64(RevID(rev)?.generation ?? 1))
            let ids = revisions?["ids"]?.arrayValue?.compactMap(\.stringValue) ?? []
            var body = doc
            _ = body.removeValue(forKey: "_revisions")
            out.append((rev, doc["_deleted"]?.boolValue == true, start, ids, body))
        }
        return (result, out)
    }

    func tree(_ db: String, _ id: String) async throws -> Response {
        if id.hasPrefix("_local/") {
            throw CouchError.notFound("Local documents have no revision tree: they are not replicated and keep one revision.")
        }
        let info = await api(.get, [db])
        guard info.ok else { return try errorPage(info, title: db) }
        let (result, found) = await leaves(db, id)
        guard result.ok else { return try errorPage(result, title: id) }
        guard !found.isEmpty else { throw CouchError.notFound("\(id) has no revisions.") }
        let view = RevisionTreeView(leaves: found.map { ($0.rev, $0.deleted, $0.start, $0.ids) })
        let winner = view.winner ?? ""
        let conflicts = view.conflicts
        var leafRows: [LeafRow] = []
        for leaf in found.sorted(by: { ($0.rev == winner ? 0 : 1, $0.rev) < ($1.rev == winner ? 0 : 1, $1.rev) }) {
            let state = leaf.rev == winner ? "winner" : leaf.deleted ? "deleted" : "conflict"
            var body = leaf.body
            _ = body.removeValue(forKey: "_rev")
            leafRows.append(LeafRow(rev: leaf.rev, state: state, json: UIFormat.pretty(.object(body)),
                                    href: docHref(db, id) + "?rev=" + AdminUI.encodeQuery(leaf.rev),
                                    canKeep: !leaf.deleted && !conflicts.isEmpty))
        }
        var model = TreePage(
            id: id, docHref: docHref(db, id), resolveHref: treeHref(db, id) + "/resolve",
            svg: view.svg { docHref(db, id) + "?rev=" + AdminUI.encodeQuery($0) },
            winner: winner, hasConflicts: !conflicts.isEmpty, conflictCount: conflicts.count,
            revisionCount: view.nodes.count, leaves: leafRows)
        // What the live leaves disagree on, member by member (the winner first).
        let live = found.filter { !$0.deleted }.sorted { ($0.rev == winner ? 0 : 1, $0.rev) < ($1.rev == winner ? 0 : 1, $1.rev) }
        if live.count > 1 {
            var keys: [String] = []
            for leaf in live { for key in leaf.body.keys where !key.hasPrefix("_") && !keys.contains(key) { keys.append(key) } }
            for key in keys {
                let values = live.map { $0.body[key] }
                guard Set(values.map { $0?.jsonString ?? "(missing)" }).count > 1 else { continue }
                model.diffs.append(DiffRow(key: key, values: values.map { ValueCell(value: $0.map(UIFormat.cell) ?? "(missing)") }))
            }
            model.diffRevs = live.map { DiffColumn(rev: UIFormat.shortRev($0.rev)) }
            model.hasDiffs = !model.diffs.isEmpty
        }
        if let w = found.first(where: { $0.rev == winner }) {
            var body = w.body
            _ = body.removeValue(forKey: "_rev")
            _ = body.removeValue(forKey: "_id")
            model.mergeJSON = UIFormat.pretty(.object(body))
        }
        return try page("tree", title: "Revisions of \(id)", model, database: databaseHeader(db, info.json), nav: "documents")
    }

    /// Resolves a conflict: the kept leaf stays (optionally with an edited body written as its child), and every
    /// other live leaf gets a tombstone, all in one `_bulk_docs`.
    func resolve(_ db: String, _ id: String, _ form: FormData) async throws -> Response {
        guard let keep = form.text("keep") else { return redirect(treeHref(db, id), error: "Pick the revision to keep.") }
        let (result, found) = await leaves(db, id)
        guard result.ok else { return redirect(treeHref(db, id), error: result.message) }
        guard found.contains(where: { $0.rev == keep && !$0.deleted }) else {
            return redirect(treeHref(db, id), error: "\(keep) is not a live leaf of \(id) any more; the tree changed. Look again.")
        }
        var docs: [JSON] = []
        if let edited = form.text("body") {
            guard case .object(var body)? = try? JSON.parse(edited) else {
                return redirect(treeHref(db, id), error: "The merged document is not a JSON object.")
            }
            body["_id"] = .string(id)
            body["_rev"] = .string(keep)
            docs.append(.object(body))
        }
        let losers = found.filter { !$0.deleted && $0.rev != keep }
        for loser in losers { docs.append(["_id": .string(id), "_rev": .string(loser.rev), "_deleted": true]) }
        guard !docs.isEmpty else { return redirect(treeHref(db, id), notice: "Nothing to resolve.") }
        let write = await api(.post, [db, "_bulk_docs"], body: ["docs": .array(docs)])
        guard write.ok else { return redirect(treeHref(db, id), error: write.message) }
        let failures = (write.json.arrayValue ?? []).compactMap { r -> String? in
            r["error"].map { "\(r["rev"]?.stringValue ?? ""): \($0.stringValue ?? "") \(r["reason"]?.stringValue ?? "")" }
        }
        guard failures.isEmpty else { return redirect(treeHref(db, id), error: "Not resolved: " + failures.joined(separator: "; ")) }
        let kept = form.text("body") == nil ? keep : (write.json[0]?["rev"]?.stringValue ?? keep)
        return redirect(treeHref(db, id), notice: "Resolved: kept \(kept), deleted \(losers.count) conflicting revision\(losers.count == 1 ? "" : "s").")
    }
}
