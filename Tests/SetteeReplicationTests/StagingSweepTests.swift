import Foundation
@testable import SetteeReplication
import SetteeTestSupport
import Testing

/// A replicator stages large attachment bodies in `settee-replication/<pid>`; what a killed process left there is
/// removed by a later one, and nothing a running process holds is.
@Suite struct StagingSweepTests {
    /// The id of a process that has exited (and been reaped, so no process has it now, barring reuse).
    static func exitedPID() throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/true")
        try process.run()
        process.waitUntilExit()
        return process.processIdentifier
    }

    @Test func aDeadProcessesOldDirectoryIsRemovedAndNothingElse() throws {
        let root = TempDir()
        let files = FileManager.default
        func make(_ name: String, age: TimeInterval) throws -> String {
            let path = (root.path as NSString).appendingPathComponent(name)
            try files.createDirectory(atPath: path, withIntermediateDirectories: true)
            #expect(files.createFile(atPath: path + "/staged", contents: Data([1, 2, 3])))
            try files.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -age)], ofItemAtPath: path)
            return path
        }
        let dead = try Self.exitedPID()
        let killedLongAgo = try make(String(dead), age: StagedAttachment.staleAge + 60)
        let running = try make(String(getppid()), age: StagedAttachment.staleAge + 60)   // our parent runs
        let own = try make(String(getpid()), age: StagedAttachment.staleAge + 60)
        let notAProcess = try make("notes", age: StagedAttachment.staleAge + 60)

        StagedAttachment.sweepStale(in: root.path)
        #expect(!files.fileExists(atPath: killedLongAgo))
        #expect(files.fileExists(atPath: running + "/staged"))
        #expect(files.fileExists(atPath: own + "/staged"))
        #expect(files.fileExists(atPath: notAProcess + "/staged"))

        // A dead process's directory touched recently may be a live process's in another PID namespace: it stays,
        // unless it is empty (as a process that ended normally leaves it).
        let recent = try make(String(dead), age: 5)
        StagedAttachment.sweepStale(in: root.path)
        #expect(files.fileExists(atPath: recent + "/staged"))
        try files.removeItem(atPath: recent + "/staged")
        StagedAttachment.sweepStale(in: root.path)
        #expect(!files.fileExists(atPath: recent))
        // A missing root is nothing to sweep.
        StagedAttachment.sweepStale(in: root.path + "/absent")
    }

    @Test func theStagingDirectoryIsThisProcesses() {
        #expect(StagedAttachment.directory.hasSuffix("/settee-replication/\(getpid())"))
    }
}
