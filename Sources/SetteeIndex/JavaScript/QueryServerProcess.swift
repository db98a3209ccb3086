#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SetteeCore
import Synchronization

/// One running query-server process (`settee-js`, or CouchDB's `couchjs` with its `main.js`): JSON commands on its
/// standard input, one JSON answer per line on its standard output, as CouchDB's query-server protocol has it.
///
/// A process is used by one caller at a time: ``JavaScriptEngine`` hands it out exclusively and takes it back, so its
/// mutable state (the read buffer, what it has loaded) is never shared between threads at once.
// @unchecked: the exclusive hand-out described above; a process moves between threads only through the engine's
// pool, never used by two at once.
final class QueryServerProcess: @unchecked Sendable {
    let pid: pid_t
    private let toChild: Int32
    private let fromChild: Int32
    private var buffer: [UInt8] = []
    private var bufferStart = 0
    /// The map functions `add_fun` loaded since the last `reset` (nil: unknown, reset first).
    var loadedMapFunctions: [String]?
    /// The `views.lib` added with them.
    var loadedLibrary: JSON?
    /// Design documents it knows (`["ddoc", "new", …]`), by id, with the revision it was given.
    var designDocuments: [String: String] = [:]
    /// Whether it failed (crashed, timed out, broke the protocol); it is then killed and never reused.
    private(set) var dead = false
    /// Commands answered so far (a process is replaced after many, as CouchDB's `os_process_limit` does).
    private(set) var commands = 0

    /// Starts `executable` with `arguments`. Its standard error is inherited (the node's log).
    init(executable: String, arguments: [String]) throws(JavaScriptError) {
        // Every end is close-on-exec before any other query server can be started: a child that inherited another
        // child's stdin would hold it open, so that one would never see end-of-file and would outlive the node.
        // (Glibc's module has no `pipe2`; the pipes, their flags and the spawn happen under one process-wide lock
        // instead.) posix_spawn's dup2 gives the child its own copies, without the flag.
        let (child, toChild, fromChild) = try spawnLock.withLock { _ throws(JavaScriptError) -> (pid_t, Int32, Int32) in
            var input: [Int32] = [0, 0], output: [Int32] = [0, 0]
            guard closeOnExecPipe(&input) == 0 else { throw .unavailable("pipe: \(String(cString: strerror(errno)))") }
            guard closeOnExecPipe(&output) == 0 else {
                close(input[0]); close(input[1])
                throw .unavailable("pipe: \(String(cString: strerror(errno)))")
            }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, input[0], 0)
            posix_spawn_file_actions_adddup2(&actions, output[1], 1)
            let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
            defer { for p in argv { free(p) } }
            var child: pid_t = 0
            let spawned = posix_spawn(&child, executable, &actions, nil, argv, environ)
            close(input[0])
            close(output[1])
            guard spawned == 0 else {
                close(input[1]); close(output[0])
                throw .unavailable("cannot start the JavaScript query server \(executable): \(String(cString: strerror(spawned)))")
            }
            return (child, input[1], output[0])
        }
        pid = child
        self.toChild = toChild
        self.fromChild = fromChild
    }

    deinit {
        kill()
    }

    /// Kills the process (SIGKILL) and reaps it. Idempotent.
    func kill() {
        if pid > 0 && !reaped {
            signalKill(pid)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
            reaped = true
            close(toChild)
            close(fromChild)
        }
        dead = true
    }
    private var reaped = false

    /// Sends one command and returns its answer, passing `["log", message]` lines to `log`. Fails — and kills the
    /// process — when it doesn't answer within `timeout`, exits, or answers something that isn't JSON.
    func call(_ command: JSON, timeout: Duration, log: (String) -> Void) throws(JavaScriptError) -> JSON {
        try callPipelined([command], timeout: timeout, log: log)[0]
    }

    /// Sends `commands` one after another without waiting for each answer (the process reads the next while this
    /// side reads its answers, through both pipes at once, so neither side blocks on a full pipe), and returns the
    /// answers in order. `["log", …]` lines go to `log`. The time limit restarts with every answer: a batch may take
    /// long, one command may not.
    func callPipelined(_ commands: [JSON], timeout: Duration, log: (String) -> Void) throws(JavaScriptError) -> [JSON] {
        var pending: [UInt8] = []
        pending.reserveCapacity(commands.count * 512)
        for c in commands {
            c.serialize(into: &pending)
            pending.append(UInt8(ascii: "\n"))
        }
        return try callPipelined(serialized: pending, count: commands.count, timeout: timeout, log: log)
    }

    /// ``callPipelined(_:timeout:log:)`` with the commands already serialized: `count` JSON lines in `pending`.
    func callPipelined(serialized pending: [UInt8], count: Int, timeout: Duration, log: (String) -> Void) throws(JavaScriptError) -> [JSON] {
        let lines = try callPipelinedRaw(serialized: pending, count: count, timeout: timeout, log: log)
        var answers: [JSON] = []
        answers.reserveCapacity(count)
        for line in lines {
            do { answers.append(try JSON.parse(line, limits: .unlimitedForQueryServer)) } catch {
                kill()
                throw .protocolError("the query server answered something that is not JSON: \(String(decoding: line.prefix(200), as: UTF8.self))")
            }
        }
        return answers
    }

    /// ``callPipelined(serialized:count:timeout:log:)`` answering each command's line as it came, unparsed (a caller
    /// that reads only part of a large answer, or reads it faster than a parse would: `sync_batch`). Log lines
    /// (`["log", …]`) are parsed and passed to `log` as always; a caller that finds an answer line is not what it
    /// expects says so with ``JavaScriptError/protocolError(_:)``, and should ``kill()`` the process.
    func callPipelinedRaw(serialized pending: [UInt8], count: Int, timeout: Duration, log: (String) -> Void) throws(JavaScriptError) -> [[UInt8]] {
        guard !dead else { throw .crashed("the query server process is gone") }
        self.commands += count
        var written = 0
        var answers: [[UInt8]] = []
        answers.reserveCapacity(count)
        var deadline = ContinuousClock.now + timeout
        let flags = fcntl(toChild, F_GETFL)
        _ = fcntl(toChild, F_SETFL, flags | O_NONBLOCK)
        defer { if !dead { _ = fcntl(toChild, F_SETFL, flags) } }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let logPrefix = Array(#"["log","#.utf8)
        while answers.count < count {
            // Answers already buffered.
            while answers.count < count,
                  let newline = buffer[bufferStart...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[bufferStart..<newline])
                bufferStart = newline + 1
                if line.starts(with: logPrefix),
                   case .array(let items)? = try? JSON.parse(line, limits: .unlimitedForQueryServer), items.count == 2 {
                    log(items[1].stringValue ?? String(decoding: items[1].serializedBytes, as: UTF8.self))
                    continue
                }
                answers.append(line)
                deadline = ContinuousClock.now + timeout
            }
            if bufferStart > 0 {
                buffer.removeSubrange(0..<bufferStart)
                bufferStart = 0
            }
            if answers.count == count { break }
            let remaining = deadline - ContinuousClock.now
            let ms = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
            if ms <= 0 {
                kill()
                throw .timeout
            }
            var fds = [pollfd(fd: fromChild, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: toChild, events: written < pending.count ? Int16(POLLOUT) : 0, revents: 0)]
            let ready = poll(&fds, written < pending.count ? 2 : 1, Int32(clamping: ms))
            if ready < 0 {
                if errno == EINTR { continue }
                kill()
                throw .crashed("poll: \(String(cString: strerror(errno)))")
            }
            if written < pending.count && fds[1].revents != 0 {
                let n = pending.withUnsafeBytes { systemWrite(toChild, $0.baseAddress! + written, pending.count - written) }
                if n < 0 && errno != EAGAIN && errno != EINTR {
                    kill()
                    throw .crashed("the query server process exited (write: \(String(cString: strerror(errno))))")
                }
                if n > 0 { written += n }
            }
            if fds[0].revents != 0 {
                let n = chunk.withUnsafeMutableBytes { systemRead(fromChild, $0.baseAddress!, $0.count) }
                if n < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    kill()
                    throw .crashed("read: \(String(cString: strerror(errno)))")
                }
                if n == 0 {
                    kill()
                    throw .crashed("the query server process exited")
                }
                buffer.append(contentsOf: chunk[0..<n])
            }
        }
        return answers
    }

}

/// Held while a query server's pipes are made and it is started (see ``QueryServerProcess/init(executable:arguments:)``).
private let spawnLock = Mutex<Void>(())

/// A pipe whose two ends are close-on-exec.
private func closeOnExecPipe(_ fds: inout [Int32]) -> Int32 {
    guard pipe(&fds) == 0 else { return -1 }
    for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    return 0
}

// The C calls, under names the class's own methods don't shadow.
private func signalKill(_ pid: pid_t) { _ = kill(pid, SIGKILL) }
private func systemWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { write(fd, p, n) }
private func systemRead(_ fd: Int32, _ p: UnsafeMutableRawPointer, _ n: Int) -> Int { read(fd, p, n) }

extension JSONLimits {
    /// Answers from our own child process: as large as what a design function may build (1 GiB).
    static var unlimitedForQueryServer: JSONLimits { JSONLimits(maxDepth: 1024, maxBytes: 1 << 30) }
}
