import Foundation
@testable import SetteeReplication
import SetteeTestSupport
import Testing

/// ``LogWriter`` and the log file sink: a write that fails is dropped and counted, never a trap, and writing
/// resumes once the descriptor (or file) takes bytes again. `/dev/full` answers every write with ENOSPC, so a full
/// disk is tested without mounting anything (the full-tmpfs test of `settee serve` is `LogFullDiskTests`).
///
/// ``LogWriter/droppedWrites`` is process-wide and only grows, so each test checks it grew by at least its own drops.
@Suite(.serialized) struct LogWriterTests {
    @Test func writeToAFullDeviceIsDroppedAndCounted() throws {
        let fd = open("/dev/full", O_WRONLY | O_CLOEXEC)
        try #require(fd >= 0, "/dev/full can't be opened")
        defer { close(fd) }
        let writer = LogWriter(descriptor: fd)
        let before = LogWriter.droppedWrites
        #expect(!writer.write(bytes: Array("a line\n".utf8)))
        writer.write("another line\n")
        #expect(LogWriter.droppedWrites - before >= 2)
        #expect(LogWriter.writeAll(fd, UnsafeRawBufferPointer(start: nil, count: 0)) == 0, "nothing to write is no failure")
        let error = Array("x".utf8).withUnsafeBytes { LogWriter.writeAll(fd, $0) }
        #expect(error == ENOSPC)
    }

    @Test func writeToAClosedDescriptorIsDroppedAndCounted() throws {
        // A number no descriptor can have (past the process's limit): closing one of ours and writing to its number
        // would write into whatever another test running at the same time opened under it meanwhile.
        let fd = Int32(getdtablesize()) + 1000
        let before = LogWriter.droppedWrites
        #expect(!LogWriter(descriptor: fd).write(bytes: Array("to a closed descriptor\n".utf8)))
        #expect(LogWriter.droppedWrites - before >= 1)
    }

    @Test func writeToAPipeWithoutReaderIsDroppedAndCounted() throws {
        // As `settee serve` does (and NIO does process-wide): a gone reader is EPIPE, not the end of the process.
        signal(SIGPIPE, SIG_IGN)
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        close(fds[0])
        defer { close(fds[1]) }
        let before = LogWriter.droppedWrites
        #expect(!LogWriter(descriptor: fds[1]).write(bytes: Array("nobody reads this\n".utf8)))
        #expect(LogWriter.droppedWrites - before >= 1)
        let error = Array("x".utf8).withUnsafeBytes { LogWriter.writeAll(fds[1], $0) }
        #expect(error == EPIPE)
    }

    /// A line longer than a pipe holds takes several `write(2)` calls (partial writes); it arrives whole.
    @Test func longLineArrivesWholeThroughPartialWrites() async throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        let line = Array(repeating: UInt8(ascii: "x"), count: 1 << 20) + [0x0a]
        let reader = Task.detached { () -> [UInt8] in
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress!, $0.count) }
                if n > 0 { received += chunk[0..<n]; continue }
                if n < 0 && errno == EINTR { continue }
                return received
            }
        }
        let written = try await offThePool { LogWriter(descriptor: writeEnd).write(bytes: line) }
        close(writeEnd)
        #expect(written)
        // The line whole, after (as the earlier tests dropped writes) the line saying how many were dropped.
        let received = await reader.value
        #expect(received.suffix(line.count).elementsEqual(line))
        let before = String(decoding: received.dropLast(line.count), as: UTF8.self)
        #expect(before.isEmpty || (before.hasPrefix("settee: ") && before.hasSuffix("dropped (the log could not be written)\n")),
                "before the line: \(before)")
        close(readEnd)
    }

    /// A descriptor that fails, then takes bytes again (here: replaced under the same number with `dup2`), is
    /// written to again: nothing stays broken after a drop.
    @Test func writesAgainOnceTheDescriptorTakesBytes() throws {
        let dir = TempDir()
        let full = open("/dev/full", O_WRONLY | O_CLOEXEC)
        try #require(full >= 0)
        let fd = dup(full)
        close(full)
        defer { close(fd) }
        let writer = LogWriter(descriptor: fd)
        #expect(!writer.write(bytes: Array("lost\n".utf8)))
        let path = dir.path + "/out.log"
        let file = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        try #require(file >= 0)
        try #require(dup2(file, fd) == fd)
        close(file)
        writer.write("kept\n")
        // The line, after (unless another test's line reported it first) one saying a write was dropped.
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasSuffix("kept\n"))
        #expect(!text.contains("lost"))
    }

    /// The file sink: a file that can't be written (here `settee.log` is a link to `/dev/full`) drops the line and
    /// counts it; once the file can be written, the next line is.
    @Test func logFileSinkDropsWhileItsFileIsFullAndResumes() throws {
        let dir = TempDir()
        let path = dir.path + "/settee.log"
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/dev/full")
        let writer = LogFileWriter()
        writer.configure(.init(directory: dir.path, maxSize: 1 << 20, keptFiles: 1))
        let before = LogWriter.droppedWrites
        writer.write("lost\n")
        #expect(LogWriter.droppedWrites - before >= 1)
        try FileManager.default.removeItem(atPath: path)
        writer.write("kept\n")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "kept\n")
    }

    /// A log directory that can't be made (under a file) drops each line and counts it.
    @Test func logFileSinkWithoutItsDirectoryDropsAndCounts() throws {
        let writer = LogFileWriter()
        writer.configure(.init(directory: "/dev/null/logs", maxSize: 1 << 20, keptFiles: 1))
        let before = LogWriter.droppedWrites
        writer.write("nowhere to go\n")
        writer.write("nor this\n")
        #expect(LogWriter.droppedWrites - before >= 2)
    }
}
