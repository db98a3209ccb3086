#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A file descriptor that log lines and command-line messages are written to, which never stops the process: a
/// write that fails is dropped and counted, never a trap.
///
/// Every line Settee logs goes through one: the library's console and file sinks (`Database.log`, ``LogSinks``),
/// `settee serve`'s swift-log handlers (text and JSON), and every message of the `settee` commands. Foundation's
/// `FileHandle.write(_:)` traps when the write fails (a full disk under standard output: "There isn't enough
/// space", SIGILL); this writes with `write(2)` itself, retrying after `EINTR` and partial writes. Any other error
/// (`ENOSPC`, `EPIPE`, `EBADF`, `EIO`, `EAGAIN`, …) drops the rest of the line and adds one to
/// ``droppedWrites``, which `settee serve` exports as `settee_log_writes_dropped_total` on `/_metrics`. Nothing is
/// buffered, so the first line written once the descriptor takes bytes again is written whole; it is preceded by
/// one line on the same descriptor saying how many writes were dropped meanwhile.
///
/// ```swift
/// LogWriter.standardError.write("settee: listening\n")
/// LogWriter.droppedWrites    // 0 while every write has succeeded
/// ```
///
/// A closed pipe reports `EPIPE` only where `SIGPIPE` is ignored, as it is in `settee serve` (which ignores it
/// first thing, and NIO ignores it process-wide on Linux once it opens a socket); elsewhere the signal's default
/// action ends the process, as for any Unix tool whose reader has gone.
///
/// Thread safety: a value may be used from any thread. Lines are not serialized with each other: the kernel
/// keeps each whole `write(2)` of a line together on a pipe (up to `PIPE_BUF` bytes) or a regular file.
///
/// It lives in SetteeReplication because that is the lowest target that writes logs (the console and file
/// sinks); SetteeStore does file I/O but logs nothing, SetteeCore is pure, and the server (its `/_metrics`) and
/// the CLI both sit above it.
package struct LogWriter: Sendable, TextOutputStream {
    /// The descriptor written to. It is never closed by the writer.
    package let descriptor: Int32

    package init(descriptor: Int32) { self.descriptor = descriptor }

    /// The process's standard output (descriptor 1).
    package static let standardOutput = LogWriter(descriptor: 1)
    /// The process's standard error (descriptor 2).
    package static let standardError = LogWriter(descriptor: 2)

    /// Writes to log descriptors and log files dropped since the process started (each a line, or a message of
    /// a command), because the write failed or the log file could not be opened.
    package static var droppedWrites: Int { dropped.load(ordering: .relaxed) }

    private static let dropped = Atomic<Int>(0)
    /// ``droppedWrites`` as last reported in a line of the log.
    private static let reported = Atomic<Int>(0)

    /// Writes `bytes` whole, or drops them and counts the drop.
    /// - Returns: whether every byte was written.
    @discardableResult
    package func write(bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { send($0) }
    }

    /// Writes `string`'s UTF-8 whole, or drops it and counts the drop (`TextOutputStream`'s requirement, so
    /// swift-log's `StreamLogHandler` can write through it).
    package func write(_ string: String) {
        var text = string
        text.withUTF8 { _ = send(UnsafeRawBufferPointer($0)) }
    }

    private func send(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !bytes.isEmpty else { return true }
        reportDrops()
        guard Self.writeAll(descriptor, bytes) == 0 else {
            Self.countDrop()
            return false
        }
        return true
    }

    /// Before a line, says once how many writes were dropped since the last such line (the count is process-wide:
    /// a drop on another descriptor is reported here too). If this line can't be written either, the drops stay
    /// unreported (the line itself is no log line, so it isn't counted), for the next line to try.
    private func reportDrops() {
        let before = Self.reported.load(ordering: .relaxed)
        let now = Self.dropped.load(ordering: .relaxed)
        guard now > before,
              Self.reported.compareExchange(expected: before, desired: now, ordering: .relaxed).exchanged else { return }
        let n = now - before
        var line = "settee: \(n) log write\(n == 1 ? " was" : "s were") dropped (the log could not be written)\n"
        let error = line.withUTF8 { Self.writeAll(descriptor, UnsafeRawBufferPointer($0)) }
        if error != 0 { Self.reported.subtract(n, ordering: .relaxed) }
    }

    /// Counts a write dropped by a writer of its own (the log file sinks' `LogFileWriter`).
    static func countDrop() {
        dropped.add(1, ordering: .relaxed)
    }

    /// Writes all of `bytes` to `descriptor` with `write(2)`, retrying after `EINTR` and partial writes.
    /// - Returns: 0 when every byte was written, else the `errno` of the write that failed (bytes before it may
    ///   have been written).
    package static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard var next = bytes.baseAddress else { return 0 }
        var left = bytes.count
        while left > 0 {
            #if canImport(Glibc)
            let n = Glibc.write(descriptor, next, left)
            #elseif canImport(Musl)
            let n = Musl.write(descriptor, next, left)
            #else
            let n = Darwin.write(descriptor, next, left)
            #endif
            if n > 0 {
                next += n
                left -= n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                // 0 bytes written for a non-empty request (a device that takes nothing) is a failure too.
                return n < 0 ? errno : EIO
            }
        }
        return 0
    }
}
