import Foundation
import SetteeCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

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
    /// A save or delete that fails with a conflict or a refusal (`failOnConflict`, a bad id) changes nothing and
    /// the batch goes on; one that fails in storage (disk full, I/O) after it changed a row fails the whole batch:
    /// the later writes in the block throw that error too, and `inBatch` rolls everything back and throws it, even
    /// if the block caught it.
    /// - Throws: what `block` throws (nothing it wrote is kept), or a storage error from a write or the commit.
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
                        // A write that failed in storage may have left part of itself: none of the batch is kept.
                        if let failure = batch.failure { throw failure }
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
///
/// At most one batch of a database runs at a time (it holds the writer), on one thread: the database keeps it
/// with that thread's id (``Database/batchThread``), so finding it is an atomic load and a compare.
// @unchecked: a batch is used only by the thread that runs its block — ``current(of:)`` hands it to no other
// thread — and its connection is the writer's, held for the whole batch.
final class Batch: @unchecked Sendable {
    let database: Database
    let connection: Connection
    private(set) var depth = 0
    /// The storage error a write of the batch failed with, when it ran without a savepoint of its own
    /// (``Database/writeInBatchOrGroup(_:)``): the batch can only be rolled back whole.
    private(set) var failure: (any Error)?

    init(database: Database, connection: Connection) {
        self.database = database
        self.connection = connection
    }

    /// The calling thread's id.
    static var currentThread: UInt {
        #if canImport(Darwin)
        UInt(bitPattern: pthread_self())
        #else
        UInt(pthread_self())
        #endif
    }

    /// The batch the current thread runs for `database`, if any.
    static func current(of database: Database) -> Batch? {
        let thread = database.batchThread.load(ordering: .acquiring)
        guard thread != 0, thread == currentThread else { return nil }
        return database.runningBatch
    }

    /// Runs `block` with this batch current on the thread.
    func run(_ block: () throws -> Void) throws {
        precondition(database.batchThread.load(ordering: .acquiring) == 0, "one batch at a time holds the writer")
        database.runningBatch = self
        database.batchThread.store(Self.currentThread, ordering: .releasing)
        defer {
            database.batchThread.store(0, ordering: .releasing)
            database.runningBatch = nil
        }
        try block()
    }

    /// Records that a write failed in storage without a savepoint to undo it alone.
    func fail(_ error: any Error) {
        if failure == nil { failure = error }
    }

    private var onCommit: [() -> Void] = []
    private var onRollback: [() -> Void] = []

    /// Work to do once the batch committed (marking blobs saved; nil for none), and to undo if it is rolled back (a
    /// document's revision id).
    func onOutcome(commit: (() -> Void)?, rollback: @escaping () -> Void) {
        if let commit { onCommit.append(commit) }
        onRollback.append(rollback)
    }

    /// Statements and buffers for the batch's revision writes into a collection, kept from one save to the next.
    var writeSessions: [Int64: Collection.WriteSession] = [:]

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
