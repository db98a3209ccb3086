import Foundation
@testable import SetteeStore
import SetteeTestSupport
import Synchronization
import Testing

/// Background work is owned by a scope that ends with its owner: nothing runs after, and nothing outlives, the end.
@Suite struct BackgroundTasksTests {
    @Test func closeCancelsAndWaitsForEveryTask() async throws {
        let tasks = BackgroundTasks()
        let ended = Mutex(0)
        // (Sleeps far longer than the bound below: a task the cancellation didn't wake would hold close() past it,
        // while a test process whose cooperative threads other tests keep busy — CI under load took 38 s to run
        // the cancelled tasks once — stays well inside it.)
        for _ in 0..<3 {
            #expect(tasks.run {
                try? await Task.sleep(for: .seconds(180))
                ended.withLock { $0 += 1 }
            })
        }
        // Blocking work on the store's threads, delayed: cancelled before it starts, it never runs.
        let ran = Mutex(false)
        #expect(tasks.runBlocking(after: .seconds(180)) { ran.withLock { $0 = true } })
        #expect(tasks.count == 4)
        let clock = ContinuousClock()
        let elapsed = await clock.measure { await tasks.close() }
        #expect(elapsed < .seconds(150))  // woken by the cancellation, not by their 180 s sleeps
        #expect(ended.withLock { $0 } == 3)  // each woke, cancelled, and ended before close returned
        #expect(!ran.withLock { $0 })
        #expect(tasks.count == 0)
        // Ended: later work is refused and never runs.
        #expect(!tasks.run { ran.withLock { $0 = true } })
        #expect(!tasks.runBlocking { ran.withLock { $0 = true } })
        try await Task.sleep(for: .milliseconds(50))
        #expect(!ran.withLock { $0 })
    }

    @Test func closeWaitsForBlockingWorkUnderWay() async throws {
        let tasks = BackgroundTasks()
        let state = Mutex((started: false, finished: false))
        tasks.runBlocking {
            state.withLock { $0.started = true }
            usleep(300_000)
            state.withLock { $0.finished = true }
        }
        while !state.withLock({ $0.started }) { try await Task.sleep(for: .milliseconds(5)) }
        await tasks.close()
        #expect(state.withLock { $0.finished })
    }

    /// A database's background work (here its change watcher's tasks) is cancelled when it closes.
    @Test func aClosedDatabaseEndsItsBackgroundWork() async throws {
        let dir = TempDir()
        let db = try Database(name: "bg", config: DatabaseConfiguration(directory: dir.path))
        let commits = db.commits()
        #expect(db.background.run { for await _ in commits {} })
        #expect(db.background.count == 1)
        db.close()
        for _ in 0..<200 where db.background.count > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(db.background.count == 0)
        #expect(!db.background.run {})
    }
}
