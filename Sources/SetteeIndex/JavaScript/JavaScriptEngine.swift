import Foundation
import Logging
package import SetteeCore
import Synchronization

/// Runs CouchDB's JavaScript design functions in a pool of query-server processes (`settee-js`, SpiderMonkey),
/// speaking CouchDB's query-server protocol to them as CouchDB speaks it to `couchjs`.
///
/// Each call takes one process for itself, so calls run in parallel up to ``Configuration/maxProcesses``; more
/// wait. Waiting is fair between design documents (map functions count by their source): while callers of `n`
/// of them hold or want processes, one that already holds `maxProcesses / n` (at least one) waits, so one
/// database's endless or slow functions can hold at most their share and never keep the others' out for longer
/// than a call's time limit. A function that runs past ``Configuration/timeout`` has its process killed (the call fails with
/// ``JavaScriptError/timeout``) and a new process takes its place on the next call; so does a process that crashes.
/// Functions run in another process with no file system, network or process access, under a heap cap.
///
/// Processes remember what was loaded into them (map functions, design documents by revision), and a call prefers
/// an idle process that already has what it needs.
package final class JavaScriptEngine: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// The query server to run; nil finds `settee-js` beside the running executable (or `SETTEE_JS`).
        public var executable: String?
        /// Processes at most (CouchDB's `[query_server_config] os_process_limit`); default: the cores, ≥ 2.
        /// While callers of several design documents wait, each gets a fair share of them (see ``JavaScriptEngine``).
        public var maxProcesses: Int
        /// Idle processes kept for the next calls (CouchDB's `os_process_soft_limit`); a process returned beyond
        /// it is stopped. Default: ``maxProcesses``.
        public var idleProcesses: Int
        /// A call's time limit (CouchDB's `[couchdb] os_process_timeout`, 5 s).
        public var timeout: Duration
        /// A process's JavaScript heap cap, in MiB.
        public var maxHeapMB: Int
        /// CouchDB's `[query_server_config] reduce_limit`: a reduce whose output doesn't shrink fails.
        public var reduceLimit: Bool
        /// Commands a process answers before it is replaced (bounds what a long-lived process accumulates).
        public var commandsPerProcess: Int

        public init(executable: String? = nil, maxProcesses: Int = max(2, ProcessInfo.processInfo.activeProcessorCount),
                    timeout: Duration = .seconds(5), maxHeapMB: Int = 256, reduceLimit: Bool = true,
                    commandsPerProcess: Int = 1_000_000, idleProcesses: Int? = nil) {
            self.executable = executable
            self.maxProcesses = maxProcesses
            self.idleProcesses = idleProcesses ?? maxProcesses
            self.timeout = timeout
            self.maxHeapMB = maxHeapMB
            self.reduceLimit = reduceLimit
            self.commandsPerProcess = commandsPerProcess
        }
    }

    private struct State {
        var configuration: Configuration
        var idle: [QueryServerProcess] = []
        var running = 0
        var started = 0
        /// Counts check-ins: a caller waiting for a process waits until it changes (no wake-up is lost between
        /// finding no process and starting to wait).
        var generation = 0
        /// Callers holding or waiting for a process, and processes held, by owner (a design document, or a set
        /// of map functions): the fair share.
        var demand: [String: Int] = [:]
        var holding: [String: Int] = [:]

        /// A call of `owner` is over (its process returned, or never started).
        mutating func release(_ owner: String) {
            if let held = holding[owner] { holding[owner] = held > 1 ? held - 1 : nil }
            if let wanted = demand[owner] { demand[owner] = wanted > 1 ? wanted - 1 : nil }
        }

        /// Whether `owner` may take a process now: one is free or may be started, and it holds less than its share.
        func mayTake(_ owner: String) -> Bool {
            let share = max(1, configuration.maxProcesses / max(1, demand.count))
            return holding[owner, default: 0] < share
        }
    }

    private let state: Mutex<State>
    /// Signalled when a process is returned (or a slot frees up).
    private let returned = NSCondition()
    /// Where `log()` calls of design functions go.
    private let logSink: Mutex<@Sendable (String) -> Void>

    /// The engine views, validation and filters use unless given another.
    public static let shared = JavaScriptEngine()

    public init(configuration: Configuration = Configuration()) {
        state = Mutex(State(configuration: configuration))
        // CouchDB writes a design function's `log()` to the node's log at info level.
        let logger = Logger(label: "settee.js")
        logSink = Mutex({ message in logger.info("\(message)") })
    }

    public var configuration: Configuration {
        get { state.withLock { $0.configuration } }
    }

    /// Applies new settings; processes already running keep theirs until replaced (idle ones are replaced now).
    public func configure(_ configuration: Configuration) {
        let stale = state.withLock { s -> [QueryServerProcess] in
            guard s.configuration != configuration else { return [] }
            s.configuration = configuration
            let old = s.idle
            s.idle = []
            return old
        }
        for p in stale { p.kill() }
        state.withLock { $0.generation &+= 1 }
        returned.lock()
        returned.broadcast()
        returned.unlock()
    }

    /// Where design functions' `log(…)` messages go (default: standard error).
    public func setLogger(_ sink: @escaping @Sendable (String) -> Void) {
        logSink.withLock { $0 = sink }
    }

    /// How many query-server processes were started so far (crashes and time-outs start new ones).
    public var processesStarted: Int { state.withLock { $0.started } }

    /// How many processes wait idle for the next calls (at most `os_process_soft_limit`).
    package var idleProcessCount: Int { state.withLock { $0.idle.count } }

    /// Stops every idle process (the node shutting down).
    public func shutdown() {
        let all = state.withLock { s -> [QueryServerProcess] in
            let old = s.idle
            s.idle = []
            return old
        }
        for p in all { p.kill() }
    }

    // MARK: Calls

    /// Maps one document with `functions` (map function sources; `library` is the design document's `views.lib`
    /// for `require`): for each function, the rows it emitted as `[key, value]` pairs.
    public func map(functions: [String], library: JSON?, document: JSON) throws(JavaScriptError) -> [[(key: JSON, value: JSON)]] {
        try withProcess(owner: Self.owner(functions), prefer: { $0.loadedMapFunctions == functions && $0.loadedLibrary == library }) { p, config throws(JavaScriptError) in
            try loadMapFunctions(functions, library: library, into: p, config)
            let answer = try p.call(.array([.string("map_doc"), document]), timeout: config.timeout, log: log)
            if let error = JavaScriptError.from(answer: answer) { throw error }
            guard case .array(let perFunction) = answer, perFunction.count == functions.count else {
                throw JavaScriptError.protocolError("map_doc answered \(String(decoding: answer.serializedBytes.prefix(200), as: UTF8.self))")
            }
            return perFunction.map { rows in
                (rows.arrayValue ?? []).compactMap { row -> (key: JSON, value: JSON)? in
                    guard case .array(let kv) = row, kv.count == 2 else { return nil }
                    return (kv[0], kv[1])
                }
            }
        }
    }

    /// Maps many documents with `functions` in one exchange (`map_doc` commands pipelined): for each document, for
    /// each function, the rows it emitted. Faster than ``map(functions:library:document:)`` per document by the
    /// round trips it saves. A command that fails (a time limit, memory) fails the batch, after every answer is read.
    public func mapBatch(functions: [String], library: JSON?, documents: [JSON]) throws(JavaScriptError) -> [[[(key: JSON, value: JSON)]]] {
        try mapBatch(functions: functions, library: library, serializedDocuments: documents.map(\.serializedBytes))
    }

    /// ``mapBatch(functions:library:documents:)`` with each document already serialized (a JSON object's bytes,
    /// trusted to be one: a view splices stored bodies without parsing them).
    public func mapBatch(functions: [String], library: JSON?, serializedDocuments documents: [[UInt8]]) throws(JavaScriptError) -> [[[(key: JSON, value: JSON)]]] {
        if documents.isEmpty { return [] }
        return try withProcess(owner: Self.owner(functions), prefer: { $0.loadedMapFunctions == functions && $0.loadedLibrary == library }) { p, config throws(JavaScriptError) in
            try loadMapFunctions(functions, library: library, into: p, config)
            var commands: [UInt8] = []
            commands.reserveCapacity(documents.reduce(0) { $0 + $1.count + 14 })
            for d in documents {
                commands.append(contentsOf: #"["map_doc","#.utf8)
                commands.append(contentsOf: d)
                commands.append(contentsOf: "]\n".utf8)
            }
            let answers = try p.callPipelined(serialized: commands, count: documents.count, timeout: config.timeout, log: log)
            var out: [[[(key: JSON, value: JSON)]]] = []
            out.reserveCapacity(answers.count)
            for answer in answers {
                if let error = JavaScriptError.from(answer: answer) { throw error }
                guard case .array(let perFunction) = answer, perFunction.count == functions.count else {
                    throw JavaScriptError.protocolError("map_doc answered \(String(decoding: answer.serializedBytes.prefix(200), as: UTF8.self))")
                }
                out.append(perFunction.map { rows in
                    (rows.arrayValue ?? []).compactMap { row -> (key: JSON, value: JSON)? in
                        guard case .array(let kv) = row, kv.count == 2 else { return nil }
                        return (kv[0], kv[1])
                    }
                })
            }
            return out
        }
    }

    /// Compiles functions (map or reduce sources; `library` is a design document's `views.lib`) without running
    /// them, as CouchDB checks a design document's view functions when it is written.
    /// - Throws: ``JavaScriptError/compilation(_:)`` for a function that doesn't compile.
    public func compile(functions: [String], library: JSON?) throws(JavaScriptError) {
        guard !functions.isEmpty else { return }
        try withProcess(owner: Self.owner(functions), prefer: { $0.loadedMapFunctions == functions && $0.loadedLibrary == library }) { p, config throws(JavaScriptError) in
            try loadMapFunctions(functions, library: library, into: p, config)
        }
    }

    /// Reduces `rows` (key, document id, value) with each of `functions`: one result per function.
    public func reduce(functions: [String], rows: [(key: JSON, id: String, value: JSON)]) throws(JavaScriptError) -> [JSON] {
        let args = JSON.array(rows.map { .array([.array([$0.key, .string($0.id)]), $0.value]) })
        return try reduceCall(.array([.string("reduce"), .array(functions.map(JSON.string)), args]), count: functions.count)
    }

    /// Re-reduces earlier reduce results with each of `functions`.
    public func rereduce(functions: [String], values: [JSON]) throws(JavaScriptError) -> [JSON] {
        try reduceCall(.array([.string("rereduce"), .array(functions.map(JSON.string)), .array(values)]), count: functions.count)
    }

    private func reduceCall(_ command: JSON, count: Int) throws(JavaScriptError) -> [JSON] {
        try withProcess(owner: Self.owner(command[1]?.arrayValue?.compactMap(\.stringValue) ?? []), prefer: { _ in true }) { p, config throws(JavaScriptError) in
            let answer = try p.call(command, timeout: config.timeout, log: log)
            if let error = JavaScriptError.from(answer: answer) { throw error }
            guard case .array(let items) = answer, items.count == 2, items[0] == .bool(true),
                  case .array(let results) = items[1], results.count == count else {
                throw JavaScriptError.protocolError("reduce answered \(String(decoding: answer.serializedBytes.prefix(200), as: UTF8.self))")
            }
            return results
        }
    }

    /// Calls a design document's function: `path` as CouchDB's (`["validate_doc_update"]`, `["filters", name]`,
    /// `["shows", name]`, `["updates", name]`, `["views", name, "map"]`, `["rewrites"]`), with `args`. The design
    /// document is sent to a process first unless it has this revision already. Returns the raw answer; errors
    /// the function threw (`["error", …]`) are thrown, except `{"forbidden": …}`-style answers of validation, which
    /// ``validate(designDocumentID:revision:designDocument:newDocument:oldDocument:userContext:security:)`` reads.
    public func call(designDocumentID id: String, revision: String, designDocument: JSON, path: [String],
                     arguments: [JSON]) throws(JavaScriptError) -> JSON {
        try withProcess(owner: id, prefer: { $0.designDocuments[id] == revision }) { p, config throws(JavaScriptError) in
            try load(id: id, revision: revision, designDocument: designDocument, into: p, config)
            let command = JSON.array([.string("ddoc"), .string(id), .array(path.map(JSON.string)), .array(arguments)])
            let answer = try p.call(command, timeout: config.timeout, log: log)
            if case .array(let items) = answer, items.first == .string("error"), let error = JavaScriptError.from(answer: answer) {
                throw error
            }
            return answer
        }
    }

    /// Runs a `validate_doc_update` function. Returns normally when it accepts the write.
    /// - Throws: ``JavaScriptError/forbidden(_:)`` or ``JavaScriptError/unauthorized(_:)`` when it refuses it; other
    ///   errors when it fails (CouchDB then refuses the write too).
    public func validate(designDocumentID id: String, revision: String, designDocument: JSON, newDocument: JSON,
                         oldDocument: JSON, userContext: JSON, security: JSON) throws(JavaScriptError) {
        let answer = try call(designDocumentID: id, revision: revision, designDocument: designDocument,
                              path: ["validate_doc_update"], arguments: [newDocument, oldDocument, userContext, security])
        if let refusal = try Self.verdict(answer) { throw refusal }
    }

    /// Runs a `validate_doc_update` function on many writes in one exchange: for each `(new, old)` pair, nil when
    /// accepted, or the refusal (``JavaScriptError/forbidden(_:)``, ``JavaScriptError/unauthorized(_:)``, a thrown
    /// string as `unknown_error`, an error the function failed with as ``JavaScriptError/thrown(name:reason:)``). A
    /// failure of the engine (time limit, crash) is thrown.
    ///
    /// `documents` are each call's first two arguments as JSON text, `newDoc,oldDoc` (the caller serializes them as
    /// it builds them). They go to settee-js in lines of up to a megabyte and 100 writes, each one `validate_batch`
    /// command (one parse and one answer per line; every write still gets the whole time limit and its own
    /// `userCtx`/`secObj`).
    public func validateBatch(designDocumentID id: String, revision: String, designDocument: JSON,
                              documents: [[UInt8]], userContext: JSON,
                              security: JSON) throws(JavaScriptError) -> [JavaScriptError?] {
        if documents.isEmpty { return [] }
        // Each line: ["validate_batch", id, [userCtx, secObj, [newDoc1, oldDoc1, newDoc2, oldDoc2, …]]]
        var prefix: [UInt8] = Array(#"["validate_batch","#.utf8)
        JSON.string(id).serialize(into: &prefix)
        prefix.append(contentsOf: ",[".utf8)
        userContext.serialize(into: &prefix)
        prefix.append(UInt8(ascii: ","))
        security.serialize(into: &prefix)
        prefix.append(contentsOf: ",[".utf8)
        var batch = BatchLines(prefix: prefix, capacity: documents.reduce(0) { $0 + $1.count + 1 })
        for arguments in documents { batch.add { $0.append(contentsOf: arguments) } }
        let (lines, counts) = batch.finish()
        return try withProcess(owner: id, prefer: { $0.designDocuments[id] == revision }) { p, config throws(JavaScriptError) in
            try load(id: id, revision: revision, designDocument: designDocument, into: p, config)
            let answers = try p.callPipelined(serialized: lines, count: counts.count,
                                              timeout: config.timeout * (counts.max() ?? 1), log: log)
            var verdicts: [JavaScriptError?] = []
            verdicts.reserveCapacity(documents.count)
            for (answer, count) in zip(answers, counts) {
                guard case .array(let items) = answer, items.count == 2, items[0] == .bool(true),
                      case .array(let each) = items[1], each.count == count else {
                    if let error = JavaScriptError.from(answer: answer) { throw error }
                    throw .protocolError("validate_batch answered \(String(decoding: answer.serializedBytes.prefix(200), as: UTF8.self))")
                }
                for answer in each { verdicts.append(try Self.verdict(answer)) }
            }
            return verdicts
        }
    }

    /// One validation's answer: nil when it accepted the write, the refusal (a plain thrown string too, as CouchDB's
    /// `unknown_error`), or thrown when the engine failed.
    private static func verdict(_ answer: JSON) throws(JavaScriptError) -> JavaScriptError? {
        if answer == .int(1) || answer == .double(1) || answer == .bool(true) { return nil }
        if let error = JavaScriptError.from(answer: answer) {
            switch error {
            case .forbidden, .unauthorized, .thrown: return error
            default: throw error
            }
        }
        if case .string(let message) = answer { return .thrown(name: "unknown_error", reason: message) }
        throw .protocolError("validate_doc_update answered \(String(decoding: answer.serializedBytes.prefix(200), as: UTF8.self))")
    }

    /// Runs a filter function (`["filters", name]`) or a view's map as a filter (`["views", name, "map"]`) over
    /// documents: whether each passes.
    public func filter(designDocumentID id: String, revision: String, designDocument: JSON, path: [String],
                       documents: [JSON], request: JSON) throws(JavaScriptError) -> [Bool] {
        let arguments: [JSON] = path.first == "views" ? [.array(documents)] : [.array(documents), request]
        let answer = try call(designDocumentID: id, revision: revision, designDocument: designDocument, path: path,
                              arguments: arguments)
        guard case .array(let items) = answer, items.count == 2, items[0] == .bool(true), case .array(let passes) = items[1],
              passes.count == documents.count else {
            if let error = JavaScriptError.from(answer: answer) { throw error }
            throw .protocolError("filter answered \(String(decoding: answer.serializedBytes.prefix(200), as: UTF8.self))")
        }
        return passes.map { $0 == .bool(true) }
    }

    /// Runs `body` with one process that has `designDocument` loaded, for exchanges of several messages (list
    /// functions: `start`, then `list_row` per row, then `list_end`). `send` sends one message and returns the answer.
    public func withDesignDocument<T>(id: String, revision: String, designDocument: JSON,
                                      _ body: (_ send: (JSON) throws(JavaScriptError) -> JSON) throws(JavaScriptError) -> T) throws(JavaScriptError) -> T {
        try withProcess(owner: id, prefer: { $0.designDocuments[id] == revision }) { p, config throws(JavaScriptError) in
            try load(id: id, revision: revision, designDocument: designDocument, into: p, config)
            return try body { message throws(JavaScriptError) in try p.call(message, timeout: config.timeout, log: log) }
        }
    }

    // MARK: Processes

    func log(_ message: String) {
        let sink = logSink.withLock { $0 }
        sink(message)
    }

    private func reset(_ p: QueryServerProcess, _ config: Configuration) throws(JavaScriptError) {
        let options: JSON = .object(["reduce_limit": .bool(config.reduceLimit),
                                     "timeout": .int(Int64(config.timeout.components.seconds * 1000))])
        try expectTrue(p.call(.array([.string("reset"), options]), timeout: config.timeout, log: log), p)
        p.loadedMapFunctions = []
        p.loadedLibrary = nil
    }

    /// Makes `p` hold exactly `functions` (and `library`) for `map_doc`, unless it already does.
    private func loadMapFunctions(_ functions: [String], library: JSON?, into p: QueryServerProcess,
                                  _ config: Configuration) throws(JavaScriptError) {
        guard p.loadedMapFunctions != functions || p.loadedLibrary != library else { return }
        try reset(p, config)
        if let library { try expectTrue(p.call(.array([.string("add_lib"), library]), timeout: config.timeout, log: log), p) }
        for f in functions { try expectTrue(p.call(.array([.string("add_fun"), .string(f)]), timeout: config.timeout, log: log), p) }
        p.loadedMapFunctions = functions
        p.loadedLibrary = library
    }

    private func load(id: String, revision: String, designDocument: JSON, into p: QueryServerProcess,
                      _ config: Configuration) throws(JavaScriptError) {
        guard p.designDocuments[id] != revision else { return }
        let answer = try p.call(.array([.string("ddoc"), .string("new"), .string(id), designDocument]),
                                timeout: config.timeout, log: log)
        try expectTrue(answer, p)
        p.designDocuments[id] = revision
    }

    private func expectTrue(_ answer: JSON, _ p: QueryServerProcess) throws(JavaScriptError) {
        if answer == .bool(true) { return }
        if let error = JavaScriptError.from(answer: answer) { throw error }
        p.kill()
        throw .protocolError("expected true, got \(String(decoding: answer.serializedBytes.prefix(200), as: UTF8.self))")
    }

    /// Takes a process (an idle one `prefer` likes, any idle one, a new one, or waits), runs `body`, and gives it
    /// back unless it died.
    func withProcess<T>(owner: String, prefer: (QueryServerProcess) -> Bool,
                                _ body: (QueryServerProcess, Configuration) throws(JavaScriptError) -> T) throws(JavaScriptError) -> T {
        let (process, config) = try checkout(owner: owner, prefer: prefer)
        defer { checkin(process, owner: owner) }
        return try body(process, config)
    }

    /// The fair-share owner of map or reduce calls: their functions' sources.
    static func owner(_ functions: [String]) -> String {
        var hasher = Hasher()
        hasher.combine(functions)
        return "functions:\(hasher.finalize())"
    }

    private enum Checkout { case idle(QueryServerProcess), start, wait }

    private func checkout(owner: String, prefer: (QueryServerProcess) -> Bool) throws(JavaScriptError) -> (QueryServerProcess, Configuration) {
        state.withLock { $0.demand[owner, default: 0] += 1 }
        while true {
            let (decision, config, seen) = state.withLock { s -> (Checkout, Configuration, Int) in
                guard s.mayTake(owner) else { return (.wait, s.configuration, s.generation) }
                if let i = s.idle.lastIndex(where: prefer) ?? (s.idle.isEmpty ? nil : s.idle.count - 1) {
                    s.running += 1
                    s.holding[owner, default: 0] += 1
                    return (.idle(s.idle.remove(at: i)), s.configuration, s.generation)
                }
                if s.running < s.configuration.maxProcesses {
                    s.running += 1
                    s.started += 1
                    s.holding[owner, default: 0] += 1
                    return (.start, s.configuration, s.generation)
                }
                return (.wait, s.configuration, s.generation)
            }
            switch decision {
            case .idle(let p):
                return (p, config)
            case .start:
                do {
                    let p = try QueryServerProcess(executable: try Self.executable(config), arguments: [
                        "--timeout-ms", String(config.timeout.components.seconds * 1000 + config.timeout.components.attoseconds / 1_000_000_000_000_000),
                        "--max-heap-mb", String(config.maxHeapMB),
                    ])
                    p.loadedMapFunctions = nil
                    return (p, config)
                } catch {
                    state.withLock { s in
                        s.running -= 1
                        s.generation &+= 1
                        s.release(owner)
                    }
                    returned.lock()
                    returned.broadcast()
                    returned.unlock()
                    throw error
                }
            case .wait:
                returned.lock()
                if state.withLock({ $0.generation }) == seen { _ = returned.wait(until: Date(timeIntervalSinceNow: 1)) }
                returned.unlock()
            }
        }
    }

    private func checkin(_ p: QueryServerProcess, owner: String) {
        let discard = state.withLock { s -> Bool in
            s.running -= 1
            s.generation &+= 1
            s.release(owner)
            if p.dead || p.commands >= s.configuration.commandsPerProcess
                || s.idle.count >= min(s.configuration.idleProcesses, s.configuration.maxProcesses) {
                return true
            }
            s.idle.append(p)
            return false
        }
        if discard { p.kill() }
        returned.lock()
        returned.broadcast()
        returned.unlock()
    }

    /// The query server executable: configured, `SETTEE_JS`, or `settee-js` beside the running executable (or
    /// beside the test bundle).
    static func executable(_ config: Configuration) throws(JavaScriptError) -> String {
        if let path = config.executable { return path }
        if let path = ProcessInfo.processInfo.environment["SETTEE_JS"], !path.isEmpty { return path }
        var candidates: [String] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append((exe as NSString).deletingLastPathComponent)
        }
        if let main = Bundle.main.executableURL?.deletingLastPathComponent().path { candidates.append(main) }
        for dir in candidates {
            var d = dir
            // A test bundle (…/debug/SetteePackageTests.xctest/Contents/MacOS on macOS) sits beside the products.
            for _ in 0..<4 {
                let path = d + "/settee-js"
                if FileManager.default.isExecutableFile(atPath: path) { return path }
                d = (d as NSString).deletingLastPathComponent
            }
        }
        throw .unavailable("settee-js (the JavaScript query server) was not found beside \(candidates.first ?? "this program"); build it with `swift build` or set SETTEE_JS")
    }
}
