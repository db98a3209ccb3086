import Foundation
@testable import SetteeReplication
import SetteeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A replicator stages large attachment bodies in a directory of its process, locked while the process runs; what
/// a killed process left is removed by a later one, and nothing a running process holds is.
@Suite struct StagingSweepTests {
    let files = FileManager.default

    /// A directory `name` under `root` holding a staged file (and a `.lock` unless `locked` is nil; held by this
    /// test while `locked` is true), last changed `age` seconds ago. Returns it and the held lock's descriptor.
    func make(_ name: String, in root: String, locked: Bool?, age seconds: TimeInterval) throws -> (path: String, fd: Int32) {
        let path = (root as NSString).appendingPathComponent(name)
        try files.createDirectory(atPath: path, withIntermediateDirectories: true)
        #expect(files.createFile(atPath: path + "/staged", contents: Data([1, 2, 3])))
        var fd: Int32 = -1
        if let locked {
            fd = open(path + "/" + ReplicationStaging.lockName, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
            if locked { #expect(flock(fd, LOCK_EX | LOCK_NB) == 0) } else { close(fd); fd = -1 }
        }
        try age(path, seconds)
        return (path, fd)
    }

    func age(_ path: String, _ seconds: TimeInterval) throws {
        var all = [path]
        if let inside = try? files.contentsOfDirectory(atPath: path) { all += inside.map { path + "/" + $0 } }
        for item in all {
            try files.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -seconds)], ofItemAtPath: item)
        }
    }

    @Test func whatNoProcessHoldsIsRemovedAndNothingElse() throws {
        let root = TempDir()
        let old = ReplicationStaging.staleAge + 60
        // A killed process's directory: its lock is free, whatever its age.
        let killed = try make("101.a", in: root.path, locked: false, age: 1)
        // A running process's (in this process or another PID namespace: the lock says so), however old.
        let running = try make("102.b", in: root.path, locked: true, age: old)
        // No lock (its process died before taking it): by age, counting the files in it.
        let unlockedOld = try make("103.c", in: root.path, locked: nil, age: old)
        let unlockedBusy = try make("104.d", in: root.path, locked: nil, age: old)
        try files.setAttributes([.modificationDate: Date()], ofItemAtPath: unlockedBusy.path + "/staged")
        // A claim cut short (hidden), and a loose file of the layout before directories: by age.
        let hiddenOld = try make(".105.e", in: root.path, locked: false, age: old)
        let hiddenNew = try make(".106.f", in: root.path, locked: false, age: 1)
        let looseOld = root.path + "/0F3A-loose", looseNew = root.path + "/0F3B-loose"
        #expect(files.createFile(atPath: looseOld, contents: Data([1])) && files.createFile(atPath: looseNew, contents: Data([1])))
        try age(looseOld, old)
        // The sweeping process's own directory.
        let own = try make("107.g", in: root.path, locked: false, age: old)

        ReplicationStaging.sweepStale(in: root.path, keeping: "107.g")
        #expect(!files.fileExists(atPath: killed.path))
        #expect(files.fileExists(atPath: running.path + "/staged"))
        #expect(!files.fileExists(atPath: unlockedOld.path))
        #expect(files.fileExists(atPath: unlockedBusy.path + "/staged"))
        #expect(!files.fileExists(atPath: hiddenOld.path))
        #expect(files.fileExists(atPath: hiddenNew.path))
        #expect(!files.fileExists(atPath: looseOld))
        #expect(files.fileExists(atPath: looseNew))
        #expect(files.fileExists(atPath: own.path + "/staged"))

        // Once the running process ends (its lock released), its directory goes. (A process another test forks in
        // this instant holds a copy of the descriptor, and so the lock, until it execs: the sweep is tried again
        // for a moment, as a later replicator's sweep would be.)
        close(running.fd)
        let deadline = Date(timeIntervalSinceNow: 5)
        repeat {
            ReplicationStaging.sweepStale(in: root.path)
            if !files.fileExists(atPath: running.path) { break }
            usleep(20_000)
        } while Date() < deadline
        #expect(!files.fileExists(atPath: running.path))
        // A missing root is nothing to sweep.
        ReplicationStaging.sweepStale(in: root.path + "/absent")
    }

    /// A claimed directory is named by the process, holds its lock, and survives another process's sweep.
    @Test func aClaimedDirectoryIsLockedWhileItsProcessRuns() throws {
        let root = TempDir()
        let path = ReplicationStaging.claimDirectory(in: root.path)
        let name = (path as NSString).lastPathComponent
        #expect(name.hasPrefix("\(getpid())."))
        #expect(files.fileExists(atPath: path + "/" + ReplicationStaging.lockName))
        // (A sweep by another process: a descriptor of its own, so the lock conflicts as it would there.)
        ReplicationStaging.sweepStale(in: root.path)
        #expect(files.fileExists(atPath: path + "/" + ReplicationStaging.lockName))
        #expect(!((try? files.contentsOfDirectory(atPath: root.path)) ?? []).contains { $0.hasPrefix(".") })
        #expect(StagedAttachment.directory.contains("/settee-replication/\(getpid())."))
    }
}
