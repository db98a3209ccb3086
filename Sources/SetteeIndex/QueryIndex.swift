public import Foundation
public import SetteeCore
import SetteeSQLPP
public import SetteeStore
import SetteeVector

/// An index of a collection (Couchbase Lite's `QueryIndex`): its definition, and for a lazy vector index the way to
/// fill it.
public final class QueryIndex: Sendable {
    /// The index's name.
    public var name: String { info.name }
    /// The collection it indexes.
    public let collection: Collection
    /// The definition and tables as the registry holds them.
    package let info: IndexInfo
    private let manager: IndexManager

    init(info: IndexInfo, collection: Collection, manager: IndexManager) {
        self.info = info
        self.collection = collection
        self.manager = manager
    }

    /// Starts filling a lazy vector index: up to `limit` documents whose vector is not yet computed, with the value
    /// of the index's expression for each; nil when none is left.
    ///
    /// ```swift
    /// while let updater = try index.beginUpdate(limit: 50) {
    ///     for i in 0..<updater.count {
    ///         if let color = updater.string(at: i), let vector = try? embed(color) {
    ///             try updater.setVector(vector, at: i)
    ///         } else {
    ///             updater.skipVector(at: i)   // handed out again by the next beginUpdate
    ///         }
    ///     }
    ///     try updater.finish()
    /// }
    /// ```
    /// - Throws: `badRequest` when the index is not a lazy vector index or `limit` is 0.
    public func beginUpdate(limit: UInt64) throws -> IndexUpdater? {
        let entries = try pendingVectors(limit: Int(clamping: limit))
        if entries.isEmpty { return nil }
        return IndexUpdater(index: self, entries: entries)
    }

    /// The lazy index's entries still waiting for a vector, oldest change first (what ``beginUpdate(limit:)``
    /// hands out; the HTTP API serves it as `GET /{db}/_indexes/{name}/_pending`).
    package func pendingVectors(limit: Int) throws -> [LazyVectorEntry] {
        guard info.spec.kind == .vector, info.spec.vector?.isLazy == true else {
            throw SetteeError(.badRequest, "Index \(name) is not a lazy vector index")
        }
        guard limit > 0 else { throw SetteeError(.badRequest, "beginUpdate(limit:) needs a positive limit, got \(limit)") }
        try manager.catchUp(info, collection: collection)
        let pending = IndexManager.vectorTables(info.table).pending
        return try collection.database.read { db -> [LazyVectorEntry] in
            let stmt = try db.prepare("SELECT p.doc, p.seq, p.value, \(DocumentTable.column(.id, "d")) FROM \(pending) AS p"
                                      + " \(DocumentTable.join(collection, as: "d", onRowID: "p.doc", readingOtherFirst: false)) ORDER BY p.seq LIMIT ?")
            defer { stmt.reset() }
            stmt.bind(limit, at: 1)
            var out: [LazyVectorEntry] = []
            while try stmt.step() {
                let value = (try? stmt.withTextBytes(2) { try JSON.parse($0) }) ?? .null
                out.append(LazyVectorEntry(documentID: stmt.string(3) ?? "", sequence: UInt64(stmt.int64(1)), value: value,
                                           rowid: stmt.int64(0)))
            }
            return out
        }
    }

    /// Stores vectors for pending entries (nil: the document is not indexed) in one transaction. An entry whose
    /// document changed since it was handed out (its sequence moved on) is left pending with its new value.
    ///
    /// - Throws: `badRequest` for a vector of the wrong dimensions or with a non-finite value (nothing is written).
    package func setVectors(_ updates: [(entry: LazyVectorEntry, vector: [Float]?)]) throws {
        let dimensions = info.spec.vector?.dimensions ?? 0
        for (entry, vector) in updates {
            guard let vector else { continue }
            guard vector.count == dimensions else {
                throw SetteeError(.badRequest, "The vector for \(entry.documentID) has \(vector.count) dimensions, index \(name) has \(dimensions)")
            }
            guard vector.allSatisfy(\.isFinite) else {
                throw SetteeError(.badRequest, "The vector for \(entry.documentID) has a non-finite value")
            }
        }
        // Absorb changes first, so an entry whose document changed meanwhile is seen as stale.
        try manager.catchUp(info, collection: collection)
        try manager.applyLazyUpdates(info, updates: updates.map { ($0.entry.rowid, Int64($0.entry.sequence), $0.vector) })
    }

    /// The pending entry of `documentID` at `sequence`, if it is still pending there (for the HTTP API).
    package func pendingEntry(documentID: String, sequence: UInt64) throws -> LazyVectorEntry? {
        try manager.catchUp(info, collection: collection)
        let pending = IndexManager.vectorTables(info.table).pending
        return try collection.database.read { db -> LazyVectorEntry? in
            let stmt = try db.prepare("SELECT p.doc, p.seq, p.value FROM \(pending) AS p"
                                      + " \(DocumentTable.join(collection, as: "d", onRowID: "p.doc", readingOtherFirst: false)) WHERE \(DocumentTable.column(.id, "d")) = ?")
            defer { stmt.reset() }
            stmt.bind(documentID, at: 1)
            guard try stmt.step(), UInt64(stmt.int64(1)) == sequence else { return nil }
            let value = (try? stmt.withTextBytes(2) { try JSON.parse($0) }) ?? .null
            return LazyVectorEntry(documentID: documentID, sequence: sequence, value: value, rowid: stmt.int64(0))
        }
    }
}

/// One document of a lazy vector index waiting for its vector: the value of the index's expression to embed, and
/// the document's sequence when it was handed out.
package struct LazyVectorEntry: Sendable, Hashable {
    public let documentID: String
    public let sequence: UInt64
    public let value: JSON
    let rowid: Int64
}

/// A batch of a lazy vector index's entries handed to the app (Couchbase Lite's `IndexUpdater`): read each value,
/// then `setVector` (nil: the document is not indexed) or `skipVector` (handed out again next time) for every one,
/// then ``finish()``.
///
/// It is an array of the values to embed (Couchbase Lite's `ArrayProtocol` getters, subscripts and iteration).
/// Not thread-safe, and not `Sendable`, as Couchbase Lite's: one updater is used by one thread at a time.
public final class IndexUpdater: ArrayProtocol, Sequence {
    private enum Outcome {
        case vector([Float])
        case noVector
        case skipped
    }

    private let index: QueryIndex
    private let entries: [LazyVectorEntry]
    /// The entries' values, read as a document's array is.
    private let values: ArrayObject
    private var outcomes: [Outcome?]
    private var finished = false

    init(index: QueryIndex, entries: [LazyVectorEntry]) {
        self.index = index
        self.entries = entries
        self.values = ArrayObject(entries.map(\.value), database: index.collection.database)
        self.outcomes = Array(repeating: nil, count: entries.count)
    }

    /// The number of entries in this batch.
    public var count: Int { entries.count }
    /// The document id of entry `i`.
    public func documentID(at i: Int) -> String? { entries.indices.contains(i) ? entries[i].documentID : nil }

    /// The value of the index's expression for entry `i` as stored JSON (Settee's), nil out of range.
    public func json(at i: Int) -> JSON? { entries.indices.contains(i) ? entries[i].value : nil }

    // The value to embed for entry `i` (the text, image reference …), read as ``ArrayObject`` reads an element.
    public func value(at i: Int) -> Any? { values.value(at: i) }
    public func string(at i: Int) -> String? { values.string(at: i) }
    public func number(at i: Int) -> NSNumber? { values.number(at: i) }
    public func int(at i: Int) -> Int { values.int(at: i) }
    public func int64(at i: Int) -> Int64 { values.int64(at: i) }
    public func float(at i: Int) -> Float { values.float(at: i) }
    public func double(at i: Int) -> Double { values.double(at: i) }
    public func boolean(at i: Int) -> Bool { values.boolean(at: i) }
    public func date(at i: Int) -> Date? { values.date(at: i) }
    public func blob(at i: Int) -> Blob? { values.blob(at: i) }
    public func array(at i: Int) -> ArrayObject? { values.array(at: i) }
    public func dictionary(at i: Int) -> DictionaryObject? { values.dictionary(at: i) }
    public func toArray() -> [Any] { values.toArray() }
    public func toJSON() -> String { values.toJSON() }
    public subscript(index: Int) -> Fragment { values[index] }
    public func makeIterator() -> AnyIterator<Any> { values.makeIterator() }

    /// Sets the vector of entry `i`; nil leaves its document out of the index.
    ///
    /// - Throws: `badRequest` for an index out of range, a vector of the wrong dimensions or after `finish()`.
    public func setVector(_ vector: [Float]?, at i: Int) throws {
        try check(i)
        guard let vector else { outcomes[i] = .noVector; return }
        let dimensions = index.info.spec.vector?.dimensions ?? 0
        guard vector.count == dimensions else {
            throw SetteeError(.badRequest, "setVector(at: \(i)): the vector has \(vector.count) dimensions, index \(index.name) has \(dimensions)")
        }
        guard vector.allSatisfy(\.isFinite) else { throw SetteeError(.badRequest, "setVector(at: \(i)): the vector has a non-finite value") }
        outcomes[i] = .vector(vector)
    }

    /// Skips entry `i`: it is handed out again by the next ``QueryIndex/beginUpdate(limit:)``.
    public func skipVector(at i: Int) {
        guard !finished, outcomes.indices.contains(i) else { return }
        outcomes[i] = .skipped
    }

    private func check(_ i: Int) throws {
        guard !finished else { throw SetteeError(.badRequest, "This index updater has already finished") }
        guard outcomes.indices.contains(i) else {
            throw SetteeError(.badRequest, "Index updater entry \(i) is out of range 0..<\(count)")
        }
    }

    /// Writes the vectors set in this batch to the index in one transaction. A document that changed since its value
    /// was handed out keeps its new value pending (it is handed out again).
    ///
    /// - Throws: `badRequest` when an entry was neither set nor skipped (nothing is written then).
    public func finish() throws {
        guard !finished else { throw SetteeError(.badRequest, "This index updater has already finished") }
        if let i = outcomes.firstIndex(where: { if case .none = $0 { true } else { false } }) {
            throw SetteeError(.badRequest, "Index updater entry \(i) was neither set (setVector) nor skipped (skipVector)")
        }
        try index.setVectors(zip(entries, outcomes).compactMap { entry, outcome -> (entry: LazyVectorEntry, vector: [Float]?)? in
            switch outcome {
            case .vector(let v)?: return (entry, v)
            case .noVector?: return (entry, nil)
            case .skipped?, nil: return nil
            }
        })
        finished = true
    }
}

extension IndexManager {
    /// Applies a lazy updater's vectors: each entry still pending at the sequence it was handed out with leaves the
    /// pending table, and its vector (if any) is stored; then training runs if it is due.
    func applyLazyUpdates(_ info: IndexInfo, updates: [(doc: Int64, seq: Int64, vector: [Float]?)]) throws {
        guard let options = info.spec.vector else { return }
        let state = vectorState(info)
        let pending = IndexManager.vectorTables(info.table).pending
        do {
            try database.write { db in
                state.lock.lock()
                defer { state.lock.unlock() }
                do {
                    let ivf = try self.loadedIndex(state, info, db: db)
                    let current = try db.prepare("SELECT seq FROM \(pending) WHERE doc = ?")
                    let remove = try db.prepare("DELETE FROM \(pending) WHERE doc = ?")
                    let upsert = try db.prepare("INSERT OR REPLACE INTO \(info.table)(doc, list, code, vector) VALUES (?, ?, ?, ?)")
                    for update in updates {
                        current.bind(update.doc, at: 1)
                        let stillPending = try current.step() && current.int64(0) == update.seq
                        current.reset()
                        guard stillPending else { continue }
                        remove.bind(update.doc, at: 1)
                        try remove.run()
                        if let vector = update.vector {
                            try self.store(vector, for: update.doc, in: info, ivf: ivf, upsert: upsert)
                        }
                    }
                    try self.trainIfDue(info, options: options, ivf: state.ivf ?? ivf, db: db, state: state)
                } catch {
                    state.ivf = nil
                    throw error
                }
            }
        } catch {
            state.lock.withLock { state.ivf = nil }
            throw error
        }
    }
}
