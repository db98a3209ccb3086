import Foundation
import Testing
import SetteeCore
@testable import SetteeStore

/// A child process imports documents while we kill it with SIGKILL at random moments. Every document it
/// acknowledged (printed after its commit) must be there when the database is reopened, with that revision
/// or a later one, and the database must open cleanly every time.
@Suite(.serialized) struct CrashSafetyTests {
    @Test func killDuringWritesLosesNoAcknowledgedSave() throws {
        signal(SIGPIPE, SIG_IGN)  // the feeder writes into the pipe of a process we kill
        let dir = TempDir()
        let binary = builtProduct("settee")
        #expect(FileManager.default.isExecutableFile(atPath: binary), "settee binary not found at \(binary)")
        var acknowledged: [String: RevID] = [:]
        var rng = SystemRandomNumberGenerator()
        for round in 0..<12 {
            let process = SpawnedProcess()
            process.executableURL = URL(fileURLWithPath: binary)
            let batch = [1, 7, 100][round % 3]
            process.arguments = ["import", "--data", dir.path, "crashdb", "-", "--batch", "\(batch)"]
            let stdinPipe = Pipe(), stdoutPipe = Pipe()
            process.standardInput = stdinPipe
            process.standardOutput = stdoutPipe
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Feed documents continuously from another thread; some rewrite earlier ids (updates).
            let writer = stdinPipe.fileHandleForWriting
            let feeder = Thread {
                var i = 0
                while true {
                    let id = i % 3 == 0 && i > 0 ? "r\(round)-\(i / 2)" : "r\(round)-\(i)"
                    let line = "{\"_id\":\"\(id)\",\"round\":\(round),\"i\":\(i),\"pad\":\"\(String(repeating: "x", count: 200))\"}\n"
                    do { try writer.write(contentsOf: Data(line.utf8)) } catch { return }
                    i += 1
                }
            }
            feeder.start()
            let killAfter = Double.random(in: 0.15...0.6, using: &rng)
            Thread.sleep(forTimeInterval: killAfter)
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try? writer.close()
            let output = stdoutPipe.fileHandleForReading.readDataToEndOfFile()
            var roundAcks = 0
            for line in String(decoding: output, as: UTF8.self).split(separator: "\n") {
                // The last line may be cut off by the kill: only whole JSON lines count.
                guard let json = try? JSON.parse(String(line)), let id = json["id"]?.stringValue,
                      let rev = json["rev"]?.stringValue.flatMap(RevID.init) else { continue }
                acknowledged[id] = rev
                roundAcks += 1
            }
            // Reopen after the crash: it opens, and holds every acknowledged revision.
            let db = try dir.open("crashdb")
            let c = try db.defaultCollection()
            for (id, rev) in acknowledged {
                let record = try #require(try c.record(id: id, withTree: true), "lost \(id) in round \(round)")
                #expect(record.revID == rev || record.revID.generation > rev.generation,
                        "document \(id) at \(record.revID), acknowledged \(rev)")
            }
            #expect(db.lastSequence >= UInt64(acknowledged.count))
            db.close()
            #expect(roundAcks > 0 || round > 0, "the child acknowledged nothing before the kill")
        }
        #expect(acknowledged.count > 100)
    }
}
