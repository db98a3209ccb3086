import Foundation
import SetteeTestSupport
import Testing

/// The harness the live tests stand on: the ports given to servers that must know each other's addresses up front
/// are distinct within a run, free when handed out, and outside the kernel's ephemeral range (where the tests' own
/// outgoing connections land); a `settee serve` that cannot start says why.
@Suite struct TestHarnessTests {
    @Test func portsAreDistinctFreeAndOutsideTheEphemeralRange() throws {
        var range = 32768...60999
        if let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) {
            let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
            if bounds.count == 2 { range = bounds[0]...bounds[1] }
        }
        let ports = (0..<200).map { _ in freePort() }
        #expect(Set(ports).count == ports.count)
        for port in ports {
            #expect(!range.contains(port), "\(port) is in the ephemeral range \(range)")
            #expect((1024...65535).contains(port))
        }
        // A server can listen on one right away.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(ports.last!).bigEndian
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0)
        #expect(listen(fd, 1) == 0)
    }

    @Test func aServerThatCannotStartSaysWhy() throws {
        let dir = TempDir()
        let first = try ServerProcess(dataDirectory: dir.path)
        defer { first.stop() }
        let other = TempDir()
        do {
            let second = try ServerProcess(dataDirectory: other.path, port: first.port)
            second.stop()
            Issue.record("a second server started on port \(first.port), which the first one holds")
        } catch let error as ServerProcessError {
            // The message carries what the server wrote to standard error, not only its (empty) standard output.
            #expect(error.message.contains("standard error ends"), "\(error.message)")
        }
    }
}
