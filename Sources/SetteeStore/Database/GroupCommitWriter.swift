import Foundation

/// Coalesces concurrent writes into group commits.
///
/// Callers on any thread `submit` a unit of work. The first caller to find no commit in progress becomes the
/// leader: it takes every pending unit, runs them in one `BEGIN IMMEDIATE … COMMIT` on the writer connection
/// (each unit in its own savepoint, so one failing unit does not undo the others), then wakes the other
/// callers. Units that arrive while a commit runs wait for the next group. A unit's result is returned only
/// after its transaction committed, so a save that returned survives a crash (WAL with `synchronous=NORMAL`
/// survives a process crash; `FULL` also survives power loss).
///
/// `afterCommit` runs on the leader's thread after each commit, outside the transaction: the store publishes
/// change notifications from there.
// @unchecked: `pending` and `leaderActive` are guarded by `condition` (followers wait on it for the leader, which a
// Mutex can't do); the hooks are set once by the database before its first write and only read afterwards.
final class GroupCommitWriter: @unchecked Sendable {
    /// One submitted unit of work and the slot its result lands in.
    private final class Job {
        let work: (Connection) throws -> Void
        var error: (any Error)?
        var done = false
        init(work: @escaping (Connection) throws -> Void) { self.work = work }
    }

    private let pool: DatabasePool
    private let condition = NSCondition()
    private var pending: [Job] = []
    private var leaderActive = false
    /// Called inside the transaction before COMMIT (persist counters), and after commit (notify).
    var beforeCommit: ((Connection) throws -> Void)?
    /// Called first inside each transaction (re-sync state another process may have changed).
    var afterBegin: ((Connection) throws -> Void)?
    var afterCommit: (() -> Void)?
    /// Called after a failed group so in-memory state can be restored to what the database holds.
    var afterRollback: (() -> Void)?

    init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Runs `work` inside a write transaction shared with concurrent callers; returns after the commit.
    ///
    /// - Throws: whatever `work` throws (its savepoint is rolled back), or the commit's error.
    func submit<T>(_ work: @escaping (Connection) throws -> T) throws -> T {
        var result: T?
        let job = Job { connection in result = try work(connection) }
        condition.lock()
        pending.append(job)
        while !job.done {
            if !leaderActive {
                leaderActive = true
                let group = pending
                pending.removeAll(keepingCapacity: true)
                condition.unlock()
                runGroup(group)
                condition.lock()
                for j in group { j.done = true }
                leaderActive = false
                condition.broadcast()
            } else {
                condition.wait()
            }
        }
        condition.unlock()
        if let error = job.error { throw error }
        return result!
    }

    private func runGroup(_ group: [Job]) {
        do {
            try pool.write { connection in
                try connection.transaction(.immediate) {
                    try afterBegin?(connection)
                    for (i, job) in group.enumerated() {
                        do {
                            if group.count == 1 {
                                try job.work(connection)
                            } else {
                                try connection.savepoint("job\(i % 8)") { try job.work(connection) }
                            }
                        } catch {
                            job.error = error
                            if group.count == 1 { throw error }
                        }
                    }
                    try beforeCommit?(connection)
                }
            }
            afterCommit?()
        } catch {
            for job in group where job.error == nil { job.error = error }
            afterRollback?()
        }
    }
}
