import Foundation
import SetteeCore
import SetteeStore
import Synchronization

/// Mapping a catch-up batch: the changed documents as map functions see them, mapped in pieces on every core while
/// the batch before is written (``ViewManager/update(_:definition:collection:)``), each emitted key encoded for its view (with the
/// document's partition first in a partitioned view).
extension ViewManager {
    /// Documents mapped per piece of a batch (pieces are mapped ahead of the writes, from when they are read).
    static let mapPiece = 1_000
    /// The first piece of a batch, smaller: writing waits for it.
    static let firstMapPiece = 250

    /// A result computed on another thread (a piece's map outputs, the next batch), waited for by the writer.
    // @unchecked: `result` is written once by the worker and read by the waiter, both under `condition` (a Mutex can't
    // wait); `Value` crosses from the worker to the waiter exactly once.
    final class Pending<Value>: @unchecked Sendable {
        private let condition = NSCondition()
        private var result: Result<Value, any Error>?

        /// Starts `work` on the store's background threads (``BackgroundWork``): never on Swift's cooperative pool
        /// or libdispatch's global queues, where a map function waiting for its query server held threads every
        /// other task of the process needed. `work` must not wait for another `Pending`.
        init(_ work: @escaping @Sendable () throws -> Value) {
            BackgroundWork.run {
                let r = Result { try work() }
                self.condition.lock()
                self.result = r
                self.condition.broadcast()
                self.condition.unlock()
            }
        }

        func get() throws -> Value {
            condition.lock()
            defer { condition.unlock() }
            while result == nil { condition.wait() }
            return try result!.get()
        }
    }

    /// View rows inserted per INSERT statement (SQLite allows 32,766 parameters; 6 per row).
    static let insertGroup = 32

    /// A row waiting for its group's INSERT.
    struct PendingRow {
        let doc: Int64
        let docID: String
        let row: MappedRow
        let id: Int64
    }

    /// A changed document as a batch reads it.
    struct Change: Sendable {
        let rowid: Int64
        let docID: String
        let seq: Int64
        let rev: String
        let deleted: Bool
        let body: [UInt8]
        /// The live losing leaves of a document in conflict.
        var conflicts: [String] = []
    }

    /// An emitted row ready to insert.
    struct MappedRow: Sendable {
        let key: [UInt8]
        let keyJSON: [UInt8]
        let valueJSON: [UInt8]?
        let text: String?
    }

    enum MapOutput: Sendable {
        case rows([MappedRow])
        case skipped            // deleted, or a body that isn't a JSON object
        case failed(any Error)  // the map function threw
    }

    /// Maps a piece of a batch, in order, on the calling thread (one of ``BackgroundWork``'s: the pieces of a batch
    /// are mapped in parallel, each on its own thread, so a view build uses every core).
    static func map(_ changes: [Change], definition: ViewDefinition) throws -> [MapOutput] {
        let collator = try ViewCollator()
        collator.raw = definition.rawCollation
        var all: [MapOutput] = []
        all.reserveCapacity(changes.count)
        if let batchMap = definition.batchMap {
            all = try mapBatch(changes[...], definition, batchMap, collator)
        } else {
            let emitter = Emitter()
            for change in changes { all.append(mapOne(change, definition, collator, emitter)) }
        }
        // A JavaScript map function that doesn't compile, runs past its time limit or crashes its process fails
        // the update (and the query waiting on it), as in CouchDB; a function that throws for one document has
        // already been answered with no rows for it by the query server.
        for case .failed(let error as JavaScriptError) in all { throw error }
        return all
    }

    /// The document a map function sees for a change: the body with `_id` and `_rev` (stored bodies carry
    /// neither), `_conflicts` and `_local_seq` when asked; nil when it is not mapped (deleted, a design document
    /// without `include_design`, an unreadable body — which is not indexed and never stops indexing).
    private static func mapInput(_ change: Change, _ definition: ViewDefinition) -> JSONObject? {
        if change.deleted { return nil }
        if !definition.includeDesign && change.docID.hasPrefix("_design/") { return nil }
        let parsed: JSON?
        if let members = definition.members {
            parsed = change.body.withUnsafeBytes { try? members.parseStored($0) }
        } else {
            parsed = try? JSON.parse(change.body)
        }
        guard case .object(var document)? = parsed else { return nil }
        document["_id"] = .string(change.docID)
        document["_rev"] = .string(change.rev)
        if !change.conflicts.isEmpty { document["_conflicts"] = .array(change.conflicts.map(JSON.string)) }
        if definition.localSeq { document["_local_seq"] = .int(change.seq) }
        return document
    }

    /// The document a batch map (a query server) sees for a change, as JSON bytes: `_id`, `_rev` (and
    /// `_conflicts`, `_local_seq` when asked) spliced in front of the stored body's members, which are not parsed
    /// (the store wrote them). Nil when it is not mapped, as ``mapInput(_:_:)``.
    static func mapInputBytes(_ change: Change, _ definition: ViewDefinition) -> [UInt8]? {
        if change.deleted { return nil }
        if !definition.includeDesign && change.docID.hasPrefix("_design/") { return nil }
        let body = change.body
        guard let open = body.firstIndex(where: { !isJSONSpace($0) }), body[open] == UInt8(ascii: "{"),
              let close = body.lastIndex(where: { !isJSONSpace($0) }), body[close] == UInt8(ascii: "}") else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(body.count + change.docID.utf8.count + 64)
        out.append(contentsOf: #"{"_id":"#.utf8)
        JSON.string(change.docID).serialize(into: &out)
        out.append(contentsOf: #","_rev":"#.utf8)
        JSON.string(change.rev).serialize(into: &out)
        if !change.conflicts.isEmpty {
            out.append(contentsOf: #","_conflicts":"#.utf8)
            JSON.array(change.conflicts.map(JSON.string)).serialize(into: &out)
        }
        if definition.localSeq {
            out.append(contentsOf: #","_local_seq":"#.utf8)
            out.append(contentsOf: String(change.seq).utf8)
        }
        let members = body[(open + 1)..<close]
        if members.contains(where: { !isJSONSpace($0) }) {
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: members)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    private static func isJSONSpace(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09
    }

    /// Maps a slice with the definition's batch map (one exchange with a query server for the whole slice).
    private static func mapBatch(_ changes: ArraySlice<Change>, _ definition: ViewDefinition,
                                 _ batchMap: @Sendable ([[UInt8]]) throws -> [[(key: JSON, value: JSON?)]],
                                 _ collator: ViewCollator) throws -> [MapOutput] {
        var inputs: [[UInt8]] = []
        var positions: [Int] = []
        var out = [MapOutput](repeating: .skipped, count: changes.count)
        for (k, change) in changes.enumerated() {
            guard let document = mapInputBytes(change, definition) else { continue }
            inputs.append(document)
            positions.append(k)
        }
        // A failure of the engine (a time limit, a function that doesn't compile) fails the whole slice.
        let emitted = try batchMap(inputs)
        for (k, rows) in zip(positions, emitted) {
            let prefix = partitionPrefix(changes[changes.startIndex + k].docID, definition, collator)
            out[k] = .rows(rows.map { row in
                MappedRow(key: prefix + collator.encode(row.key), keyJSON: row.key.serializedBytes,
                          valueJSON: row.value?.serializedBytes, text: nil)
            })
        }
        return out
    }

    private static func mapOne(_ change: Change, _ definition: ViewDefinition, _ collator: ViewCollator,
                               _ emitter: Emitter) -> MapOutput {
        guard let document = mapInput(change, definition) else { return .skipped }
        emitter.rows.removeAll(keepingCapacity: true)
        do {
            try definition.map(document, emitter)
        } catch {
            return .failed(error)
        }
        let prefix = partitionPrefix(change.docID, definition, collator)
        return .rows(emitter.rows.map { row in
            MappedRow(key: prefix + collator.encode(row.key), keyJSON: row.key.serializedBytes,
                      valueJSON: row.value?.serializedBytes, text: row.text)
        })
    }

    /// In a partitioned view every row's encoded key starts with its document's partition (encoded as a string
    /// key): one partition's rows are one contiguous range, in key order inside it.
    static func partitionPrefix(_ docID: String, _ definition: ViewDefinition, _ collator: ViewCollator) -> [UInt8] {
        guard definition.partitioned else { return [] }
        return partitionPrefix(DocumentIDs.partition(of: docID) ?? "", collator)
    }

    /// The encoded-key prefix of a partition's rows.
    static func partitionPrefix(_ partition: String, _ collator: ViewCollator) -> [UInt8] {
        let raw = collator.raw
        collator.raw = false
        defer { collator.raw = raw }
        return collator.encode(.string(partition))
    }
}
