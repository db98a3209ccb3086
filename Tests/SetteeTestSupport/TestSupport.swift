import Foundation

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
    public let process = Process()
    public private(set) var port = 0
    public let dataDirectory: String
    private let output = Pipe()

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
        process.standardError = FileHandle.nullDevice
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
            throw ServerProcessError(message: "settee serve did not start: \(buffer)")
        }
    }

    /// Kills the server with SIGKILL (no shutdown of any kind) and waits for it to exit.
    public func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Stops the server with SIGTERM (graceful) and waits.
    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (for servers that must know each other's ports up front).
public func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
    return Int(UInt16(bigEndian: addr.sin_port))
}

public struct ServerProcessError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// Runs a tool to completion and returns its combined output; a non-zero exit throws with that output.
@discardableResult
public func runTool(_ path: String, _ args: [String]) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let out = Pipe()
    p.standardOutput = out
    p.standardError = out
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard p.terminationStatus == 0 else {
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
