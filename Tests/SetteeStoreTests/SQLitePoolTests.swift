import CSQLite
import Dispatch
import Foundation
import SetteeCore
import Synchronization
import Testing

@testable import SetteeStore

@Suite struct SQLitePoolTests {
    // A fresh instance per test: the directory lives as long as the test.
    private let dir: SQLiteTempDirectory

    init() throws {
        dir = try SQLiteTempDirectory()
    }

    private func makePool(_ configuration: PoolConfiguration = .init()) throws -> DatabasePool {
        try DatabasePool(path: dir.path(), configuration: configuration) { db in
            try db.execute("CREATE TABLE IF NOT EXISTS t(x INTEGER); CREATE TABLE IF NOT EXISTS counter(n INTEGER)")
            if try db.scalarInt("SELECT count(*) FROM counter") == 0 {
                try db.execute("INSERT INTO counter(n) VALUES (0)")
            }
        }
    }

    @Test func opensInWALWithPragmas() throws {
        let pool = try makePool()
        defer { pool.close() }
        #expect(pool.path == dir.path())
        try pool.write { db in
            let mode = try db.prepare("PRAGMA journal_mode")
            #expect(try mode.step())
            #expect(mode.string(0) == "wal")
            mode.reset()
            #expect(try db.scalarInt("PRAGMA synchronous") == 1)  // NORMAL
            #expect(try db.scalarInt("PRAGMA foreign_keys") == 1)
        }
        try pool.read { db throws in
            #expect(try db.scalarInt("PRAGMA foreign_keys") == 1)
            #expect(try db.scalarInt("PRAGMA query_only") == 1)
        }
        pool.close()

        let full = try makePool(.init(synchronousFull: true))
        defer { full.close() }
        try full.write { db throws in #expect(try db.scalarInt("PRAGMA synchronous") == 2) }
    }

    @Test func readerSeesCommittedData() throws {
        let pool = try makePool()
        defer { pool.close() }
        try pool.write { db in
            try db.transaction { try db.prepare("INSERT INTO t(x) VALUES (?)").run([.integer(5)]) }
        }
        #expect(try pool.read { try $0.scalarInt("SELECT sum(x) FROM t") } == 5)
        try pool.write { db in try db.prepare("INSERT INTO t(x) VALUES (?)").run([.integer(6)]) }
        #expect(try pool.read { try $0.scalarInt("SELECT sum(x) FROM t") } == 11)
    }

    @Test func readersAreQueryOnly() throws {
        let pool = try makePool()
        defer { pool.close() }
        let error = #expect(throws: SQLiteError.self) {
            try pool.read { db in try db.execute("INSERT INTO t(x) VALUES (1)") }
        }
        #expect(error?.code == SQLITE_READONLY)
    }

    @Test func readersDoNotBlockOnWriterMidTransaction() throws {
        let pool = try makePool()
        defer { pool.close() }
        try pool.write { db in try db.execute("INSERT INTO t(x) VALUES (1)") }

        let inTransaction = DispatchSemaphore(value: 0)
        let readerDone = DispatchSemaphore(value: 0)
        let writerDone = DispatchSemaphore(value: 0)
        let writerError = Mutex<(any Error)?>(nil)
        DispatchQueue.global().async {
            do {
                try pool.write { db in
                    try db.transaction {
                        try db.execute("INSERT INTO t(x) VALUES (2)")
                        inTransaction.signal()
                        // Hold the write transaction open until the reader has finished.
                        _ = readerDone.wait(timeout: .now() + 10)
                    }
                }
            } catch {
                writerError.withLock { $0 = error }
            }
            writerDone.signal()
        }
        #expect(inTransaction.wait(timeout: .now() + 10) == .success)
        let start = ContinuousClock.now
        let seen = try pool.read { db in
            try db.transaction(.deferred) { try db.scalarInt("SELECT count(*) FROM t") }
        }
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(seen == 1)  // the uncommitted row is invisible
        readerDone.signal()
        #expect(writerDone.wait(timeout: .now() + 10) == .success)
        #expect(writerError.withLock { $0 == nil })
        #expect(try pool.read { try $0.scalarInt("SELECT count(*) FROM t") } == 2)
    }

    @Test func concurrentWritesAreSerialized() throws {
        let pool = try makePool()
        defer { pool.close() }
        let failures = Atomic<Int>(0)
        let iterations = 200
        DispatchQueue.concurrentPerform(iterations: iterations) { i in
            do {
                if i % 3 == 0 {
                    // Concurrent readers in the mix.
                    _ = try pool.read { try $0.scalarInt("SELECT n FROM counter") }
                }
                try pool.write { db in
                    // Read-modify-write in Swift: only correct if writes are serialized.
                    let n = try db.scalarInt("SELECT n FROM counter")
                    try db.prepare("UPDATE counter SET n = ?").run([.integer(Int64(n + 1))])
                }
            } catch {
                failures.add(1, ordering: .relaxed)
            }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(try pool.read { try $0.scalarInt("SELECT n FROM counter") } == iterations)
    }

    @Test func readerCountIsBounded() throws {
        let pool = try makePool(.init(readers: 2))
        defer { pool.close() }
        let seen = Mutex<Set<ObjectIdentifier>>([])
        let active = Atomic<Int>(0)
        let maxActive = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            _ = try? pool.read { db -> Int in
                let now = active.add(1, ordering: .relaxed).newValue
                maxActive.max(now, ordering: .relaxed)
                seen.withLock { _ = $0.insert(ObjectIdentifier(db)) }
                usleep(5_000)
                active.subtract(1, ordering: .relaxed)
                return try db.scalarInt("SELECT count(*) FROM t")
            }
        }
        #expect(maxActive.load(ordering: .relaxed) <= 2)
        #expect(seen.withLock { $0.count } <= 2)
    }

    @Test func closedPoolThrows() throws {
        let pool = try makePool()
        try pool.write { db in try db.execute("INSERT INTO t(x) VALUES (1)") }
        _ = try pool.read { try $0.scalarInt("SELECT count(*) FROM t") }
        #expect(!pool.isClosed)
        pool.close()
        pool.close()
        #expect(pool.isClosed)

        let writeError = #expect(throws: SQLiteError.self) { try pool.write { _ in } }
        #expect(writeError?.code == SQLITE_MISUSE)
        #expect(writeError?.message == "database is closed")
        let readError = #expect(throws: SQLiteError.self) { try pool.read { _ in } }
        #expect(readError?.code == SQLITE_MISUSE)

        // The WAL was checkpointed and truncated; the data is in the main file.
        let walSize = (try? FileManager.default.attributesOfItem(atPath: dir.path() + "-wal")[.size] as? Int) ?? 0
        #expect(walSize == 0)
        let db = try Connection(path: dir.path(), readOnly: true)
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 1)
    }

    /// A bulk write leaves no WAL of its own size behind: once a background checkpoint has copied the WAL back,
    /// the next write starts it over and cuts the file down to `walSizeLimitBytes`.
    @Test func theWALIsCutBackAfterACheckpoint() throws {
        var configuration = PoolConfiguration()
        configuration.walAutocheckpointPages = 40
        configuration.walSizeLimitBytes = 64 * 1024
        let pool = try makePool(configuration)
        defer { pool.close() }
        let walPath = dir.path() + "-wal"
        func walSize() -> Int { (try? FileManager.default.attributesOfItem(atPath: walPath)[.size] as? Int) ?? 0 }
        let blob = [UInt8](repeating: 7, count: 6_000)
        // One transaction of ~3 MB: the WAL grows to hold it whole.
        try pool.write { db in
            let insert = try db.prepare("INSERT INTO t(x) VALUES (?)")
            for _ in 0..<500 {
                insert.bind(bytes: blob, at: 1)
                try insert.run()
            }
        }
        // The commit checkpointed (in the background, or on the writer for a WAL this far past the threshold);
        // small writes follow until one finds the WAL copied back and starts it over. (Without the limit the
        // file would stay at its high-water mark, the ~4 MB of that transaction.)
        let deadline = Date().addingTimeInterval(10)
        while walSize() > 64 * 1024 + 64 * 1024, Date() < deadline {
            try pool.write { db in try db.execute("UPDATE counter SET n = n + 1") }
            Thread.sleep(forTimeInterval: 0.02)
        }
        #expect(walSize() <= 128 * 1024, "the WAL stayed at \(walSize()) bytes")
        #expect(try pool.read { try $0.scalarInt("SELECT count(*) FROM t") } == 500)
    }

    @Test func closeWaitsForInFlightRead() throws {
        let pool = try makePool()
        let started = DispatchSemaphore(value: 0)
        let finished = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? pool.read { db -> Int in
                started.signal()
                usleep(200_000)
                let n = try db.scalarInt("SELECT count(*) FROM t")
                finished.store(true, ordering: .releasing)
                return n
            }
            done.signal()
        }
        #expect(started.wait(timeout: .now() + 10) == .success)
        pool.close()
        let readFinished = finished.load(ordering: .acquiring)
        #expect(readFinished)
        #expect(done.wait(timeout: .now() + 10) == .success)
    }

    @Test func readOnlyPoolRejectsWrites() throws {
        try makePool().close()
        let pool = try DatabasePool(path: dir.path(), configuration: .init(readOnly: true))
        defer { pool.close() }
        #expect(try pool.read { try $0.scalarInt("SELECT n FROM counter") } == 0)
        let error = #expect(throws: SQLiteError.self) {
            try pool.write { db in try db.execute("INSERT INTO t(x) VALUES (1)") }
        }
        #expect(error?.code == SQLITE_READONLY)
    }

    @Test func failedPrepareWriterThrows() throws {
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            _ = try DatabasePool(path: dir.path()) { _ in throw Boom() }
        }
        // The file is usable afterwards.
        try makePool().close()
    }

    /// A read past its deadline is interrupted (SQLite's progress handler) and fails with `.timeout`; the
    /// connection is usable again afterwards, without the handler.
    @Test func readsStopAtTheirDeadline() throws {
        let pool = try makePool()
        defer { pool.close() }
        let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM (SELECT x FROM c LIMIT 2000000000)"
        let started = DispatchTime.now().uptimeNanoseconds
        let error = #expect(throws: SetteeError.self) {
            try Database.withTimeout(0.2) { try pool.read { db in try db.scalarInt(endless) } }
        }
        #expect(error?.code == .timeout)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        #expect(seconds < 5, "stopped after \(seconds) s")
        // Without a deadline, the same readers run normally.
        #expect(try pool.read { db in try db.scalarInt("SELECT count(*) FROM (SELECT 1 UNION ALL SELECT 2)") } == 2)
        // A deadline already past fails before touching SQLite; a generous one doesn't interfere.
        #expect(throws: SetteeError.self) { try ReadDeadline.with(1) { try pool.read { db in try db.scalarInt("SELECT 1") } } }
        #expect(try Database.withTimeout(30) { try pool.read { db in try db.scalarInt("SELECT 7") } } == 7)
    }
}
