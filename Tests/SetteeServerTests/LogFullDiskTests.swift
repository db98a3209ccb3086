import Foundation
import Settee
import SetteeTestSupport
import Testing

/// A log that can't be written never stops the node (issue 44, item 2): `settee serve` with its standard output
/// and standard error on a full file system, or on a pipe nobody reads, starts, serves, counts the dropped lines
/// in `settee_log_writes_dropped_total`, and logs again once it can.
///
/// The full file system is a 64 KiB tmpfs filled with `dd`; mounting one needs root (these machines run the tests
/// as root). Where it can't be mounted the test is cancelled (reported as skipped) and says why.
@Suite(.serialized) struct LogFullDiskTests {
    static let auth = "Basic " + Base64.encode(Array("admin:secret".utf8))

    @Test func nodeServesWithItsLogOnAFullDiskAndLogsAgainOnceThereIsSpace() async throws {
        let disk = try FullTmpfs.mountOrCancel()
        defer { disk.unmount() }
        let data = TempDir()
        let logPath = disk.path + "/serve.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try #require(FileHandle(forWritingAtPath: logPath))
        try disk.fill()
        // The file system takes not one more byte.
        let probe = Array("probe\n".utf8).withUnsafeBytes { LogWriter.writeAll(log.fileDescriptor, $0) }
        try #require(probe == ENOSPC, "the tmpfs is not full (errno \(probe))")

        let port = freePort()
        let server = SpawnedProcess()
        server.executableURL = URL(fileURLWithPath: builtProduct("settee"))
        server.arguments = ["serve", "--data", data.path, "--port", String(port), "--admin", "admin:secret",
                            "--log-level", "info"]
        server.standardOutput = log
        server.standardError = log
        try server.run()
        try? log.close()
        defer { Self.stop(server) }

        // It starts (it used to trap writing its "listening" line) and answers.
        try await Self.waitUntilUp(server, port: port)
        // Requests that log (the access log is at info), none of whose lines fit on the disk.
        try await offThePool { () throws -> Void in
            #expect(try Self.http("PUT", "/logdb", port: port).status == 201)
            for i in 0..<20 {
                #expect(try Self.http("PUT", "/logdb/doc\(i)", port: port, body: #"{"n":\#(i)}"#).status == 201)
                #expect(try Self.http("GET", "/logdb/doc\(i)", port: port).status == 200)
            }
        }
        #expect(server.isRunning)
        let metrics = try await offThePool { try Self.http("GET", "/_metrics", port: port) }
        #expect(metrics.status == 200)
        let dropped = Self.sample("settee_log_writes_dropped_total", in: metrics.body) ?? 0
        #expect(dropped >= 20, "dropped log writes counted: \(metrics.body.split(separator: "\n").filter { $0.contains("log_writes") })")
        let sizeWhileFull = Self.size(logPath)

        // Space again: the next lines are written, after one saying how many were dropped.
        try disk.empty()
        try await offThePool { () throws -> Void in
            for _ in 0..<3 { #expect(try Self.http("GET", "/_up", port: port).status == 200) }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while Self.size(logPath) <= sizeWhileFull && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(Self.size(logPath) > sizeWhileFull, "the log grew once there was space")
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        #expect(text.contains("were dropped"), "log after freeing space: \(text.prefix(2000))")
        #expect(text.contains("GET /_up 200"), "log after freeing space: \(text.prefix(2000))")
        #expect(server.isRunning)
        Self.stop(server)
        #expect(server.terminationReason == .exit && server.terminationStatus == 0,
                "settee serve ended with \(server.terminationReason == .exit ? "status" : "signal") \(server.terminationStatus)")
    }

    /// Standard output and standard error on a pipe whose reader has gone: every log write gets EPIPE (SIGPIPE is
    /// ignored), from the admin-party warning written before any socket exists to each access-log line.
    @Test func nodeServesWhenItsLogPipeIsClosed() async throws {
        let data = TempDir()
        let port = freePort()
        let output = Pipe()
        let server = SpawnedProcess()
        server.executableURL = URL(fileURLWithPath: builtProduct("settee"))
        server.arguments = ["serve", "--data", data.path, "--port", String(port), "--log-level", "info"]
        server.standardOutput = output
        server.standardError = output
        try output.fileHandleForReading.close()
        try server.run()
        defer { Self.stop(server) }

        try await Self.waitUntilUp(server, port: port, authorized: false)
        try await offThePool { () throws -> Void in
            for _ in 0..<10 { #expect(try Self.http("GET", "/", port: port, authorized: false).status == 200) }
        }
        #expect(server.isRunning)
        let metrics = try await offThePool { try Self.http("GET", "/_metrics", port: port, authorized: false) }
        #expect((Self.sample("settee_log_writes_dropped_total", in: metrics.body) ?? 0) >= 10)
        Self.stop(server)
        #expect(server.terminationReason == .exit && server.terminationStatus == 0,
                "settee serve ended with \(server.terminationReason == .exit ? "status" : "signal") \(server.terminationStatus)")
    }

    // MARK: helpers

    /// Polls `GET /_up` until it answers 200; fails at once if the server has exited (how it ended says why).
    static func waitUntilUp(_ server: SpawnedProcess, port: Int, authorized: Bool = true) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if !server.isRunning {
                throw ServerProcessError(message: "settee serve exited before answering: \(server.terminationReason == .exit ? "status" : "signal") \(server.terminationStatus)")
            }
            if let up = try? await offThePool({ try Self.http("GET", "/_up", port: port, authorized: authorized) }), up.status == 200 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ServerProcessError(message: "settee serve did not answer GET /_up within 60 s")
    }

    /// One HTTP/1.1 request on a fresh connection (closed after it), as admin; the status and body.
    /// Without `authorized`, no credentials (a node without an admin refuses unknown ones).
    static func http(_ method: String, _ path: String, port: Int, body: String? = nil,
                     authorized: Bool = true) throws -> (status: Int, body: String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServerProcessError(message: "socket: errno \(errno)") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw ServerProcessError(message: "connect: errno \(errno)") }
        let payload = Array((body ?? "").utf8)
        var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if authorized { request += "Authorization: \(auth)\r\n" }
        if body != nil { request += "Content-Type: application/json\r\n" }
        request += "Content-Length: \(payload.count)\r\n\r\n"
        let bytes = Array(request.utf8) + payload
        guard bytes.withUnsafeBytes({ LogWriter.writeAll(fd, $0) }) == 0 else {
            throw ServerProcessError(message: "send: errno \(errno)")
        }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 { response += chunk[0..<n]; continue }
            if n < 0 && errno == EINTR { continue }
            break
        }
        let text = String(decoding: response, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.1 "), let status = Int(text.dropFirst(9).prefix(3)) else {
            throw ServerProcessError(message: "no HTTP response: \(text.prefix(200))")
        }
        let bodyStart = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return (status, bodyStart)
    }

    /// SIGTERM, and SIGKILL if it hasn't exited 30 s later.
    static func stop(_ server: SpawnedProcess) {
        guard server.isRunning else { return }
        server.terminate()
        let deadline = Date().addingTimeInterval(30)
        while server.isRunning && Date() < deadline { usleep(20_000) }
        if server.isRunning { kill(server.processIdentifier, SIGKILL) }
        server.waitUntilExit()
    }

    /// The value of an unlabelled sample in a Prometheus exposition.
    static func sample(_ name: String, in exposition: String) -> Int? {
        for line in exposition.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1)).map { Int($0) }
        }
        return nil
    }

    static func size(_ path: String) -> UInt64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.uint64Value ?? 0
    }
}

/// A 64 KiB tmpfs mounted on a fresh directory, which ``fill()`` fills to the last byte with `dd`.
struct FullTmpfs {
    let path: String

    /// Mounts it, or cancels the running test (reported as skipped) saying why it can't be.
    static func mountOrCancel() throws -> FullTmpfs {
        guard getuid() == 0 else {
            try Test.cancel("needs root to mount a tmpfs (the full-disk log test runs as root on the test machines)")
        }
        let path = NSTemporaryDirectory() + "settee-full-log-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        do {
            try runTool("/usr/bin/env", ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", path])
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            try Test.cancel("can't mount a tmpfs here (\(error)); the full-disk log test needs mount -t tmpfs")
        }
        return FullTmpfs(path: path)
    }

    /// Writes zeros to `fill` until the file system is full (dd then fails with ENOSPC, as it should).
    func fill() throws {
        _ = try? runTool("/usr/bin/env", ["dd", "if=/dev/zero", "of=\(path)/fill", "bs=4096"])
        // The last partial block dd couldn't write whole: fill it byte by byte.
        let fd = open(path + "/fill", O_WRONLY | O_APPEND)
        defer { if fd >= 0 { close(fd) } }
        var zero: UInt8 = 0
        while fd >= 0 && Foundation.write(fd, &zero, 1) == 1 {}
    }

    /// Frees the space ``fill()`` took.
    func empty() throws {
        try FileManager.default.removeItem(atPath: path + "/fill")
    }

    /// Unmounts (lazily if something still holds a file there) and removes the directory.
    func unmount() {
        if (try? runTool("/usr/bin/env", ["umount", path])) == nil {
            _ = try? runTool("/usr/bin/env", ["umount", "-l", path])
        }
        try? FileManager.default.removeItem(atPath: path)
    }
}
