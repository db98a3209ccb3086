import Foundation
import Synchronization

/// The library's log sinks as Couchbase Lite 3.2.2 has them: a console, a file and an app's own sink, each a value
/// set as a whole. Once an app sets any of them, they replace `Database.log`'s sinks (Couchbase Lite makes the two
/// APIs exclusive); until then `Database.log` governs, and its defaults match these.
///
/// ```swift
/// LogSinks.console = ConsoleLogSink(level: .verbose, domains: [.replicator, .network])
/// LogSinks.file = FileLogSink(level: .info, directory: logsDirectory)
/// LogSinks.custom = CustomLogSink(level: .warning, logSink: MySink())
/// ```
public final class LogSinks {
    static let registry = LogSinkRegistry()

    /// Messages to standard error; nil for none. Couchbase Lite's default: warnings and errors, every domain.
    public static var console: ConsoleLogSink? {
        get { registry.state.console }
        set { registry.update { $0.console = newValue } }
    }

    /// Messages appended to `settee.log` in the sink's directory; nil (the default) for none.
    public static var file: FileLogSink? {
        get { registry.state.file }
        set { registry.update { $0.file = newValue } }
    }

    /// The app's own sink; nil (the default) for none.
    public static var custom: CustomLogSink? {
        get { registry.state.custom }
        set { registry.update { $0.custom = newValue } }
    }
}

/// Where messages at or above ``level`` in ``domains`` go to standard error (Couchbase Lite's `ConsoleLogSink`).
public struct ConsoleLogSink: Sendable {
    public let level: LogLevel
    public let domains: LogDomains

    public init(level: LogLevel, domains: LogDomains = .all) {
        self.level = level
        self.domains = domains
    }
}

/// A log file in ``directory``, rotated when it reaches ``maxFileSize`` bytes, keeping ``maxKeptFiles`` rotated
/// files (Couchbase Lite's `FileLogSink`). Settee writes plain text whatever ``usePlaintext`` says: Couchbase
/// Lite's binary log format is not written.
public struct FileLogSink: Sendable {
    public let level: LogLevel
    public let directory: String
    public let usePlaintext: Bool
    public let maxKeptFiles: Int32
    public let maxFileSize: Int64

    public init(level: LogLevel, directory: String, usePlainText: Bool = defaultUsePlaintext,
                maxKeptFiles: Int32 = defaultMaxKeptFiles, maxFileSize: Int64 = defaultMaxSize) {
        self.level = level
        self.directory = directory
        self.usePlaintext = usePlainText
        self.maxKeptFiles = maxKeptFiles
        self.maxFileSize = maxFileSize
    }

    /// Couchbase Lite's defaults.
    public static let defaultUsePlaintext = false
    public static let defaultMaxKeptFiles: Int32 = 2
    public static let defaultMaxSize: Int64 = 524_288
}

/// An app's sink for ``CustomLogSink`` (Couchbase Lite's `LogSinkProtocol`), called from the threads that log.
public protocol LogSinkProtocol {
    func writeLog(level: LogLevel, domain: LogDomain, message: String)
}

/// An app's own sink with the level and domains it wants (Couchbase Lite's `CustomLogSink`).
public struct CustomLogSink {
    public let level: LogLevel
    public let domains: LogDomains
    public let logSink: LogSinkProtocol

    public init(level: LogLevel, logSink: LogSinkProtocol) {
        self.init(level: level, domains: .all, logSink: logSink)
    }

    public init(level: LogLevel, domains: LogDomains, logSink: LogSinkProtocol) {
        self.level = level
        self.domains = domains
        self.logSink = logSink
    }
}

/// ``LogSinks``' state and its open log file.
// @unchecked: `current` holds an app's `LogSinkProtocol` object (not Sendable in Couchbase Lite's API); it is read
// and replaced under `lock`, and the sink is called from the logging threads as Couchbase Lite calls it.
final class LogSinkRegistry: @unchecked Sendable {
    struct State {
        var console: ConsoleLogSink? = ConsoleLogSink(level: .warning)
        var file: FileLogSink?
        var custom: CustomLogSink?
        /// Whether an app has set a sink, which makes these the sinks in use.
        var inUse = false
    }

    private let lock = NSLock()
    private var current = State()
    private let writer = LogFileWriter()

    var state: State { lock.withLock { current } }

    func update(_ change: (inout State) -> Void) {
        let file = lock.withLock {
            change(&current)
            current.inUse = true
            return current.file
        }
        writer.configure(file.map {
            .init(directory: $0.directory, maxSize: UInt64(max($0.maxFileSize, 1)), keptFiles: Int(max($0.maxKeptFiles, 0)))
        })
    }

    /// Writes a message to the sinks that want it; false while no app has set a sink (`Database.log` governs).
    func write(level: LogLevel, domain: LogDomain, message: String) -> Bool {
        let sinks = lock.withLock { current }
        guard sinks.inUse else { return false }
        let bit = LogDomains(domain)
        var line: String?
        func text() -> String {
            if let line { return line }
            line = Log.line(level: level, domain: domain, message: message)
            return line!
        }
        if let console = sinks.console, level >= console.level, console.domains.contains(bit) {
            LogWriter.standardError.write(text())
        }
        if let file = sinks.file, level >= file.level {
            writer.write(text())
        }
        if let custom = sinks.custom, level >= custom.level, custom.domains.contains(bit) {
            custom.logSink.writeLog(level: level, domain: domain, message: message)
        }
        return true
    }
}

/// A log file kept open between messages, appended to and rotated by size: `settee.log` becomes `settee.log.1`,
/// which becomes `settee.log.2`, up to the kept count.
///
/// A line that can't be written (a full disk, an I/O error, a directory it can't create or open the file in) is
/// dropped and counted in ``LogWriter/droppedWrites``; the file is closed and opened again for the next line, so
/// logging resumes once it can.
final class LogFileWriter: Sendable {
    struct Config: Equatable {
        var directory: String
        var maxSize: UInt64
        var keptFiles: Int
    }

    private struct Open: ~Copyable {
        var config: Config?
        /// The open file, -1 for none.
        var descriptor: Int32 = -1
        var size: UInt64 = 0

        mutating func close() {
            if descriptor >= 0 { _ = Foundation.close(descriptor) }
            descriptor = -1
        }
    }

    private let state = Mutex<Open>(Open())

    deinit { state.withLock { $0.close() } }

    /// Sets where messages go (nil: nowhere), closing the open file if that changes.
    func configure(_ config: Config?) {
        state.withLock { open in
            guard open.config != config else { return }
            open.close()
            open.config = config
        }
    }

    func write(_ line: String) {
        state.withLock { open in
            guard let config = open.config else { return }
            let path = (config.directory as NSString).appendingPathComponent("settee.log")
            let bytes = Array(line.utf8)
            for attempt in 0..<2 {
                if open.descriptor < 0 {
                    try? FileManager.default.createDirectory(atPath: config.directory, withIntermediateDirectories: true)
                    let fd = Foundation.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
                    guard fd >= 0 else {
                        LogWriter.countDrop()
                        return
                    }
                    var info = stat()
                    open.size = fstat(fd, &info) == 0 ? UInt64(max(info.st_size, 0)) : 0
                    open.descriptor = fd
                }
                guard attempt == 0, open.size > 0, open.size + UInt64(bytes.count) > config.maxSize else { break }
                open.close()
                Self.rotate(path, keeping: config.keptFiles)
            }
            let error = bytes.withUnsafeBytes { LogWriter.writeAll(open.descriptor, $0) }
            if error == 0 {
                open.size += UInt64(bytes.count)
            } else {
                LogWriter.countDrop()
                open.close()
            }
        }
    }

    private static func rotate(_ path: String, keeping kept: Int) {
        let fm = FileManager.default
        guard kept > 0 else {
            try? fm.removeItem(atPath: path)
            return
        }
        try? fm.removeItem(atPath: path + ".\(kept)")
        for n in stride(from: kept, to: 0, by: -1) {
            let from = n == 1 ? path : path + ".\(n - 1)"
            try? fm.moveItem(atPath: from, toPath: path + ".\(n)")
        }
    }
}
