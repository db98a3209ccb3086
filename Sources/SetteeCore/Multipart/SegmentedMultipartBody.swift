// A multipart body whose large parts are read as it is written.

/// Bytes of a multipart body that are not held in memory: read a piece at a time as the body is written (an
/// attachment stored in SQLite, a staged file), of a length known beforehand.
package protocol MultipartPayload: Sendable {
    /// Its length in bytes, as written into the body.
    var length: Int { get }
}

/// A multipart body as segments: runs of bytes, and payloads the writer of the body reads when it gets to them.
/// The byte layout is ``Multipart/write(_:boundary:)``'s (CouchDB's): for each part `--boundary CRLF`, its header
/// lines, `CRLF`, the body, `CRLF`; then `--boundary--`. The server sends documents with large attachments this way
/// (payloads read from SQLite), and the replicator pushes them (payloads read from staging files).
package struct SegmentedMultipartBody<Payload: MultipartPayload>: Sendable {
    package enum Segment: Sendable {
        case bytes([UInt8])
        case payload(Payload)

        /// Its length in bytes.
        package var length: Int {
            switch self {
            case .bytes(let b): b.count
            case .payload(let p): p.length
            }
        }
    }

    package let boundary: String
    /// The segments so far (bytes not yet ended by a payload or ``close()`` are not among them).
    package private(set) var segments: [Segment] = []
    private var pending: [UInt8] = []

    package init(boundary: String = Multipart.makeBoundary()) {
        self.boundary = boundary
    }

    /// The body's length in bytes.
    package var length: Int { segments.reduce(pending.count) { $0 + $1.length } }

    /// Whether no part of the body is a payload (its segments are all bytes).
    package var isInMemory: Bool {
        segments.allSatisfy { if case .bytes = $0 { true } else { false } }
    }

    /// A part: `--boundary`, its header lines, a blank line, the body, a line break.
    package mutating func appendPart(headers: [(name: String, value: String)], _ body: Segment) {
        appendHead(headers)
        append(body)
        pending += [13, 10]
    }

    /// A part whose body is another multipart body (a revision's `multipart/related` inside `multipart/mixed`).
    package mutating func appendPart(headers: [(name: String, value: String)], _ body: SegmentedMultipartBody) {
        appendHead(headers)
        for segment in body.segments { append(segment) }
        pending += body.pending
        pending += [13, 10]
    }

    /// The closing delimiter (`--boundary--`, no line break after it).
    package mutating func close() {
        pending += Array("--\(boundary)--".utf8)
        flush()
    }

    private mutating func appendHead(_ headers: [(name: String, value: String)]) {
        pending += Array("--\(boundary)\r\n".utf8)
        for field in headers {
            // (CR and LF in a header become spaces: a header can't inject lines.)
            Multipart.appendHeaderText(field.name, to: &pending)
            pending += [UInt8(ascii: ":"), UInt8(ascii: " ")]
            Multipart.appendHeaderText(field.value, to: &pending)
            pending += [13, 10]
        }
        pending += [13, 10]
    }

    private mutating func append(_ segment: Segment) {
        switch segment {
        case .bytes(let b): pending += b
        case .payload:
            flush()
            segments.append(segment)
        }
    }

    private mutating func flush() {
        if !pending.isEmpty { segments.append(.bytes(pending)) }
        pending = []
    }
}
