import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fresh temporary directory, removed when the value goes away.
public final class TempDir: @unchecked Sendable {
    public let path: String

    public init() {
        path = NSTemporaryDirectory() + "settee-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The path of an executable product built beside the test bundle (e.g. `settee`).
public func builtProduct(_ name: String) -> String {
    var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<3 {
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    return FileManager.default.currentDirectoryPath + "/.build/debug/" + name
}

/// A `settee serve` child process on a free loopback port.
public final class ServerProcess: @unchecked Sendable {
    public let process = SpawnedProcess()
    public private(set) var port = 0
    public let dataDirectory: String
    private let output = Pipe()
    /// The server's standard error, kept in a file (never a pipe nobody drains) for the message if it doesn't start.
    private let errorLog = NSTemporaryDirectory() + "settee-serve-stderr-" + UUID().uuidString + ".log"

    /// Starts `settee serve` and waits until it reports its port.
    /// - Parameter wrapper: a command to run `settee` under, e.g. `["ip", "netns", "exec", "ns1"]`.
    public init(dataDirectory: String, admin: String? = "admin:secret", port requestedPort: Int = 0,
                extraArguments: [String] = [], wrapper: [String] = []) throws {
        self.dataDirectory = dataDirectory
        var args = ["serve", "--data", dataDirectory, "--port", String(requestedPort), "--log-level", "warning"]
        if let admin { args += ["--admin", admin] }
        args += extraArguments
        if let first = wrapper.first {
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments = Array(wrapper.dropFirst()) + [builtProduct("settee")] + args
        } else {
            process.executableURL = URL(fileURLWithPath: builtProduct("settee"))
            process.arguments = args
        }
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: errorLog, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: errorLog) ?? FileHandle.nullDevice
        try process.run()
        let handle = output.fileHandleForReading
        var buffer = ""
        let deadline = Date().addingTimeInterval(30)
        while port == 0 && Date() < deadline {
            let data = handle.availableData
            if data.isEmpty { break }
            buffer += String(decoding: data, as: UTF8.self)
            if let range = buffer.range(of: #"listening on https?://[0-9.]+:([0-9]+)"#, options: .regularExpression) {
                let match = String(buffer[range])
                port = Int(match.split(separator: ":").last ?? "") ?? 0
            }
        }
        guard port != 0 else {
            process.terminate()
            throw ServerProcessError(message: "settee serve did not start: \(buffer)\(standardErrorTail())")
        }
    }

    /// Kills the server with SIGKILL (no shutdown of any kind) and waits for it to exit.
    public func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Stops the server with SIGTERM (graceful) and waits; a server still running after `grace` seconds is killed
    /// (SIGKILL), so a hung shutdown fails the test that notices rather than hanging the suite.
    public func stop(grace: Double = 60) {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(grace)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning {
            FileHandle.standardError.write(Data("settee serve (pid \(process.processIdentifier)) did not exit within \(grace) s of SIGTERM; killed\(standardErrorTail())\n".utf8))
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
    }

    /// The last lines the server wrote to standard error, for failure messages ("" if none).
    private func standardErrorTail() -> String {
        guard let data = FileManager.default.contents(atPath: errorLog), !data.isEmpty else { return "" }
        return "; its standard error ends: " + String(decoding: data.suffix(2048), as: UTF8.self)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(atPath: errorLog)
    }
}

/// A TCP port on 127.0.0.1 that is free now and that nothing else in this run will be handed (for servers that
/// must know each other's ports up front, and for chromedriver).
///
/// The port is taken from outside the kernel's ephemeral range (`ip_local_port_range`), so no outgoing connection
/// of the many the tests make at once can land on it between this call and the server's bind, and from a counter
/// shared by the whole test process, so two tests running in parallel never get the same one. Each process starts
/// at its own offset (its pid), in case two test processes run side by side.
public func freePort() -> Int {
    PortAllocator.shared.next()
}

final class PortAllocator: @unchecked Sendable {
    static let shared = PortAllocator()
    private let lock = NSLock()
    private let ports: Range<Int>
    private var cursor: Int

    private init() {
        // Linux's default ephemeral range is 32768–60999; below it is unused by outgoing connections.
        var low = 32768, high = 60999
        if let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) {
            let bounds = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
            if bounds.count == 2 { (low, high) = (bounds[0], bounds[1]) }
        }
        ports = low >= 12_000 ? 10_000..<low : (high + 1)..<65_536
        cursor = ports.lowerBound + Int(getpid()) * 37 % ports.count
    }

    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        for _ in 0..<ports.count {
            let port = cursor
            cursor = cursor + 1 == ports.upperBound ? ports.lowerBound : cursor + 1
            if Self.bindable(port) { return port }
        }
        fatalError("no free TCP port in \(ports)")
    }

    /// Whether a listener could bind 127.0.0.1:`port` now (as a server would, with SO_REUSEADDR).
    private static func bindable(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return bound == 0
    }
}

public struct ServerProcessError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// Runs a tool to completion and returns its combined output; a non-zero exit throws with that output.
///
/// Started with `posix_spawn` directly rather than Foundation's `Process` (see ``SpawnedProcess`` for why).
@discardableResult
public func runTool(_ path: String, _ args: [String]) throws -> String {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw ServerProcessError(message: "pipe failed: \(errno)") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2)
    posix_spawn_file_actions_addclose(&actions, fds[0])
    posix_spawn_file_actions_addclose(&actions, fds[1])
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
    close(fds[1])
    guard spawned == 0 else {
        close(fds[0])
        throw ServerProcessError(message: "\((path as NSString).lastPathComponent) could not start: \(String(cString: strerror(spawned)))")
    }
    var output: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fds[0], $0.baseAddress!, $0.count) }
        if n > 0 { output.append(contentsOf: chunk[0..<n]); continue }
        if n < 0 && errno == EINTR { continue }
        break
    }
    close(fds[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let text = String(decoding: output, as: UTF8.self)
    // Exited normally with 0: WIFEXITED and WEXITSTATUS, spelled out (the C macros aren't imported).
    guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
        throw ServerProcessError(message: "\((path as NSString).lastPathComponent) \(args.joined(separator: " ")) failed: \(text)")
    }
    return text
}

/// Runs blocking work (processes, sockets, `waitUntilExit`) on a Dispatch thread instead of Swift's cooperative
/// pool, which has one thread per core: a test that blocks it starves every async test running beside it.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}

/// Whether no network interface (in this namespace) has an address starting with `prefix` (e.g. `"10.213.7."`):
/// test harnesses that make network namespaces pick subnets nothing else uses, not even namespaces an earlier,
/// killed run left behind.
public func subnetIsFree(_ prefix: String) -> Bool {
    guard let addresses = try? runTool("/usr/sbin/ip", ["-br", "addr"]) else { return true }
    return !addresses.contains(" " + prefix)
}
