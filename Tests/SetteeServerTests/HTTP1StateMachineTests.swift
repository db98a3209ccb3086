import NIOCore
import NIOHTTP1
import Testing

@testable import SetteeServer

/// ``HTTP1ConnectionStateMachine`` on its own: each event in each state, and the actions it returns.
@Suite struct HTTP1StateMachineTests {
    typealias Machine = HTTP1ConnectionStateMachine

    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func at(_ seconds: Int64) -> NIODeadline { start + .seconds(seconds) }

    static func head(_ method: HTTPMethod = .GET, _ uri: String = "/db/doc", version: HTTPVersion = .http1_1,
                     _ headers: [(String, String)] = []) -> HTTPRequestHead {
        HTTPRequestHead(version: version, method: method, uri: uri, headers: HTTPHeaders(headers))
    }

    static func machine(limit: Int = 100, idle: TimeAmount? = .seconds(60)) -> Machine {
        var machine = Machine(maxRequestSize: limit, idleTimeout: idle, now: start)
        #expect(machine.channelActive(now: start) == (idle.map { .armIdleTimer($0) } ?? Machine.Action.none))
        return machine
    }

    /// A machine answering `head` (no body), after the response to it started.
    static func responding(to head: HTTPRequestHead = head(), idle: TimeAmount? = .seconds(60)) -> Machine {
        var machine = machine(idle: idle)
        #expect(machine.partReceived(.head(head), now: start) == .none)
        #expect(machine.partReceived(.end(nil), now: start)
                == .startRequest(head, body: .collected(ByteBuffer()), keepAlive: head.isKeepAlive, sendContinue: false))
        return machine
    }

    // MARK: One request

    @Test func requestWithoutBodyStartsAtItsEndAndTheConnectionWaitsForTheNext() {
        var machine = Self.machine()
        let head = Self.head()
        #expect(machine.partReceived(.head(head), now: Self.at(1)) == .none)
        #expect(machine.state == .collecting(head))
        #expect(machine.partReceived(.end(nil), now: Self.at(1))
                == .startRequest(head, body: .collected(ByteBuffer()), keepAlive: true, sendContinue: false))
        #expect(machine.state == .responding(keepAlive: true))
        // A response in two parts: the first doesn't end it.
        #expect(machine.responsePart(ends: false, closes: false) == .write(closeAfter: false))
        #expect(machine.state == .responding(keepAlive: true))
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: false))
        #expect(machine.state == .idle)
        // The idle timer still runs (armed when the connection became active): nothing to arm, nothing to read.
        #expect(machine.nextAfterResponse(now: Self.at(2)) == .awaitRequest(armIdleTimer: nil, read: false))
        #expect(machine.lastActivity == Self.at(2))
        #expect(machine.nextAfterResponse(now: Self.at(2)) == nil)
    }

    /// NIO's decoder stops after a request it takes for a protocol switch (CONNECT, or Upgrade with
    /// `Connection: upgrade`): once the response ended, the decoder is replaced before the connection waits.
    @Test func protocolSwitchRequestsRestartTheDecoderAfterTheirResponse() {
        let switching = [Self.head(.CONNECT, "/db"),
                         Self.head(.GET, "/db", [("Connection", "keep-alive, Upgrade"), ("Upgrade", "websocket")])]
        for head in switching {
            #expect(Machine.stopsDecoder(head))
            var machine = Self.responding(to: head)
            #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: false))
            #expect(machine.nextAfterResponse(now: Self.at(2)) == .restartDecoder)
            #expect(machine.nextAfterResponse(now: Self.at(2)) == .awaitRequest(armIdleTimer: nil, read: false))
            #expect(machine.nextAfterResponse(now: Self.at(2)) == nil)
        }
        // Upgrade without `Connection: upgrade` (or the reverse), and TRACE, leave the decoder running.
        for head in [Self.head(.GET, "/db", [("Upgrade", "websocket")]), Self.head(.GET, "/db", [("Connection", "upgrade")]),
                     Self.head(.TRACE, "/db")] {
            #expect(!Machine.stopsDecoder(head))
            var machine = Self.responding(to: head)
            #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: false))
            #expect(machine.nextAfterResponse(now: Self.at(2)) == .awaitRequest(armIdleTimer: nil, read: false))
        }
        // A CONNECT whose response closes the connection has no decoder to restart.
        var closing = Self.responding(to: Self.head(.CONNECT, "/db", [("Connection", "close")]))
        #expect(closing.responsePart(ends: true, closes: true) == .write(closeAfter: true))
        #expect(closing.nextAfterResponse(now: Self.at(2)) == nil)
    }

    @Test func bodyIsAssembledBeforeTheRequestStarts() {
        var machine = Self.machine()
        let head = Self.head(.PUT, "/db/doc", [("content-length", "5")])
        #expect(machine.partReceived(.head(head), now: Self.start) == .none)
        #expect(machine.body?.capacity ?? 0 >= 5)
        #expect(machine.partReceived(.body(ByteBuffer(string: "ab")), now: Self.start) == .none)
        #expect(machine.partReceived(.body(ByteBuffer(string: "cde")), now: Self.start) == .none)
        #expect(machine.partReceived(.end(nil), now: Self.start)
                == .startRequest(head, body: .collected(ByteBuffer(string: "abcde")), keepAlive: true, sendContinue: false))
        #expect(machine.body == nil)
    }

    /// Past the request limit one byte is kept (the route answers 413 `too_large`); the rest is read and dropped.
    @Test func oversizedBodyIsKeptToOneBytePastTheLimit() {
        var machine = Self.machine(limit: 4)
        let head = Self.head(.POST, "/db/_bulk_docs", [("content-length", "10")])
        #expect(machine.partReceived(.head(head), now: Self.start) == .none)
        #expect(machine.partReceived(.body(ByteBuffer(string: "abc")), now: Self.start) == .none)
        #expect(machine.partReceived(.body(ByteBuffer(string: "defg")), now: Self.start) == .none)
        #expect(machine.partReceived(.body(ByteBuffer(string: "hij")), now: Self.start) == .none)
        #expect(machine.partReceived(.end(nil), now: Self.start)
                == .startRequest(head, body: .collected(ByteBuffer(string: "abcde")), keepAlive: true, sendContinue: false))
    }

    @Test func expectContinueIsAnsweredForHTTP11Only() {
        var machine = Self.machine()
        let small = Self.head(.PUT, "/db/doc", [("content-length", "2"), ("expect", "100-Continue")])
        #expect(machine.partReceived(.head(small), now: Self.start) == .sendContinue)

        var old = Self.machine()
        let http10 = Self.head(.PUT, "/db/doc", version: .http1_0, [("content-length", "2"), ("expect", "100-continue")])
        #expect(old.partReceived(.head(http10), now: Self.start) == .none)

        var large = Self.machine()
        let big = Self.head(.PUT, "/db/doc/att", [("content-length", "\(Machine.streamingThreshold + 1)"),
                                                  ("expect", "100-continue")])
        #expect(large.partReceived(.head(big), now: Self.start)
                == .startRequest(big, body: .streamed(uploadID: 1), keepAlive: true, sendContinue: true))
    }

    /// HTTP/1.1 keeps the connection unless `Connection: close`; HTTP/1.0 closes it unless `Connection: keep-alive`.
    @Test(arguments: [(HTTPVersion.http1_1, nil as String?, true), (.http1_1, "close", false),
                      (.http1_0, nil, false), (.http1_0, "keep-alive", true)])
    func keepAliveFollowsTheRequest(version: HTTPVersion, connection: String?, keepAlive: Bool) {
        let head = Self.head(.GET, "/", version: version, connection.map { [("connection", $0)] } ?? [])
        var machine = Self.responding(to: head)
        #expect(machine.state == .responding(keepAlive: keepAlive))
        #expect(machine.responsePart(ends: true, closes: !keepAlive) == .write(closeAfter: !keepAlive))
        #expect(machine.state == (keepAlive ? .idle : .closed))
        #expect(machine.nextAfterResponse(now: Self.start) == (keepAlive ? .awaitRequest(armIdleTimer: nil, read: false) : nil))
    }

    /// A response whose head said `Connection: close` closes the connection at its end, keep-alive or not.
    @Test func responseThatSaysCloseClosesAtItsEnd() {
        var machine = Self.responding()
        #expect(machine.responsePart(ends: false, closes: true) == .write(closeAfter: false))
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: true))
        #expect(machine.state == .closed)
        #expect(machine.responsePart(ends: true, closes: false) == .failWrite)
    }

    // MARK: Pipelining

    @Test func pipelinedRequestsWaitForTheResponseBeforeThem() {
        var machine = Self.responding()
        let second = Self.head(.PUT, "/db/b", [("content-length", "2")])
        let third = Self.head(.GET, "/db/c")
        // Reads go on until a part of the next request is queued (no epoll churn for an ordinary client).
        #expect(machine.readRequested() == .read)
        for part: HTTPServerRequestPart in [.head(second), .body(ByteBuffer(string: "{}")), .end(nil), .head(third), .end(nil)] {
            #expect(machine.partReceived(part, now: Self.at(1)) == .none)
        }
        #expect(machine.queued.count == 5)
        #expect(machine.readRequested() == .none)
        #expect(machine.readPending)
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: false))
        // The second request's parts, one action each, until it starts; then nothing until its response ends.
        #expect(machine.nextAfterResponse(now: Self.at(2)) == Machine.Action.none)
        #expect(machine.nextAfterResponse(now: Self.at(2)) == Machine.Action.none)
        #expect(machine.nextAfterResponse(now: Self.at(2))
                == .startRequest(second, body: .collected(ByteBuffer(string: "{}")), keepAlive: true, sendContinue: false))
        #expect(machine.nextAfterResponse(now: Self.at(2)) == nil)
        #expect(machine.queued.count == 2)
        #expect(machine.readRequested() == .none)
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: false))
        #expect(machine.nextAfterResponse(now: Self.at(3)) == Machine.Action.none)
        #expect(machine.nextAfterResponse(now: Self.at(3))
                == .startRequest(third, body: .collected(ByteBuffer()), keepAlive: true, sendContinue: false))
        #expect(machine.nextAfterResponse(now: Self.at(3)) == nil)
        // The queue is empty: reads go on again, and the held-back read happens after the last response.
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: false))
        #expect(machine.nextAfterResponse(now: Self.at(4)) == .awaitRequest(armIdleTimer: nil, read: true))
        #expect(!machine.readPending)
        #expect(machine.nextAfterResponse(now: Self.at(4)) == nil)
    }

    /// A queued request behind a response that closes the connection is never started.
    @Test func queuedRequestsAreDroppedWhenTheResponseCloses() {
        var machine = Self.responding(to: Self.head(.GET, "/", [("connection", "close")]))
        #expect(machine.partReceived(.head(Self.head()), now: Self.start) == .none)
        #expect(machine.partReceived(.end(nil), now: Self.start) == .none)
        #expect(machine.responsePart(ends: true, closes: true) == .write(closeAfter: true))
        #expect(machine.nextAfterResponse(now: Self.start) == nil)
        #expect(machine.channelClosed(cancelRequest: true) == .tearDown(cancelRequest: true))
        #expect(machine.queued.isEmpty)
    }

    // MARK: Streamed bodies

    @Test func largeAndChunkedBodiesStreamWithBackpressure() {
        var machine = Self.machine()
        let head = Self.head(.PUT, "/db/doc/att", [("transfer-encoding", "chunked")])
        #expect(machine.partReceived(.head(head), now: Self.start)
                == .startRequest(head, body: .streamed(uploadID: 1), keepAlive: true, sendContinue: false))
        #expect(machine.state == .responding(keepAlive: true))
        #expect(machine.partReceived(.body(ByteBuffer(string: "one")), now: Self.start) == .forwardBody(ByteBuffer(string: "one")))
        #expect(machine.readRequested() == .read)
        // The route's sequence has enough: reads wait until it asks for more.
        machine.uploadBackpressure()
        #expect(machine.readRequested() == .none)
        #expect(machine.uploadDemand(id: 2, abandoned: false) == .none)  // not this upload's
        #expect(machine.uploadDemand(id: 1, abandoned: false) == .read)
        #expect(machine.partReceived(.body(ByteBuffer(string: "two")), now: Self.start) == .forwardBody(ByteBuffer(string: "two")))
        #expect(machine.partReceived(.end(nil), now: Self.start) == .finishUpload(read: false))
        #expect(machine.upload == nil)
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: false))
        #expect(machine.nextAfterResponse(now: Self.start) == .awaitRequest(armIdleTimer: nil, read: false))

        // The next streamed body gets the next id; once its route stops reading, the rest is dropped.
        let big = Self.head(.PUT, "/db/doc/att", [("content-length", "\(Machine.streamingThreshold + 1)")])
        #expect(machine.partReceived(.head(big), now: Self.start)
                == .startRequest(big, body: .streamed(uploadID: 2), keepAlive: true, sendContinue: false))
        machine.uploadBackpressure()
        #expect(machine.readRequested() == .none)
        #expect(machine.uploadDemand(id: 2, abandoned: true) == .read)
        #expect(machine.partReceived(.body(ByteBuffer(string: "x")), now: Self.start) == .none)
        #expect(machine.partReceived(.end(nil), now: Self.start) == .finishUpload(read: false))
    }

    /// A read held back by the upload's backpressure happens when the body ends.
    @Test func heldBackReadHappensWhenTheUploadEnds() {
        var machine = Self.machine()
        let head = Self.head(.PUT, "/db/doc/att", [("transfer-encoding", "chunked")])
        _ = machine.partReceived(.head(head), now: Self.start)
        machine.uploadBackpressure()
        #expect(machine.readRequested() == .none)
        #expect(machine.partReceived(.end(nil), now: Self.start) == .finishUpload(read: true))
    }

    /// A response that ends before its streamed body does closes the connection (the next request can't be found).
    @Test func responseBeforeTheUploadEndsCloses() {
        var machine = Self.machine()
        let head = Self.head(.PUT, "/db/doc/att", [("transfer-encoding", "chunked")])
        _ = machine.partReceived(.head(head), now: Self.start)
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: true))
        #expect(machine.state == .closed)
        #expect(machine.channelClosed(cancelRequest: true) == .tearDown(cancelRequest: true))
        #expect(machine.upload == nil)
    }

    // MARK: Half-close and shutdown

    @Test func inputClosedClosesAnIdleConnectionAtOnce() {
        var machine = Self.machine()
        #expect(machine.inputClosed() == .close)
        #expect(machine.state == .closed)
        #expect(machine.inputClosed() == Machine.Action.none)

        var collecting = Self.machine()
        _ = collecting.partReceived(.head(Self.head(.PUT, "/db/doc", [("content-length", "9")])), now: Self.start)
        #expect(collecting.inputClosed() == .close)
    }

    @Test func inputClosedLetsThePendingResponseFinishThenCloses() {
        var machine = Self.responding()
        #expect(machine.inputClosed() == .closeAfterResponse)
        #expect(machine.closeWhenDone)
        #expect(machine.responsePart(ends: false, closes: false) == .write(closeAfter: false))
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: true))
        #expect(machine.state == .closed)
    }

    // MARK: Idle timer

    @Test func idleConnectionClosesAfterTheTimeout() {
        var machine = Self.machine()
        #expect(machine.idleTimerArmed)
        #expect(machine.idleTimerFired(now: Self.at(60)) == .close)
        #expect(machine.state == .closed)
        #expect(machine.idleTimerFired(now: Self.at(120)) == Machine.Action.none)
    }

    /// The timer fires early when a part arrived since it was armed, and is re-armed for the rest.
    @Test func idleTimerRearmsForTheQuietTimeLeft() {
        var machine = Self.machine()
        let head = Self.head(.PUT, "/db/doc", [("content-length", "4")])
        #expect(machine.partReceived(.head(head), now: Self.at(45)) == .none)
        #expect(machine.idleTimerFired(now: Self.at(60)) == .armIdleTimer(.seconds(45)))
        // Stalled mid-request.
        #expect(machine.idleTimerFired(now: Self.at(105)) == .close)
    }

    /// A response of any length is not idleness; a client stalled mid-upload (the route waiting) is.
    @Test func idleTimerWhileResponding() {
        var machine = Self.responding()
        #expect(machine.idleTimerFired(now: Self.at(600)) == .armIdleTimer(.seconds(60)))
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: false))
        // Armed already: the end of the response doesn't arm another.
        #expect(machine.nextAfterResponse(now: Self.at(601)) == .awaitRequest(armIdleTimer: nil, read: false))
        #expect(machine.idleTimerFired(now: Self.at(660)) == .armIdleTimer(.seconds(1)))
        #expect(machine.idleTimerFired(now: Self.at(661)) == .close)

        var uploading = Self.machine()
        let head = Self.head(.PUT, "/db/doc/att", [("transfer-encoding", "chunked")])
        _ = uploading.partReceived(.head(head), now: Self.at(0))
        // The route has unread parts (backpressure): the client isn't the one waiting.
        uploading.uploadBackpressure()
        #expect(uploading.idleTimerFired(now: Self.at(60)) == .armIdleTimer(.seconds(60)))
        #expect(uploading.uploadDemand(id: 1, abandoned: false) == Machine.Action.none)
        #expect(uploading.idleTimerFired(now: Self.at(120)) == .close)
    }

    /// A connection whose timer isn't running (never activated, or let go) arms it when it next waits for a request.
    @Test func idleTimerIsArmedWhenNotRunning() {
        var machine = Machine(maxRequestSize: 100, idleTimeout: .seconds(60), now: Self.start)
        #expect(!machine.idleTimerArmed)
        _ = machine.partReceived(.head(Self.head()), now: Self.start)
        _ = machine.partReceived(.end(nil), now: Self.start)
        #expect(machine.responsePart(ends: true, closes: false) == .write(closeAfter: false))
        #expect(machine.nextAfterResponse(now: Self.at(1)) == .awaitRequest(armIdleTimer: .seconds(60), read: false))
        #expect(machine.idleTimerArmed)
        #expect(machine.channelClosed(cancelRequest: false) == .tearDown(cancelRequest: false))
        #expect(!machine.idleTimerArmed)
    }

    @Test func noIdleTimeoutNoTimer() {
        var machine = Self.machine(idle: nil)
        #expect(!machine.idleTimerArmed)
        #expect(machine.idleTimerFired(now: Self.at(1_000_000)) == Machine.Action.none)
        _ = machine.partReceived(.head(Self.head()), now: Self.start)
        _ = machine.partReceived(.end(nil), now: Self.start)
        _ = machine.responsePart(ends: true, closes: false)
        #expect(machine.nextAfterResponse(now: Self.start) == .awaitRequest(armIdleTimer: nil, read: false))
    }

    // MARK: Errors and unexpected events

    @Test func parserErrorGets400UnlessAResponseIsPending() {
        var idle = Self.machine()
        #expect(idle.errorCaught(isParserError: true) == .sendBadRequest)
        #expect(idle.state == .closed)

        var collecting = Self.machine()
        _ = collecting.partReceived(.head(Self.head(.PUT, "/db/doc", [("content-length", "9")])), now: Self.start)
        #expect(collecting.errorCaught(isParserError: true) == .sendBadRequest)

        var busy = Self.responding()
        #expect(busy.errorCaught(isParserError: true) == .close)
        #expect(busy.responsePart(ends: true, closes: false) == .failWrite)

        var other = Self.machine()
        #expect(other.errorCaught(isParserError: false) == .close)
    }

    @Test func rejectedRequestHeadGets400() {
        var machine = Self.machine()
        _ = machine.partReceived(.head(Self.head(.RAW(value: "BREW"), "/pot")), now: Self.start)
        _ = machine.partReceived(.end(nil), now: Self.start)
        #expect(machine.requestRejected() == .sendBadRequest)
        #expect(machine.state == .closed)
        #expect(machine.partReceived(.head(Self.head()), now: Self.start) == Machine.Action.none)
    }

    /// NIO's decoder delivers head, body…, end; anything else is a broken connection, closed.
    @Test(arguments: [0, 1, 2, 3])
    func outOfOrderPartsClose(_ variant: Int) {
        var machine = Self.machine()
        let action: Machine.Action
        switch variant {
        case 0: action = machine.partReceived(.body(ByteBuffer(string: "x")), now: Self.start)
        case 1: action = machine.partReceived(.end(nil), now: Self.start)
        case 2:
            _ = machine.partReceived(.head(Self.head()), now: Self.start)
            action = machine.partReceived(.head(Self.head()), now: Self.start)
        default:
            _ = machine.partReceived(.head(Self.head(.PUT, "/a", [("transfer-encoding", "chunked")])), now: Self.start)
            action = machine.partReceived(.head(Self.head()), now: Self.start)
        }
        #expect(action == .close)
        #expect(machine.state == .closed)
        #expect(machine.partReceived(.end(nil), now: Self.start) == Machine.Action.none)
    }

    @Test func responseWithoutARequestFails() {
        var machine = Self.machine()
        #expect(machine.responsePart(ends: true, closes: false) == .failWrite)
        #expect(machine.state == .idle)
        #expect(machine.nextAfterResponse(now: Self.start) == nil)
    }

    @Test func channelClosedLetsEverythingGo() {
        var machine = Self.responding()
        _ = machine.partReceived(.head(Self.head()), now: Self.start)
        _ = machine.readRequested()
        #expect(machine.channelClosed(cancelRequest: true) == .tearDown(cancelRequest: true))
        #expect(machine.state == .closed && machine.queued.isEmpty && !machine.readPending && machine.body == nil)
        #expect(machine.responsePart(ends: true, closes: false) == .failWrite)
        #expect(machine.inputClosed() == Machine.Action.none)
        #expect(machine.uploadDemand(id: 1, abandoned: false) == Machine.Action.none)
    }
}
