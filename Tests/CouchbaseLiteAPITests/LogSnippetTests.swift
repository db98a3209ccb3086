import Foundation
import Testing
import Settee

/// Couchbase Lite's `Database.log` (Swift): console, file and custom sinks with levels and domains.
@Suite(.serialized) struct LogSnippetTests {
    final class LogTestLogger: Logger {
        let lines = Lines()
        var level: LogLevel { .info }
        func log(level: LogLevel, domain: LogDomain, message: String) {
            lines.add("\(domain) \(level) \(message)")
        }
    }

    final class Lines: @unchecked Sendable {
        // @unchecked: `all` is guarded by `lock`.
        private let lock = NSLock()
        private var all: [String] = []
        func add(_ line: String) { lock.withLock { all.append(line) } }
        var snapshot: [String] { lock.withLock { all } }
    }

    @Test func customAndFileSinksHearTheLibrary() async throws {
        let s = try SnippetDatabase()
        let logs = s.dir.path + "/logs"

        // Custom logging
        let logger = LogTestLogger()
        Database.log.custom = logger
        Database.log.file.config = LogFileConfiguration(directory: logs)
        Database.log.file.level = .info
        Database.log.console.level = .warning
        Database.log.console.domains = .all
        defer {
            Database.log.custom = nil
            Database.log.file.config = nil
        }

        Database.log.log(level: .info, domain: .database, message: "hello from the test")
        Database.log.log(level: .verbose, domain: .database, message: "below every level")

        // A replication with a peer that is not there logs what happened, in the replicator domain.
        var config = ReplicatorConfiguration(target: URLEndpoint(url: URL(string: "http://127.0.0.1:9/nothing")!))
        config.addCollection(s.collection)
        config.maxAttempts = 1
        let replicator = Replicator(config: config)
        replicator.start()
        let status = await replicator.waitUntilStopped()
        #expect(status.error?.kind == .unreachable)

        let heard = logger.lines.snapshot
        #expect(heard.contains("database info hello from the test"))
        #expect(!heard.contains { $0.contains("below every level") })
        #expect(heard.contains { $0.hasPrefix("replicator ") })
        let file = try String(contentsOfFile: logs + "/settee.log", encoding: .utf8)
        #expect(file.contains("database info: hello from the test"))
        #expect(!file.contains("below every level"))
        #expect(LogDomains.all.contains(.replicator) && LogLevel.debug < LogLevel.error)
        #expect(LogDomain.listener.rawValue == 16 && LogDomains.network.rawValue == 8)

        // Couchbase Lite 3.2.2's LogSinks replace `Database.log` once set (this runs after the part above: the
        // switch is one-way in a process, as Couchbase Lite's).
        try logSinksReplaceDatabaseLog(logs: s.dir.path + "/sink-logs")
    }

    struct SinkTestLogSink: LogSinkProtocol {
        let lines: Lines
        func writeLog(level: LogLevel, domain: LogDomain, message: String) {
            lines.add("\(domain) \(level) \(message)")
        }
    }

    func logSinksReplaceDatabaseLog(logs: String) throws {
        let sink = SinkTestLogSink(lines: Lines())
        let oldSink = LogTestLogger()
        Database.log.custom = oldSink
        LogSinks.custom = CustomLogSink(level: .info, domains: [.database], logSink: sink)
        LogSinks.file = FileLogSink(level: .verbose, directory: logs, maxKeptFiles: 2, maxFileSize: 4096)
        LogSinks.console = ConsoleLogSink(level: .none)
        defer {
            LogSinks.custom = nil
            LogSinks.file = nil
            LogSinks.console = ConsoleLogSink(level: .warning)
            Database.log.custom = nil
        }
        #expect(LogSinks.file?.maxKeptFiles == 2 && FileLogSink.defaultMaxKeptFiles == 2)

        Database.log.log(level: .info, domain: .database, message: "to the new sinks")
        Database.log.log(level: .warning, domain: .query, message: "not the custom sink's domain")
        Database.log.log(level: .debug, domain: .database, message: "below every level")
        #expect(sink.lines.snapshot == ["database info to the new sinks"])
        #expect(oldSink.lines.snapshot.isEmpty)

        // The file rotates by size and keeps two rotated files.
        for n in 0..<400 {
            Database.log.log(level: .verbose, domain: .network, message: "line \(n) of the rotation test")
        }
        let fm = FileManager.default
        #expect(fm.fileExists(atPath: logs + "/settee.log.1") && fm.fileExists(atPath: logs + "/settee.log.2"))
        #expect(!fm.fileExists(atPath: logs + "/settee.log.3"))
        let current = try String(contentsOfFile: logs + "/settee.log", encoding: .utf8)
        #expect(current.contains("line 399 of the rotation test"))
        #expect(((try fm.attributesOfItem(atPath: logs + "/settee.log"))[.size] as? Int ?? .max) <= 4096)
    }
}
