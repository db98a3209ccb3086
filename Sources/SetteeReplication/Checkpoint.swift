import Foundation
import SetteeCore

/// Replication checkpoints as the CouchDB protocol keeps them: a `_local/<replication id>` document on both
/// source and target with the session id, the source sequence reached, and a history of sessions.
struct Checkpointer: Sendable {
    static let historyLimit = 50
    static let version = 4

    let replicationID: String
    let source: any Endpoint
    let target: any Endpoint
    let sessionID: String
    let startTime: String

    /// The checkpoint documents as read at the start, and their revisions (updated as we write).
    var sourceDoc: JSONObject?
    var targetDoc: JSONObject?
    var sourceRev: String?
    var targetRev: String?
    /// The source refused a checkpoint write (read-only source): keep recording on the target only.
    var sourceReadOnly = false
    var startSeq: JSON = .int(0)
    var lastRecorded: JSON = .int(0)
    /// The counters of the session this one resumes from: CouchDB's history counters add up across sessions.
    var previousCounters: JSONObject = [:]

    init(replicationID: String, source: any Endpoint, target: any Endpoint) {
        self.replicationID = replicationID
        self.source = source
        self.target = target
        self.sessionID = Hex.random(bytes: 16)
        self.startTime = Checkpointer.httpDate(Date())
    }

    /// Reads both checkpoint documents and decides where to start.
    mutating func load(reset: Bool, since: JSON? = nil) async throws {
        let target = self.target, id = replicationID
        async let fromTarget = target.localDocument(id: id)
        sourceDoc = try await source.localDocument(id: replicationID)
        targetDoc = try await fromTarget
        sourceRev = sourceDoc?["_rev"]?.stringValue
        targetRev = targetDoc?["_rev"]?.stringValue
        startSeq = reset ? .int(0) : Checkpointer.startSequence(source: sourceDoc, target: targetDoc)
        if let since, !reset, startSeq == .int(0) { startSeq = since }
        lastRecorded = startSeq
        if startSeq != .int(0), case .object(let head)? = (targetDoc?["history"] ?? sourceDoc?["history"])?.arrayValue?.first {
            previousCounters = head
        }
    }

    /// CouchDB's `compare_replication_logs`: the same session on both sides → the source's `source_last_seq`;
    /// otherwise the newest session both histories share → its `recorded_seq`; otherwise 0.
    static func startSequence(source: JSONObject?, target: JSONObject?) -> JSON {
        guard let source, let target else { return .int(0) }
        if let s = source["session_id"]?.stringValue, s == target["session_id"]?.stringValue {
            return source["source_last_seq"] ?? .int(0)
        }
        var sh = source["history"]?.arrayValue ?? []
        var th = target["history"]?.arrayValue ?? []
        while !sh.isEmpty && !th.isEmpty {
            let targetIDs = Set(th.compactMap { $0["session_id"]?.stringValue })
            if let id = sh[0]["session_id"]?.stringValue, targetIDs.contains(id) {
                return sh[0]["recorded_seq"] ?? .int(0)
            }
            let sourceIDs = Set(sh.dropFirst().compactMap { $0["session_id"]?.stringValue })
            if let id = th[0]["session_id"]?.stringValue, sourceIDs.contains(id) {
                return th[0]["recorded_seq"] ?? .int(0)
            }
            sh.removeFirst()
            th.removeFirst()
        }
        return .int(0)
    }

    /// Records `seq` (every change up to it is on the target) on both sides: target first, made durable,
    /// then the source. A source that refuses (401/403) is treated as read-only from then on.
    mutating func record(_ seq: JSON, stats: ReplicatorStatus) async throws {
        try await target.ensureFullCommit()
        let entry = historyEntry(seq, stats: stats)
        targetRev = try await save(entry, seq: seq, previous: targetDoc, rev: targetRev, on: target)
        if !sourceReadOnly {
            do {
                sourceRev = try await save(entry, seq: seq, previous: sourceDoc, rev: sourceRev, on: source)
            } catch let e as ReplicationError where e.kind == .unauthorized || e.kind == .forbidden
                || e.kind == .unsupported {
                sourceReadOnly = true
            }
        }
        lastRecorded = seq
    }

    /// A counter of this session added to the resumed session's (CouchDB's cumulative history counters).
    private func counter(_ name: String, _ value: Int) -> JSON {
        .int(Int64(value) + (previousCounters[name]?.intValue ?? 0))
    }

    /// This session's history entry (CouchDB's fields) with `seq` recorded and the counters so far.
    func historyEntry(_ seq: JSON, stats: ReplicatorStatus) -> JSONObject {
        [
            "session_id": .string(sessionID),
            "start_time": .string(startTime),
            "end_time": .string(Checkpointer.httpDate(Date())),
            "start_last_seq": startSeq,
            "end_last_seq": seq,
            "recorded_seq": seq,
            "missing_checked": counter("missing_checked", stats.revisionsChecked),
            "missing_found": counter("missing_found", stats.missingRevisionsFound),
            "docs_read": counter("docs_read", stats.docsRead),
            "docs_written": counter("docs_written", stats.docsWritten),
            "doc_write_failures": counter("doc_write_failures", stats.docWriteFailures),
        ]
    }

    /// The history as it stands after recording `seq`: this session's entry, then the earlier sessions the
    /// target's checkpoint held (the source's when the target had none), at most ``historyLimit`` entries.
    func history(_ seq: JSON, stats: ReplicatorStatus) -> [JSON] {
        let previous = (targetDoc?["history"]?.arrayValue ?? sourceDoc?["history"]?.arrayValue ?? [])
            .filter { $0["session_id"]?.stringValue != sessionID }
        return Array(([JSON.object(historyEntry(seq, stats: stats))] + previous).prefix(Checkpointer.historyLimit))
    }

    /// Writes the checkpoint document on one side, re-reading its revision once if it changed underneath.
    private func save(_ entry: JSONObject, seq: JSON, previous: JSONObject?, rev: String?,
                      on endpoint: any Endpoint) async throws -> String {
        // This session's entry replaces its own earlier one at the head of the history.
        var history = (previous?["history"]?.arrayValue ?? []).filter { $0["session_id"]?.stringValue != sessionID }
        history.insert(.object(entry), at: 0)
        if history.count > Checkpointer.historyLimit { history.removeLast(history.count - Checkpointer.historyLimit) }
        var doc: JSONObject = [
            "session_id": .string(sessionID),
            "source_last_seq": seq,
            "replication_id_version": .int(Int64(Checkpointer.version)),
            "history": .array(history),
        ]
        if let rev { doc["_rev"] = .string(rev) }
        do {
            return try await endpoint.putLocalDocument(id: replicationID, body: doc)
        } catch {
            guard error.status == 409 else { throw error }
            let current = try await endpoint.localDocument(id: replicationID)
            if let rev = current?["_rev"] { doc["_rev"] = rev } else { doc.removeValue(forKey: "_rev") }
            return try await endpoint.putLocalDocument(id: replicationID, body: doc)
        }
    }

    /// An HTTP date (`Fri, 27 Nov 2026 13:05:09 GMT`), as CouchDB writes `start_time` and `end_time`. Formatted
    /// by hand: a `DateFormatter` per call (ICU's `udat_open`) was a seventh of a small replication's CPU time.
    static func httpDate(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var t = tm()
        gmtime_r(&seconds, &t)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(days[Int(t.tm_wday)]), \(two(t.tm_mday)) \(months[Int(t.tm_mon)]) \(t.tm_year + 1900) "
            + "\(two(t.tm_hour)):\(two(t.tm_min)):\(two(t.tm_sec)) GMT"
    }

    /// The replication id: an MD5 over both endpoints' identities and the filter, so the same replication
    /// finds its checkpoints again and a differently filtered one does not.
    static func replicationID(source: any Endpoint, target: any Endpoint, documentIDs: [String]?,
                              selector: JSON?, sinceSequence: JSON? = nil, filter: JSON? = nil) -> String {
        var parts: [JSON] = ["settee-replication", .int(Int64(version)), .string(source.identity), .string(target.identity)]
        if let ids = documentIDs { parts.append(["doc_ids": .array(ids.sorted().map(JSON.string))]) }
        if let selector { parts.append(["selector": selector]) }
        if let sinceSequence { parts.append(["since_seq": sinceSequence]) }
        if let filter { parts.append(filter) }
        return MD5.hex(JSON.array(parts).serializedBytes)
    }
}
