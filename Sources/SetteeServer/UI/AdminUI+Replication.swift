import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// The replication page (`/_utils/replication`): the `_replicator` jobs (`/_scheduler/docs`) and running
/// replications (`/_active_tasks`), and the forms that start a job and stop and remove one.
extension AdminUI {
    func replication() async throws -> Response {
        let docs = await api(.get, ["_scheduler", "docs"])
        let tasks = await api(.get, ["_active_tasks"])
        let dbs = await api(.get, ["_all_dbs"])
        let jobs = (docs.json["docs"]?.arrayValue ?? []).map { d in
            ReplicationJob(docId: d["doc_id"]?.stringValue ?? "", source: d["source"]?.stringValue ?? "",
                           target: d["target"]?.stringValue ?? "", state: d["state"]?.stringValue ?? "",
                           written: UIFormat.cell(d["info"]?["docs_written"]), updated: d["last_updated"]?.stringValue ?? "",
                           error: d["info"]?["error"]?.stringValue ?? "")
        }
        let running = (tasks.json.arrayValue ?? []).filter { $0["type"]?.stringValue == "replication" }.map { t in
            ReplicationTask(id: t["replication_id"]?.stringValue ?? "", source: t["source"]?.stringValue ?? "",
                            target: t["target"]?.stringValue ?? "", state: t["state"]?.stringValue ?? "",
                            read: UIFormat.cell(t["docs_read"]), written: UIFormat.cell(t["docs_written"]),
                            pending: UIFormat.cell(t["changes_pending"]), seq: UIFormat.cell(t["checkpointed_source_seq"]))
        }
        var errors: [String] = []
        if !docs.ok { errors.append(docs.message) }
        if !tasks.ok { errors.append(tasks.message) }
        let model = ReplicationPage(jobs: jobs, tasks: running,
                                    databases: (dbs.json.arrayValue ?? []).compactMap(\.stringValue).map { NamedItem(name: $0) },
                                    error: errors.isEmpty ? nil : errors.joined(separator: " · "))
        return try page("replication", title: "Replication", model, nav: "replication")
    }

    func startReplication(_ form: FormData) async throws -> Response {
        guard let source = form.text("source"), let target = form.text("target") else {
            return redirect("\(AdminUI.root)/replication", error: "A replication needs a source and a target.")
        }
        let created = await api(.put, ["_replicator"])
        guard created.ok || created.status == 412 else { return redirect("\(AdminUI.root)/replication", error: created.message) }
        var doc: JSONObject = ["source": .string(source), "target": .string(target),
                               "continuous": .bool(form.flag("continuous")), "create_target": .bool(form.flag("create_target"))]
        let result: APIResult
        if let id = form.text("id") {
            doc["_id"] = .string(id)
            result = await api(.put, ["_replicator", id], body: .object(doc))
        } else {
            result = await api(.post, ["_replicator"], body: .object(doc))
        }
        guard result.ok else { return redirect("\(AdminUI.root)/replication", error: result.message) }
        let id = result.json["id"]?.stringValue ?? ""
        return redirect("\(AdminUI.root)/replication", notice: "Started replication \(id): \(source) → \(target).")
    }

    func deleteReplication(_ form: FormData) async throws -> Response {
        let id = form["id"] ?? ""
        let doc = await api(.get, ["_replicator", id])
        guard doc.ok, let rev = doc.json["_rev"]?.stringValue else { return redirect("\(AdminUI.root)/replication", error: doc.message) }
        let result = await api(.delete, ["_replicator", id], query: "rev=" + AdminUI.encodeQuery(rev))
        guard result.ok else { return redirect("\(AdminUI.root)/replication", error: result.message) }
        return redirect("\(AdminUI.root)/replication", notice: "Stopped and removed replication \(id).")
    }
}
