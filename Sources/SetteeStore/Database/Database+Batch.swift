import Foundation
import SetteeCore

extension Database {
    /// Runs `block` as one transaction (Couchbase Lite's `inBatch(using:)`): every save, delete and purge it
    /// makes commits together, or — when it throws — none does. Reads inside see the batch's writes; change
    /// listeners hear of them once, after the commit.
    ///
    /// ```swift
    /// try database.inBatch {
    ///     for i in 0..<10 {
    ///         try collection.save(document: MutableDocument().setString("user \(i)", forKey: "name"))
    ///     }
    /// }
    /// ```
    /// - Throws: what `block` throws (nothing it wrote is kept), or a storage error from the commit.
    public func inBatch(using block: () throws -> Void) throws {
        if let outer = Batch.current(of: self) {
            // A batch inside a batch is part of it.
            try outer.savepoint { try outer.connection.savepoint("batch\(outer.depth % 8)") { try block() } }
            return
        }
        // The block's own error reaches the caller as it was thrown, not as a storage error.
        var thrown: (any Error)?
        var started: Batch?
        do {
            try withoutActuallyEscaping(block) { block in
                let batch = try write { connection in
                    let batch = Batch(database: self, connection: connection)
                    started = batch
                    let changes = self.writerState.withLock { $0.pendingChanges }
                    do {
                        try batch.run(block)
                    } catch {
                        // Nothing the block wrote is kept: neither are the change notifications it queued.
                        self.writerState.withLock { $0.pendingChanges = changes }
                        thrown = error
                        batch.rolledBack()
                        throw error
                    }
                    return batch
                }
                batch.committed()
            }
        } catch {
            started?.rolledBack()  // the commit itself failed (the block's own failure already undid its work)
            throw thrown ?? error
        }
    }
}

/// The transaction an `inBatch` block runs in, found by the writes and reads its thread makes.
final class Batch {
    private static let key = "settee.batch"
    let database: Database
    let connection: Connection
    private(set) var depth = 0

    init(database: Database, connection: Connection) {
        self.database = database
        self.connection = connection
    }

    /// The batch the current thread runs for `database`, if any.
    static func current(of database: Database) -> Batch? {
        guard let batches = Thread.current.threadDictionary[key] as? [Batch] else { return nil }
        return batches.last { $0.database === database }
    }

    /// Runs `block` with this batch current on the thread.
    func run(_ block: () throws -> Void) throws {
        let dictionary = Thread.current.threadDictionary
        var batches = dictionary[Self.key] as? [Batch] ?? []
        batches.append(self)
        dictionary[Self.key] = batches
        defer {
            var batches = dictionary[Self.key] as? [Batch] ?? []
            batches.removeAll { $0 === self }
            dictionary[Self.key] = batches.isEmpty ? nil : batches
        }
        try block()
    }

    private var onCommit: [() -> Void] = []
    private var onRollback: [() -> Void] = []

    /// Work to do once the batch committed (marking blobs saved), and to undo if it is rolled back (a document's
    /// revision id).
    func onOutcome(commit: @escaping () -> Void, rollback: @escaping () -> Void) {
        onCommit.append(commit)
        onRollback.append(rollback)
    }

    func committed() {
        for work in onCommit { work() }
        onCommit = []
        onRollback = []
    }

    func rolledBack() {
        for undo in onRollback.reversed() { undo() }
        onCommit = []
        onRollback = []
    }

    /// Runs a nested unit (a write, an inner batch) one savepoint deeper.
    func savepoint(_ body: () throws -> Void) throws {
        depth += 1
        defer { depth -= 1 }
        try body()
    }
}
