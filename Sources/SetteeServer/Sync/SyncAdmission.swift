import Foundation
import SetteeCore
import SetteeIndex
import SetteeStore

/// The sync function's step of the write rules (``WriteRules``): for a database with a sync function, every write
/// still standing after the other rules (not design documents) runs it, with `doc`, `oldDoc` (the current revision,
/// or null) and `meta`; a refusal refuses that write alone, and an accepted write carries the function's outcome
/// (channels, `access()` and `role()` grants, `expiry()`) to the store, which keeps it with the revision.
enum SyncAdmission {
    /// Runs the sync function on the standing writes of `verdicts` (in place). `bodyTexts`, when given, are the
    /// writes' bodies already serialized (one per verdict, nil where none was made).
    static func route(_ verdicts: inout [Result<RevisionWrite, SetteeError>], source: String, bodyTexts: [[UInt8]?] = [],
                      in collection: SetteeStore.Collection, context: WriteContext, isAdmin: Bool) throws {
        let standing = verdicts.indices.filter {
            if case .success(let w) = verdicts[$0] { return !w.id.hasPrefix("_design/") } else { return false }
        }
        guard !standing.isEmpty else { return }
        let writes = standing.map { i -> RevisionWrite in
            guard case .success(let w) = verdicts[i] else { preconditionFailure() }
            return w
        }
        let index = ChannelIndex.of(collection.database)
        var user: JSONObject = ["name": context.name.map(JSON.string) ?? .null,
                          "roles": .array(context.roles.filter { !$0.hasPrefix("_") }.map(JSON.string)),
                          "channels": [], "admin": .bool(isAdmin)]
        if !isAdmin {
            // What requireAccess() and requireRole() test: the writer's channels and roles as of now.
            let reader = try index.reader(user: context.name, roles: context.roles, in: collection)
            user["channels"] = .array(reader.channels.keys.sorted().map(JSON.string))
            user["roles"] = .array(reader.roles.sorted().map(JSON.string))
        }
        // `oldDoc`: the current revision, null for a new document. Over a tombstone it is the tombstone
        // (`{_id, _rev, _deleted: true}`), so a function can tell re-creating a deleted document from a new one (the
        // deleted document's grants and channels are what its checks guard).
        let records = try collection.records(ids: writes.map(\.id))
        var pairs: [[UInt8]] = []
        pairs.reserveCapacity(writes.count)
        for (k, (write, record)) in zip(writes, records).enumerated() {
            var current: (rev: String, body: JSONObject)?
            if let record, !record.deleted, case .object(let body) = try JSON.parse(record.body) {
                current = (record.revID.description, body)
            }
            let text = bodyTexts.indices.contains(standing[k]) ? bodyTexts[standing[k]] : nil
            var pair = DocumentValidator.serializedArguments(write, bodyText: text, current: current)
            if let record, record.deleted {
                pair.removeLast(4)  // "null"
                var tombstone: JSONObject = ["_id": .string(write.id), "_rev": .string(record.revID.description)]
                tombstone["_deleted"] = true
                JSON.object(tombstone).serialize(into: &pair)
            }
            pairs.append(pair)
        }
        let outcomes: [Result<JSON, JavaScriptError>]
        do {
            outcomes = try JavaScriptEngine.shared.syncBatch(source: source, documents: pairs, userContext: .object(user))
        } catch {
            throw CouchError(.internalServerError, "sync_function_error", "The sync function failed: \(error)")
        }
        for (k, outcome) in outcomes.enumerated() {
            let i = standing[k]
            switch outcome {
            case .success(let outcome):
                var write = writes[k]
                write.routing = outcome.serializedBytes
                write.expiresAtMillis = outcome["expiry"].flatMap { expiryMillis($0) }
                verdicts[i] = .success(write)
            case .failure(let error):
                verdicts[i] = .failure(WriteRules.refusal(refusal(error)))
            }
        }
    }

    /// `expiry()`'s value as Sync Gateway reads it: a number of seconds, from now when at most 30 days, else since
    /// 1970; a string of such a number, or an ISO 8601 date. Nil for anything else (and `null`: unchanged).
    static func expiryMillis(_ value: JSON, now: Date = Date()) -> Int64? {
        func seconds(_ n: Double) -> Int64? {
            guard n.isFinite, n > 0 else { return nil }
            let absolute = n <= 30 * 24 * 3600 ? now.timeIntervalSince1970 + n : n
            return Int64((absolute * 1000).rounded())
        }
        switch value {
        case .int(let n): return seconds(Double(n))
        case .double(let d): return seconds(d)
        case .string(let s):
            if let n = Double(s) { return seconds(n) }
            let f = ISO8601DateFormatter()
            f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            guard let date = f.date(from: s) ?? ISO8601DateFormatter().date(from: s) else { return nil }
            return Int64((date.timeIntervalSince1970 * 1000).rounded())
        default: return nil
        }
    }

    /// How a sync function's refusal is answered: `throw({forbidden})` 403, `throw({unauthorized})` 401, an
    /// exception 500 (as Sync Gateway answers an exception in the sync function), each with its message.
    static func refusal(_ error: JavaScriptError) -> CouchError {
        switch error {
        case .forbidden(let reason): return CouchError(.forbidden, "forbidden", reason)
        case .unauthorized(let reason): return CouchError(.unauthorized, "unauthorized", reason)
        case .thrown(let name, let reason):
            return CouchError(.internalServerError, "sync_function_error", "Exception in the sync function: \(name): \(reason)")
        default: return CouchError(.internalServerError, "sync_function_error", "\(error)")
        }
    }
}
