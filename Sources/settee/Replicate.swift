import ArgumentParser
import Foundation
import Synchronization
import Settee
import UnixSignals

struct Replicate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replicate between two databases (local names or URLs): CouchDB's protocol over http(s), Couchbase Lite's over ws(s).",
        discussion: """
            SOURCE and TARGET are database names in --data or URLs of databases on any CouchDB-compatible \
            server (http://user:pass@host:5984/db), or ws(s):// URLs of databases served over Couchbase Lite's \
            replication protocol (`settee serve`'s /{db}/_blipsync, Sync Gateway). By default SOURCE's changes go to TARGET (--push); --pull \
            brings TARGET's changes into SOURCE; both flags do both. Checkpoints are kept on both sides, so a \
            repeated or interrupted replication resumes where it stopped. --continuous keeps following changes \
            until interrupted (SIGINT/SIGTERM stop it after recording a checkpoint).
            """)

    @OptionGroup var options: DataOptions
    @Argument(help: "Source database: a local name or a URL.") var source: String
    @Argument(help: "Target database: a local name or a URL.") var target: String
    @Flag(help: "Send SOURCE's changes to TARGET (the default).") var push = false
    @Flag(help: "Bring TARGET's changes into SOURCE.") var pull = false
    @Flag(help: "Keep replicating as changes happen, until interrupted.") var continuous = false
    @Flag(help: "Create the receiving database if it does not exist (TARGET on a push, SOURCE on a pull).")
    var createTarget = false
    @Option(name: .customLong("doc-ids"), help: "Only these document ids (comma-separated).") var docIDs: String?
    @Option(help: "Only documents matching this Mango selector (JSON).") var selector: String?
    @Option(help: "Changes per batch.") var batchSize: Int = 500
    @Flag(help: "Ignore checkpoints: replicate everything again.") var reset = false
    @Flag(help: "No progress bar; print only the final JSON report.") var quiet = false
    @Option(name: .customLong("ca-file"),
            help: "PEM CA bundle to verify HTTPS peers against instead of the system's trust store (default: $SETTEE_CA_FILE).")
    var caFile: String?
    @Flag(help: "Allow sending credentials over plain HTTP to a host that is not loopback.")
    var allowInsecureCredentials = false

    func run() async throws {
        var opened: [Database] = []
        defer { for db in opened { db.close() } }
        func endpoint(_ text: String, create: Bool) throws -> any Endpoint {
            if text.contains("://") {
                let ca = (caFile ?? ProcessInfo.processInfo.environment["SETTEE_CA_FILE"]).flatMap { $0.isEmpty ? nil : $0 }
                return try RemoteEndpoint(url: text, trustedRootCertificatesPath: ca,
                                          allowInsecureCredentials: allowInsecureCredentials)
            }
            try DocumentIDs.validateDatabaseName(text)
            guard create || Database.exists(name: text, inDirectory: options.data) else {
                throw ValidationError("database `\(text)` does not exist in \(options.data)"
                    + " (--create-target creates the receiving database)")
            }
            let db = try options.open(text, create: true)
            opened.append(db)
            return LocalEndpoint(database: db)
        }
        do {
            guard batchSize > 0 else { throw ValidationError("--batch-size must be positive") }
            let bothWays = push && pull
            let pushes = push || !pull
            // --create-target creates whichever side receives changes (TARGET on a push, SOURCE on a pull).
            let a = try endpoint(source, create: createTarget && pull)
            let b = try endpoint(target, create: createTarget && pushes)
            var o = ReplicationOptions()
            o.continuous = continuous
            o.createTarget = createTarget
            o.batchSize = batchSize
            o.reset = reset
            o.documentIDs = docIDs.map { $0.split(separator: ",").map(String.init) }
            if o.documentIDs?.isEmpty == true { throw ValidationError("--doc-ids needs at least one id") }
            if let selector {
                do { o.selector = try JSON.parse(selector) } catch { throw ValidationError("--selector is not JSON: \(error)") }
            }
            var directions: [(any Endpoint, any Endpoint)] = []
            if pushes { directions.append((a, b)) }
            if pull || bothWays { directions.append((b, a)) }
            let progress = ProgressBar(enabled: !quiet)
            let replications = directions.map { src, tgt in
                Replication(source: src, target: tgt, options: o) { status in progress.update(status) }
            }
            // SIGINT or SIGTERM stop the replications, which record a checkpoint first (trapped before they start).
            let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
            let work = Task { await withTaskGroup(
                of: (Int, Swift.Result<ReplicationResult, ReplicationError>).self
            ) { group in
                for (i, r) in replications.enumerated() {
                    group.addTask {
                        do { return (i, .success(try await r.run())) } catch let e as ReplicationError {
                            return (i, .failure(e))
                        } catch { return (i, .failure(ReplicationError.from(error))) }
                    }
                }
                var out = [Swift.Result<ReplicationResult, ReplicationError>?](repeating: nil, count: replications.count)
                for await (i, r) in group { out[i] = r }
                return out.compactMap { $0 }
            } }
            let stopper = Task {
                for await _ in signals {
                    work.cancel()
                    return
                }
            }
            let results = await work.value
            stopper.cancel()
            progress.finish()
            var failed = false
            for (i, result) in results.enumerated() {
                let (src, tgt) = directions[i]
                switch result {
                case .success(let r):
                    let s = r.status
                    emit(["ok": true, "source": .string(src.displayName), "target": .string(tgt.displayName),
                          "replication_id": .string(r.replicationID), "source_last_seq": r.sourceLastSeq,
                          "docs_read": .int(Int64(s.docsRead)), "docs_written": .int(Int64(s.docsWritten)),
                          "doc_write_failures": .int(Int64(s.docWriteFailures)),
                          "missing_checked": .int(Int64(s.revisionsChecked))])
                case .failure(let e):
                    failed = true
                    LogWriter.standardError.write("error: \(src.displayName) → \(tgt.displayName): \(e)\n")
                }
            }
            if failed { throw ExitCode(1) }
        } catch let e as ExitCode {
            throw e
        } catch let e as ValidationError {
            throw e
        } catch {
            throw fail(error)
        }
    }
}

/// A one-line progress bar on stderr (only when stderr is a terminal, or SETTEE_PROGRESS=1).
final class ProgressBar: Sendable {
    private let enabled: Bool
    private let started = Date()
    private let drawn = Mutex<(last: Date, drew: Bool)>((.distantPast, false))

    init(enabled: Bool) {
        self.enabled = enabled && (isatty(2) != 0 || ProcessInfo.processInfo.environment["SETTEE_PROGRESS"] == "1")
    }

    func update(_ s: ReplicatorStatus) {
        guard enabled else { return }
        drawn.withLock { drawn in
            let now = Date()
            guard now.timeIntervalSince(drawn.last) > 0.2 else { return }
            drawn.last = now
            let p = s.progress
            let fraction = p.total == 0 ? 0 : Double(p.completed) / Double(p.total)
            let width = 30, filled = Int(fraction * Double(width))
            let bar = String(repeating: "=", count: filled) + String(repeating: " ", count: width - filled)
            let rate = Double(s.docsWritten) / max(now.timeIntervalSince(started), 0.001)
            let line = String(format: "\r[%@] %3d%%  %@  written %d  failed %d  %.0f docs/s ", bar, Int(fraction * 100),
                              s.activity.name, s.docsWritten, s.docWriteFailures, rate)
            LogWriter.standardError.write(line)
            drawn.drew = true
        }
    }

    func finish() {
        drawn.withLock { if $0.drew { LogWriter.standardError.write("\n") } }
    }
}
