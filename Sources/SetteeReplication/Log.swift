import Foundation
import Synchronization
public import Logging
public import SetteeStore

/// How much Couchbase Lite-style logging says (Couchbase Lite's `LogLevel`), lowest first.
public enum LogLevel: UInt8, Sendable, Comparable {
    case debug, verbose, info, warning, error, none

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    init(_ level: Logging.Logger.Level) {
        switch level {
        case .trace: self = .debug
        case .debug: self = .verbose
        case .info, .notice: self = .info
        case .warning: self = .warning
        case .error, .critical: self = .error
        }
    }
}

/// What a log message is about (Couchbase Lite's `LogDomain`, with its raw values: each a `LogDomains` bit).
public enum LogDomain: UInt8, Sendable {
    case database = 1, query = 2, replicator = 4, network = 8, listener = 16
}

/// A set of domains (Couchbase Lite's `LogDomains`).
public struct LogDomains: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let database = LogDomains(.database)
    public static let query = LogDomains(.query)
    public static let replicator = LogDomains(.replicator)
    public static let network = LogDomains(.network)
    public static let listener = LogDomains(.listener)
    public static let all: LogDomains = [.database, .query, .replicator, .network, .listener]

    init(_ domain: LogDomain) { self.init(rawValue: Int(domain.rawValue)) }
}

/// An app's own log sink (Couchbase Lite's custom `Logger` protocol; `import Settee` also names it `Logger`).
/// It is called from the threads that log, as in Couchbase Lite.
public protocol CustomLogger {
    /// The lowest level the sink wants.
    var level: LogLevel { get }
    func log(level: LogLevel, domain: LogDomain, message: String)
}

/// Where log files go (Couchbase Lite's `LogFileConfiguration`, a class as there: set its members after making it).
/// Once handed to ``FileLogger/config`` it is read-only, as in Couchbase Lite: a later change is a programming
/// error (Couchbase Lite raises an exception; here it stops the process with that message).
public final class LogFileConfiguration: Sendable {
    private struct Settings {
        var maxSize = LogFileConfiguration.defaultMaxSize
        var maxRotateCount = LogFileConfiguration.defaultMaxRotateCount
        var usePlainText = LogFileConfiguration.defaultUsePlaintext
        var readOnly = false
    }
    private let settings = Mutex(Settings())

    public let directory: String
    /// Rotate the file when it reaches this many bytes.
    public var maxSize: UInt64 {
        get { settings.withLock { $0.maxSize } }
        set { change { $0.maxSize = newValue } }
    }
    /// Rotated files kept besides the current one.
    public var maxRotateCount: Int {
        get { settings.withLock { $0.maxRotateCount } }
        set { change { $0.maxRotateCount = newValue } }
    }
    /// Plain text. Settee's files always are: Couchbase Lite's binary format is not written, so `false` (its
    /// default) writes text too.
    public var usePlainText: Bool {
        get { settings.withLock { $0.usePlainText } }
        set { change { $0.usePlainText = newValue } }
    }
    public init(directory: String) { self.directory = directory }

    private func change(_ body: (inout Settings) -> Void) {
        settings.withLock { s in
            precondition(!s.readOnly, "This LogFileConfiguration is read-only: it was set as Database.log.file.config")
            body(&s)
        }
    }

    /// The values now, the configuration read-only from here on (it was handed to the file logger).
    func freeze() -> (maxSize: UInt64, maxRotateCount: Int) {
        settings.withLock { s in
            s.readOnly = true
            return (s.maxSize, s.maxRotateCount)
        }
    }

    /// Couchbase Lite's defaults.
    public static let defaultUsePlaintext = false
    @available(*, deprecated, renamed: "defaultUsePlaintext")
    public static let defaultUsePlainText = false
    public static let defaultMaxSize: UInt64 = 524_288
    public static let defaultMaxRotateCount = 1
}

/// The library's logging (Couchbase Lite's `Database.log`): a console sink, a file sink and an app's own sink,
/// each with a level; the console also with domains. Settee's own messages (replication, the listener) go
/// through these sinks, and through swift-log's bootstrapped handler as before.
///
/// ```swift
/// Database.log.console.level = .verbose
/// Database.log.console.domains = [.replicator]
/// Database.log.file.config = LogFileConfiguration(directory: logsDirectory)
/// Database.log.file.level = .info
/// ```
// @unchecked: the custom sink is an app's object (not Sendable in Couchbase Lite's API), kept under `customLock` and called from the logging threads, as Couchbase Lite calls it.
public final class Log: @unchecked Sendable {
    public let console = ConsoleLogger()
    public let file = FileLogger()
    private let customLock = NSLock()
    private var customSink: (any CustomLogger)?

    /// The app's own sink, nil for none.
    public var custom: (any CustomLogger)? {
        get { customLock.withLock { customSink } }
        set { customLock.withLock { customSink = newValue } }
    }

    /// Sends a message to every sink that wants it: ``LogSinks``' once an app has set one of them (Couchbase Lite
    /// 3.2.2's API, which replaces this one), else this object's.
    public func log(level: LogLevel, domain: LogDomain, message: String) {
        guard level != .none else { return }
        if LogSinks.registry.write(level: level, domain: domain, message: message) { return }
        console.write(level: level, domain: domain, message: message)
        file.write(level: level, domain: domain, message: message)
        if let custom, level >= custom.level { custom.log(level: level, domain: domain, message: message) }
    }

    /// A swift-log logger whose messages reach these sinks (as `domain`) and the bootstrapped handler.
    public func logger(label: String, domain: LogDomain) -> Logging.Logger {
        Logging.Logger(label: label) { label in
            MultiplexLogHandler([Logging.Logger(label: label).handler, SinkLogHandler(log: self, domain: domain)])
        }
    }
}

/// Messages at or above ``level`` in ``domains`` go to standard error.
public final class ConsoleLogger: Sendable {
    private let state = Mutex<(level: LogLevel, domains: LogDomains)>((.warning, .all))
    /// Couchbase Lite's default: warnings and errors.
    public var level: LogLevel {
        get { state.withLock { $0.level } }
        set { state.withLock { $0.level = newValue } }
    }
    public var domains: LogDomains {
        get { state.withLock { $0.domains } }
        set { state.withLock { $0.domains = newValue } }
    }

    func write(level: LogLevel, domain: LogDomain, message: String) {
        let wanted = state.withLock { level >= $0.level && $0.domains.contains(LogDomains(domain)) }
        guard wanted else { return }
        LogWriter.standardError.write(Log.line(level: level, domain: domain, message: message))
    }
}

/// Messages at or above ``level`` appended to `settee.log` in ``config``'s directory, rotated by size.
public final class FileLogger: Sendable {
    private let state = Mutex<(config: LogFileConfiguration?, level: LogLevel)>((nil, .none))
    private let writer = LogFileWriter()
    /// Nil writes no file (the default).
    public var config: LogFileConfiguration? {
        get { state.withLock { $0.config } }
        set {
            state.withLock { $0.config = newValue }
            writer.configure(newValue.map {
                let values = $0.freeze()
                return .init(directory: $0.directory, maxSize: values.maxSize, keptFiles: values.maxRotateCount)
            })
        }
    }
    /// Couchbase Lite's default: `.none`, so a configured file is written only once a level is set.
    public var level: LogLevel {
        get { state.withLock { $0.level } }
        set { state.withLock { $0.level = newValue } }
    }

    func write(level: LogLevel, domain: LogDomain, message: String) {
        guard state.withLock({ $0.config != nil && level >= $0.level }) else { return }
        writer.write(Log.line(level: level, domain: domain, message: message))
    }
}

extension Log {
    static func line(level: LogLevel, domain: LogDomain, message: String) -> String {
        "\(timestamp()) \(domain) \(level): \(message)\n"
    }

    static func timestamp() -> String {
        Date().formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: true)
            .timeSeparator(.colon).timeZone(separator: .omitted))
    }
}

/// A swift-log handler that hands messages to ``Log``'s sinks.
struct SinkLogHandler: LogHandler {
    let log: Log
    let domain: LogDomain
    var metadata: Logging.Logger.Metadata = [:]
    var logLevel: Logging.Logger.Level = .trace

    subscript(metadataKey key: String) -> Logging.Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        log.log(level: LogLevel(event.level), domain: domain, message: event.message.description)
    }
}

extension Database {
    /// The library's logging sinks (Couchbase Lite's `Database.log`).
    public static let log = Log()
}
