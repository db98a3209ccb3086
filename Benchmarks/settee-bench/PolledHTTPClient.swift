// Many keep-alive HTTP/1.1 connections driven from one thread with poll(2), each with one request in flight —
// the way `wrk -t1 -cN` loads a server. The blocking `HTTPConnection` needs a thread per connection, and on a
// 2-core machine 16 client threads switching in and out take CPU the server under test needs; this client
// spends a send, a poll and a recv per request and parses only the status line and Content-Length.
//
// Responses must carry a Content-Length (a document GET always does); anything else is reported as an error.
import Glibc

final class PolledHTTPClients {
    /// One connection's work: the requests to send, in order, and what came back.
    private struct Connection {
        var fd: Int32
        var requests: [[UInt8]]
        var next = 0          // index of the request in flight (or the next to send)
        var sent = 0          // bytes of it sent
        var input: [UInt8] = []
        var scanFrom = 0      // where to resume looking for the end of the head
        var done = false
        var result = ClientResult<Int>()
    }

    /// Sends every connection's requests and hands each response to `check(connection, index, status, body)`,
    /// which returns an error message or nil. Returns one result per connection (`items[0]`: responses that passed).
    static func run(port: Int, requests: [[[UInt8]]],
                    check: (Int, Int, Int, ArraySlice<UInt8>) -> String?) throws -> [ClientResult<Int>] {
        var conns: [Connection] = []
        defer { for c in conns where c.fd >= 0 { close(c.fd) } }
        for plan in requests {
            conns.append(Connection(fd: try connectNonBlocking(port: port), requests: plan))
        }
        for k in conns.indices {
            conns[k].result.items = [0]
            if conns[k].requests.isEmpty { conns[k].done = true } else { flush(&conns[k]) }
        }
        var fds = conns.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        var chunk = [UInt8](repeating: 0, count: 65536)
        while conns.contains(where: { !$0.done }) {
            for k in conns.indices {
                fds[k].events = conns[k].done ? 0 : Int16(POLLIN) | (pendingSend(conns[k]) ? Int16(POLLOUT) : 0)
                fds[k].revents = 0
            }
            let ready = poll(&fds, nfds_t(fds.count), 30_000)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { throw HTTPClientError(message: "poll: no response within 30 s") }
            for k in conns.indices where fds[k].revents != 0 && !conns[k].done {
                if fds[k].revents & Int16(POLLOUT) != 0 { flush(&conns[k]) }
                guard fds[k].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 else { continue }
                let n = chunk.withUnsafeMutableBytes { recv(conns[k].fd, $0.baseAddress, $0.count, 0) }
                if n < 0 && (errno == EAGAIN || errno == EINTR) { continue }
                guard n > 0 else {
                    conns[k].result.fail("connection closed by the server after \(conns[k].next) responses")
                    conns[k].done = true
                    continue
                }
                conns[k].input.append(contentsOf: chunk[..<n])
                while !conns[k].done, let (status, body, used) = parse(&conns[k]) {
                    let index = conns[k].next
                    if status < 0 {
                        conns[k].result.fail("response without Content-Length")
                        conns[k].done = true
                        break
                    } else if let error = check(k, index, status, body) {
                        conns[k].result.fail(error)
                    } else {
                        conns[k].result.items[0] += 1
                    }
                    conns[k].input.removeFirst(used)
                    conns[k].scanFrom = 0
                    conns[k].next += 1
                    conns[k].sent = 0
                    if conns[k].next == conns[k].requests.count || conns[k].result.errors > 10 {
                        conns[k].done = true
                    } else {
                        flush(&conns[k])
                    }
                }
            }
        }
        return conns.map(\.result)
    }

    private static func pendingSend(_ c: Connection) -> Bool {
        c.next < c.requests.count && c.sent < c.requests[c.next].count
    }

    /// Sends as much of the current request as the socket takes.
    private static func flush(_ c: inout Connection) {
        guard pendingSend(c) else { return }
        let fd = c.fd
        let sent = c.sent
        let n = c.requests[c.next].withUnsafeBytes { raw in
            Glibc.send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
        }
        if n > 0 {
            c.sent += n
        } else if n < 0 && errno != EAGAIN && errno != EINTR {
            c.result.fail("send(): \(String(cString: strerror(errno)))")
            c.done = true
        }
    }

    /// A complete response at the front of the input: (status, body, bytes used); status -1 if it has no
    /// Content-Length. Nil until all of it has arrived.
    private static func parse(_ c: inout Connection) -> (Int, ArraySlice<UInt8>, Int)? {
        let input = c.input
        guard input.count >= 16 else { return nil }
        var headEnd = -1
        var i = max(c.scanFrom, 0)
        while i + 3 < input.count {
            if input[i] == 13 && input[i + 1] == 10 && input[i + 2] == 13 && input[i + 3] == 10 { headEnd = i; break }
            i += 1
        }
        guard headEnd >= 0 else {
            c.scanFrom = max(0, input.count - 3)
            return nil
        }
        // "HTTP/1.1 200 ..."
        let status = Int(input[9] &- 48) * 100 + Int(input[10] &- 48) * 10 + Int(input[11] &- 48)
        guard let length = contentLength(input, headEnd: headEnd) else { return (-1, [], headEnd + 4) }
        let total = headEnd + 4 + length
        guard input.count >= total else { return nil }
        return (status, input[(headEnd + 4)..<total], total)
    }

    private static let contentLengthName = Array("content-length:".utf8)

    private static func contentLength(_ input: [UInt8], headEnd: Int) -> Int? {
        var lineStart = 0
        while lineStart < headEnd {
            var lineEnd = lineStart
            while lineEnd < headEnd && input[lineEnd] != 13 { lineEnd += 1 }
            if lineEnd - lineStart > contentLengthName.count {
                var matches = true
                for (j, ch) in contentLengthName.enumerated() where input[lineStart + j] | 0x20 != ch {
                    matches = false
                    break
                }
                if matches {
                    var value = 0
                    var digits = 0
                    for b in input[(lineStart + contentLengthName.count)..<lineEnd] where b != 32 {
                        guard b >= 48 && b <= 57 else { return nil }
                        value = value * 10 + Int(b - 48)
                        digits += 1
                    }
                    return digits > 0 ? value : nil
                }
            }
            lineStart = lineEnd + 2
        }
        return nil
    }

    private static func connectNonBlocking(port: Int) throws -> Int32 {
        let s = try connectTCP(host: "127.0.0.1", port: UInt16(port))
        _ = fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK)
        return s
    }
}
