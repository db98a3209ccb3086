public import Foundation

/// A child process started with `posix_spawn`, with the part of Foundation's `Process` interface the tests use.
///
/// Why not `Process`: on Linux, `Process.run()` finds the highest open file descriptor by reading
/// `/proc/self/fd` and copies each entry's whole 256-byte `d_name`, past the end of the directory buffer for the last
/// entries. AddressSanitizer reports it as a heap-buffer-overflow; without it, when the buffer ends at the end of
/// a mapping, the test process dies with SIGSEGV ("Bad pointer dereference" on a page boundary), at random, more
/// often the more files the tests hold open. Settee itself spawns its query servers with `posix_spawn` too.
///
/// The child gets the redirections asked for and no other descriptor of the test process (glibc's
/// `posix_spawn_file_actions_addclosefrom_np`), so a server never holds another test's pipe open.
public final class SpawnedProcess: @unchecked Sendable {
    // @unchecked: the configuration is set before `run()`; the exit status is only touched under `lock`.
    public var executableURL: URL?
    public var arguments: [String] = []
    /// A `Pipe` or a `FileHandle` (as `Process` takes them); nil inherits the test process's.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    public private(set) var processIdentifier: Int32 = 0
    private let lock = NSLock()
    private var exitStatus: Int32?

    public init() {}

    /// Starts the process.
    public func run() throws {
        guard let path = executableURL?.path else { throw ServerProcessError(message: "no executable") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // The parent's copies of the child's pipe ends, closed once it has started.
        var childEnds: [FileHandle] = []
        func redirect(_ value: Any?, to target: Int32, childReads: Bool) {
            switch value {
            case let pipe as Pipe:
                let end = childReads ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                posix_spawn_file_actions_adddup2(&actions, end.fileDescriptor, target)
                childEnds.append(end)
            case let handle as FileHandle where handle === FileHandle.nullDevice || handle.fileDescriptor < 0:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_RDWR, 0)
            case let handle as FileHandle:
                posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, target)
            default:
                break
            }
        }
        redirect(standardInput, to: 0, childReads: true)
        redirect(standardOutput, to: 1, childReads: false)
        redirect(standardError, to: 2, childReads: false)
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        for end in childEnds { try? end.close() }
        guard spawned == 0 else {
            throw ServerProcessError(message: "\((path as NSString).lastPathComponent) could not start: \(String(cString: strerror(spawned)))")
        }
        processIdentifier = pid
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module does not declare.
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    /// Whether it has not exited yet (reaps it once it has).
    public var isRunning: Bool {
        lock.withLock {
            guard processIdentifier > 0, exitStatus == nil else { return false }
            var status: Int32 = 0
            let r = waitpid(processIdentifier, &status, WNOHANG)
            if r == processIdentifier || (r < 0 && errno == ECHILD) { exitStatus = r < 0 ? 0 : status }
            return exitStatus == nil
        }
    }

    /// SIGTERM.
    public func terminate() {
        if processIdentifier > 0 { kill(processIdentifier, SIGTERM) }
    }

    /// Waits for it to exit.
    public func waitUntilExit() {
        while isRunning { usleep(5_000) }
    }

    /// Its exit code, or the signal that ended it (after ``waitUntilExit()``).
    public var terminationStatus: Int32 {
        let status = lock.withLock { exitStatus } ?? 0
        return status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    /// Whether it exited or was ended by a signal (after ``waitUntilExit()``).
    public var terminationReason: Process.TerminationReason {
        (lock.withLock { exitStatus } ?? 0) & 0x7f == 0 ? .exit : .uncaughtSignal
    }
}
