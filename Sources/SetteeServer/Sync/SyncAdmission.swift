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
        // (The writes are read where they are, not copied out: a batch is a thousand of them.)
        var standing: [Int] = []
        var ids: [String] = []
        standing.reserveCapacity(verdicts.count)
        ids.reserveCapacity(verdicts.count)
        var capacity = 0
        for i in verdicts.indices {
            guard case .success(let w) = verdicts[i], !w.id.hasPrefix("_design/") else { continue }
            standing.append(i)
            ids.append(w.id)
            capacity += (bodyTexts.indices.contains(i) ? bodyTexts[i]?.count ?? 256 : 256) + w.id.utf8.count + 64
        }
        guard !standing.isEmpty else { return }
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
        // deleted document's grants and channels are what its checks guard). Stored bodies go in as they are kept
        // (as a GET renders them).
        let records = try collection.records(ids: ids)
        let outcomes: [Result<SyncOutcome, JavaScriptError>]
        do {
            outcomes = try JavaScriptEngine.shared.syncBatch(source: source, userContext: .object(user), count: standing.count,
                                                             capacity: capacity) { k, out in
                let i = standing[k]
                guard case .success(let write) = verdicts[i] else { return }
                DocumentValidator.appendNewDocument(write, bodyText: bodyTexts.indices.contains(i) ? bodyTexts[i] : nil, to: &out)
                out.append(UInt8(ascii: ","))
                if let record = records[k] {
                    DocumentBytes.splice(id: write.id, rev: record.revID.description, deleted: record.deleted,
                                         body: record.deleted ? Array("{}".utf8) : record.body, into: &out)
                } else {
                    out.append(contentsOf: "null".utf8)
                }
            }
        } catch {
            throw CouchError(.internalServerError, "sync_function_error", "The sync function failed: \(error)")
        }
        for (k, outcome) in outcomes.enumerated() {
            let i = standing[k]
            switch outcome {
            case .success(let outcome):
                guard case .success(var write) = verdicts[i] else { continue }
                verdicts[i] = .failure(Self.placeholder)  // (the array's copy let go of, so `write` is changed in place)
                write.routing = outcome.routing
                write.expiresAtMillis = outcome.expiry.flatMap { expiryMillis($0) }
                verdicts[i] = .success(write)
            case .failure(let error):
                verdicts[i] = .failure(WriteRules.refusal(refusal(error)))
            }
        }
    }

    private static let placeholder = SetteeError(.internalError, "routing")

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
