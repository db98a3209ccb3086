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
    }
}
