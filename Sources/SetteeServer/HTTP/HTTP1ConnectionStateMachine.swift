import NIOCore
import NIOHTTP1

/// The state of one plain HTTP/1.1 connection, as a value: ``HTTP1ConnectionHandler`` feeds it the connection's
/// events (a request part read, a response part to write, a read asked for, the input closed, the idle timer,
/// an error) and performs the ``Action`` each returns. Nothing here touches the channel, so every transition
/// can be checked on its own (as NIO's `HTTPServerPipelineHandler` and `NIOAsyncChannel` keep theirs).
///
/// - One request at a time: parts of a pipelined request that arrive while a response is pending are queued,
///   and handed back one by one (``nextAfterResponse(now:)``) once the response ends; while some are queued the
///   socket is not read (``readRequested()``).
/// - A body up to ``streamingThreshold`` (by its `Content-Length`) is assembled before the request starts, kept
///   up to one byte past the request limit (the route that reads it answers 413 `too_large`; the rest is
///   dropped). A larger body, or one of unknown length (chunked), streams to its route as it arrives: the
///   handler yields each part to the route's sequence (``Action/forwardBody(_:)``) and reports when that
///   sequence has enough (``uploadBackpressure()``); reads wait until the route asks for more
///   (``uploadDemand(id:abandoned:)``). A response that ends before such a body does closes the connection.
/// - Keep-alive as the request asks; the connection closes after a response whose head said `Connection: close`,
///   and after the pending response once told to (``inputClosed()``: the client's half-close, or shutdown).
/// - The idle timer: no request part for the idle timeout while no response is pending closes the connection
///   (idle between requests, or stalled mid-request or mid-upload); a response of any length is not idleness.
/// - A request NIO's decoder (llhttp) takes for a protocol switch — `CONNECT`, or `Upgrade` with
///   `Connection: upgrade` — stops that decoder for good after its end (the bytes that follow would be the new
///   protocol's). Settee switches to nothing, as CouchDB's mochiweb doesn't: the request is answered like any
///   other and, once its response ended, the decoder is replaced (``Action/restartDecoder``) so the connection
///   reads its next request.
struct HTTP1ConnectionStateMachine {
    /// Where the connection is between two events.
    enum State: Equatable {
        /// Waiting for a request's head.
        case idle
        /// Assembling a request's body (in ``body``) before the request starts.
        case collecting(HTTPRequestHead)
        /// A request is being answered (its body may still be streaming in: ``upload``).
        case responding(keepAlive: Bool)
        /// Closed, or closing: nothing more is read or written.
        case closed
    }

    /// A request body handed to its route as it arrives.
    struct Upload: Equatable {
        /// Tells this upload's demand from that of an earlier one on the same connection.
        let id: Int
        /// The route has enough unread buffers: the socket isn't read until it asks for more.
        var paused = false
        /// The route stopped reading: the rest of the body is dropped.
        var abandoned = false
    }

    /// A request's body as its request starts.
    enum Body: Equatable {
        /// The whole body (up to one byte past the request limit).
        case collected(ByteBuffer)
        /// The body follows as ``Action/forwardBody(_:)`` actions; `uploadID` names its demand.
        case streamed(uploadID: Int)
    }

    /// What the handler does after an event.
    enum Action: Equatable {
        /// Nothing.
        case none
        /// Answer `Expect: 100-continue` with `100 Continue` (the client waits for it before sending the body).
        case sendContinue
        /// Run a request (`sendContinue`: answer `100 Continue` first). Its response comes back through
        /// ``responsePart(ends:closes:)``.
        case startRequest(HTTPRequestHead, body: Body, keepAlive: Bool, sendContinue: Bool)
        /// Pass a part of the streamed body to its route (and report `.stopProducing` by ``uploadBackpressure()``).
        case forwardBody(ByteBuffer)
        /// The streamed body ended: finish the route's sequence, then read from the socket if `read`.
        case finishUpload(read: Bool)
        /// Read from the socket (a read that was held back).
        case read
        /// Write the response part and flush it; if `closeAfter`, close the connection once it is on the wire.
        case write(closeAfter: Bool)
        /// The response part can't be written: the connection is closed (fail the write).
        case failWrite
        /// The response ended and the connection waits for the next request: arm the idle timer (when a delay is
        /// given) and read if `read`.
        case awaitRequest(armIdleTimer: TimeAmount?, read: Bool)
        /// The connection closes after the pending response: its head says `Connection: close`.
        case closeAfterResponse
        /// Arm the idle timer to fire after this long.
        case armIdleTimer(TimeAmount)
        /// Answer `400 Bad Request` and close once it is written.
        case sendBadRequest
        /// Replace the request decoder, which stopped after a request it took for a protocol switch, by a fresh
        /// one that gets the bytes the old one held.
        case restartDecoder
        /// Close the connection now.
        case close
        /// The connection is gone: fail a streamed body that didn't end, cancel the idle timer and (if
        /// `cancelRequest`) the running request's task.
        case tearDown(cancelRequest: Bool)
    }

    /// Bodies larger than this (by `Content-Length`), and chunked ones, stream to their route.
    static let streamingThreshold = 1 << 20

    private(set) var state = State.idle
    /// The body being assembled while ``State/collecting(_:)`` (kept out of the state so it grows in place).
    private(set) var body: ByteBuffer?
    private(set) var upload: Upload?
    /// Parts of pipelined requests read while a response is pending.
    private(set) var queued = CircularBuffer<HTTPServerRequestPart>()
    /// A read the handler held back (backpressure), done once the connection can take more.
    private(set) var readPending = false
    /// Close after the pending response (the client's half-close, shutdown, a response that said so).
    private(set) var closeWhenDone = false
    private(set) var idleTimerArmed = false
    /// When the last request part arrived (or the last response ended).
    private(set) var lastActivity: NIODeadline
    /// A response ended and ``nextAfterResponse(now:)`` has not yet said what follows.
    private var resuming = false
    /// The request being answered stopped the decoder (see ``stopsDecoder(_:)``): replace it after the response.
    private(set) var decoderStopped = false
    private var uploads = 0
    /// Bytes of a body kept: one past the request limit, so the route can tell it is too large.
    private let keep: Int
    private let idleTimeout: TimeAmount?
    private let allocator: ByteBufferAllocator

    /// - Parameters:
    ///   - maxRequestSize: the node's request limit (`Int.max`: none).
    ///   - idleTimeout: how long a connection with no pending response may stay quiet (nil: forever).
    init(maxRequestSize: Int, idleTimeout: TimeAmount?, now: NIODeadline = .now(),
         allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        self.keep = maxRequestSize == .max ? maxRequestSize : maxRequestSize + 1
        self.idleTimeout = idleTimeout
        self.lastActivity = now
        self.allocator = allocator
    }

    var isResponding: Bool {
        if case .responding = state { true } else { false }
    }

    // MARK: Events

    /// The connection became active (or the handler was added to an active one): the idle clock starts.
    mutating func channelActive(now: NIODeadline) -> Action {
        lastActivity = now
        return armIdleTimer().map { .armIdleTimer($0) } ?? .none
    }

    /// A request part arrived from NIO's decoder (head, body…, end, in that order).
    mutating func partReceived(_ part: HTTPServerRequestPart, now: NIODeadline) -> Action {
        lastActivity = now
        switch state {
        case .closed:
            return .none
        case .responding where upload != nil:
            return uploadPartReceived(part)
        case .responding:
            queued.append(part)
            return .none
        case .idle:
            guard case .head(let head) = part else { return protocolViolation() }
            if Self.stopsDecoder(head) { decoderStopped = true }
            let sendContinue = head.version == .http1_1
                && head.headers.first(name: "expect")?.lowercased() == "100-continue"
            let length = head.headers.first(name: "content-length").flatMap { Int($0) }
            if length.map({ $0 > Self.streamingThreshold }) ?? head.headers.contains(name: "transfer-encoding") {
                let keepAlive = head.isKeepAlive
                state = .responding(keepAlive: keepAlive)
                uploads += 1
                upload = Upload(id: uploads)
                return .startRequest(head, body: .streamed(uploadID: uploads), keepAlive: keepAlive,
                                     sendContinue: sendContinue)
            }
            state = .collecting(head)
            if let length, length > 0 { body = allocator.buffer(capacity: min(length, keep)) }
            return sendContinue ? .sendContinue : .none
        case .collecting(let head):
            switch part {
            case .body(var chunk):
                let held = body?.readableBytes ?? 0
                guard held < keep else { return .none }  // past the limit: dropped
                if chunk.readableBytes > keep - held { chunk = chunk.getSlice(at: chunk.readerIndex, length: keep - held)! }
                if body == nil { body = chunk } else { body!.writeBuffer(&chunk) }
                return .none
            case .end:
                let keepAlive = head.isKeepAlive
                state = .responding(keepAlive: keepAlive)
                let assembled = body ?? ByteBuffer()
                body = nil
                return .startRequest(head, body: .collected(assembled), keepAlive: keepAlive, sendContinue: false)
            case .head:
                return protocolViolation()
            }
        }
    }

    /// A part of a streamed body: passed on (or dropped, if the route stopped reading); the end finishes it.
    private mutating func uploadPartReceived(_ part: HTTPServerRequestPart) -> Action {
        switch part {
        case .body(let chunk):
            return upload!.abandoned ? .none : .forwardBody(chunk)
        case .end:
            upload = nil
            return .finishUpload(read: resumeReading())
        case .head:
            // NIO's decoder ends a body before the next head; anything else is a broken connection.
            return protocolViolation()
        }
    }

    /// The route's body sequence said `.stopProducing` for the last part forwarded: hold reads until it asks.
    mutating func uploadBackpressure() {
        upload?.paused = true
    }

    /// The route reading upload `id` wants more of it, or (`abandoned`) stopped reading.
    mutating func uploadDemand(id: Int, abandoned: Bool) -> Action {
        guard var current = upload, current.id == id else { return .none }
        current.paused = false
        if abandoned { current.abandoned = true }
        upload = current
        return resumeReading() ? .read : .none
    }

    /// NIO asks the handler to read. Reads go on while a response is pending until a part of a next (pipelined)
    /// request is queued; then they wait for the response's end. (Holding every read while responding would make
    /// NIO drop and re-add the socket's read interest, two `epoll_ctl` calls, on each request of an ordinary
    /// keep-alive client.)
    mutating func readRequested() -> Action {
        if (isResponding && !queued.isEmpty) || (upload?.paused ?? false) {
            readPending = true
            return .none
        }
        return .read
    }

    /// A part of the response is ready to go (`ends`: its last; `closes`: its head said `Connection: close`).
    /// After the end the connection closes (as the response's head said, the request wasn't keep-alive, the
    /// connection was told to close meanwhile, or a streamed body wasn't read to its end) or calls
    /// ``nextAfterResponse(now:)`` until it returns nil.
    mutating func responsePart(ends: Bool, closes: Bool) -> Action {
        guard case .responding(let keepAlive) = state else { return .failWrite }
        if closes { closeWhenDone = true }
        // (A streamed body the route didn't read to its end: the connection can't find the next request.)
        let closeAfter = ends && (!keepAlive || closeWhenDone || upload != nil)
        if ends {
            if closeAfter {
                state = .closed
            } else {
                state = .idle
                resuming = true
            }
        }
        return .write(closeAfter: closeAfter)
    }

    /// After a response ended on a connection that stays open: the actions for the queued parts of the next
    /// request(s), one per call, then ``Action/awaitRequest(armIdleTimer:read:)`` if no request is running;
    /// nil when done.
    mutating func nextAfterResponse(now: NIODeadline) -> Action? {
        guard resuming else { return nil }
        if state == .closed {
            resuming = false
            return nil
        }
        if !queued.isEmpty && (upload != nil || !isResponding) {
            return partReceived(queued.removeFirst(), now: now)
        }
        if decoderStopped && !isResponding {
            // Nothing was queued: the stopped decoder passed on no part after the request's end.
            decoderStopped = false
            return .restartDecoder
        }
        resuming = false
        if isResponding { return nil }  // a queued request is being answered
        lastActivity = now
        let read = readPending
        readPending = false
        return .awaitRequest(armIdleTimer: armIdleTimer(), read: read)
    }

    /// The client half-closed the connection, or the server is shutting down: an idle connection closes now, a
    /// busy one after its response.
    mutating func inputClosed() -> Action {
        switch state {
        case .closed:
            return .none
        case .responding:
            closeWhenDone = true
            return .closeAfterResponse
        case .idle, .collecting:
            closeWhenDone = true
            state = .closed
            return .close
        }
    }

    /// The idle timer fired (it is armed once at a time and re-armed when it fires early).
    mutating func idleTimerFired(now: NIODeadline) -> Action {
        idleTimerArmed = false
        guard let idleTimeout else { return .none }
        switch state {
        case .closed:
            return .none
        case .responding where upload.map({ $0.paused }) ?? true:
            idleTimerArmed = true
            return .armIdleTimer(idleTimeout)  // a response of any length is not idleness
        case .idle, .collecting, .responding:
            // Between requests, stalled mid-request, or stalled mid-body while the route waits for the rest.
            let quiet = now - lastActivity
            if quiet < idleTimeout {
                idleTimerArmed = true
                return .armIdleTimer(idleTimeout - quiet)
            }
            state = .closed
            return .close
        }
    }

    /// The request's head can't be made an HTTP request (an unknown method, a bad target).
    mutating func requestRejected() -> Action {
        state = .closed
        return .sendBadRequest
    }

    /// The pipeline caught an error: a request NIO's parser rejects gets a 400 (unless a response is pending),
    /// anything else closes the connection.
    mutating func errorCaught(isParserError: Bool) -> Action {
        let answer = isParserError && (state == .idle || { if case .collecting = state { true } else { false } }())
        state = .closed
        return answer ? .sendBadRequest : .close
    }

    /// The channel went inactive (`cancelRequest`: the request's task is cancelled too) or the handler was
    /// removed: everything still held is let go.
    mutating func channelClosed(cancelRequest: Bool) -> Action {
        state = .closed
        queued.removeAll()
        body = nil
        upload = nil
        readPending = false
        resuming = false
        decoderStopped = false
        idleTimerArmed = false
        return .tearDown(cancelRequest: cancelRequest)
    }

    // MARK: Helpers

    /// Whether NIO's decoder stops parsing after this request's end: llhttp's rule for a request that switches
    /// protocols (`llhttp__before_headers_complete`: `CONNECT`, or an `Upgrade` header with `upgrade` among the
    /// `Connection` tokens).
    static func stopsDecoder(_ head: HTTPRequestHead) -> Bool {
        if head.method == .CONNECT { return true }
        return head.headers.contains(name: "upgrade")
            && head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
    }

    /// NIO's decoder delivers head, body…, end in order; anything else is a broken connection.
    private mutating func protocolViolation() -> Action {
        state = .closed
        return .close
    }

    /// Whether a held-back read can go ahead now (and it is then no longer pending).
    private mutating func resumeReading() -> Bool {
        guard readPending && queued.isEmpty && !(upload?.paused ?? false) else { return false }
        readPending = false
        return true
    }

    /// The delay to arm the idle timer with, if there is a timeout and the timer isn't running.
    private mutating func armIdleTimer() -> TimeAmount? {
        guard let idleTimeout, !idleTimerArmed else { return nil }
        idleTimerArmed = true
        return idleTimeout
    }
}
