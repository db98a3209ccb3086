// Multipart body parser (RFC 2046 §5.1.1), over raw bytes.

extension Multipart {
    /// Parses a complete multipart body.
    ///
    /// - The preamble (anything before the first `--boundary` line) and the epilogue
    ///   (anything after `--boundary--`) are ignored.
    /// - A delimiter is `--boundary` at the start of a line, followed by optional
    ///   spaces/tabs and a line break, or by `--` for the closing delimiter. The line
    ///   break before it belongs to the delimiter, not to the preceding body. A line
    ///   that merely starts with `--boundary` but continues with other bytes is body
    ///   content.
    /// - Each part is header lines, a blank line, then the body (binary, verbatim).
    ///   A part with no headers starts directly with the blank line; an entirely
    ///   empty part, or one with header lines but no blank line and no body, is
    ///   accepted as RFC 2046 allows.
    /// - LF-only line endings are tolerated everywhere. (A body that ends in a CR
    ///   followed by an LF-only delimiter loses that CR: the CR is taken as part of
    ///   the delimiter's CRLF.)
    ///
    /// Throws `MultipartError` when there is no opening delimiter, no closing
    /// delimiter, a header block is not terminated by a blank line, or a header line
    /// is malformed.
    package static func parse(_ body: [UInt8], boundary: String) throws -> [MultipartPart] {
        try body.withUnsafeBufferPointer { buffer in
            try scan(buffer, boundary: boundary).map { span in
                MultipartPart(headers: span.headers, body: Array(buffer[span.body]))
            }
        }
    }

    /// Parses a complete multipart body as ``parse(_:boundary:)`` does, without copying the parts' bodies: each
    /// part's headers and where its body lies in `buffer` (for a body too large to copy: a mapped file).
    package static func scan(_ buffer: UnsafeBufferPointer<UInt8>, boundary: String) throws -> [MultipartSpan] {
        guard !boundary.isEmpty else {
            throw MultipartError("multipart boundary must not be empty")
        }
        // RFC 2046's boundary characters exclude line breaks: a boundary holding one would end a delimiter line
        // inside itself, and no body could be written with it that parses back to the same parts.
        guard !boundary.utf8.contains(where: { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }) else {
            throw MultipartError("multipart boundary must not contain a line break")
        }
        let dashBoundary: [UInt8] = Array("--\(boundary)".utf8)
        let searcher = DelimiterSearcher(pattern: [UInt8(ascii: "\n")] + dashBoundary)
        let scanner = Scanner(buffer: buffer, dashBoundary: dashBoundary, searcher: searcher)
        guard var delimiter = scanner.firstDelimiter() else {
            throw MultipartError(
                "multipart body has no opening boundary delimiter \"--\(boundary)\"")
        }
        var parts: [MultipartSpan] = []
        while !delimiter.isClose {
            // Search from the delimiter line's own LF so that an empty part
            // (`--b CRLF --b`) is recognised.
            guard let next = scanner.nextDelimiter(from: delimiter.lineEnd - 1) else {
                throw MultipartError(
                    "multipart body has no closing boundary delimiter \"--\(boundary)--\" "
                        + "after part \(parts.count + 1)")
            }
            let contentEnd = max(next.contentEnd, delimiter.lineEnd)
            parts.append(try parsePart(buffer, delimiter.lineEnd..<contentEnd, number: parts.count + 1))
            delimiter = next
        }
        return parts
    }

    /// Parses one part's bytes (between its delimiter line and the next delimiter).
    private static func parsePart(
        _ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, number: Int
    ) throws -> MultipartSpan {
        var headers: [(name: String, value: String)] = []
        var position = range.lowerBound
        let end = range.upperBound
        while position < end {
            guard let lineFeed = firstIndex(of: UInt8(ascii: "\n"), in: buffer, position..<end) else {
                throw MultipartError(
                    "multipart part \(number): header block is not terminated by a blank line")
            }
            var lineEnd = lineFeed
            if lineEnd > position, buffer[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
            if lineEnd == position {
                // Blank line: everything after it is the body.
                return MultipartSpan(headers: headers, body: (lineFeed + 1)..<end)
            }
            let line = ArraySlice(buffer[position..<lineEnd])
            if isWhitespace(line[line.startIndex]) {
                // Obsolete line folding: continuation of the previous header's value.
                guard !headers.isEmpty else {
                    throw MultipartError(
                        "multipart part \(number): header continuation line without a preceding header")
                }
                let continuation = trimmed(line)
                if !continuation.isEmpty {
                    let previous = headers[headers.count - 1].value
                    headers[headers.count - 1].value =
                        previous.isEmpty ? decode(continuation) : previous + " " + decode(continuation)
                }
            } else {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")),
                      colon > line.startIndex,
                      !line[..<colon].contains(where: { isWhitespace($0) || $0 == UInt8(ascii: "\r") })
                else {
                    throw MultipartError(
                        "multipart part \(number): malformed header line \"\(preview(line))\" "
                            + "(expected \"Name: value\", or a blank line before the body)")
                }
                headers.append((name: decode(line[..<colon]), value: decode(trimmed(line[(colon + 1)...]))))
            }
            position = lineFeed + 1
        }
        // Header lines that run up to the next delimiter: a part without a body
        // (RFC 2046 `body-part := MIME-part-headers [CRLF *OCTET]`).
        return MultipartSpan(headers: headers, body: end..<end)
    }

    private static func decode(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    private static func preview(_ line: ArraySlice<UInt8>) -> String {
        let limit = 60
        let shown = line.prefix(limit).map { byte -> Character in
            byte >= 0x20 && byte < 0x7F ? Character(Unicode.Scalar(byte)) : "?"
        }
        return String(shown) + (line.count > limit ? "..." : "")
    }

    private static func firstIndex(
        of byte: UInt8, in buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>
    ) -> Int? {
        var i = range.lowerBound
        while i < range.upperBound {
            if buffer[i] == byte { return i }
            i += 1
        }
        return nil
    }

    // MARK: - Delimiter scanning

    /// A boundary delimiter line found in the body.
    private struct Delimiter {
        /// End of the preceding part's content (before the CRLF/LF that starts the delimiter).
        var contentEnd: Int
        /// Index just after the delimiter line (after its line break, or after `--`).
        var lineEnd: Int
        /// Whether this is the closing delimiter `--boundary--`.
        var isClose: Bool
    }

    private struct Scanner {
        let buffer: UnsafeBufferPointer<UInt8>
        let dashBoundary: [UInt8]
        let searcher: DelimiterSearcher

        /// The first delimiter: `--boundary` at offset 0, or at the start of any later line.
        func firstDelimiter() -> Delimiter? {
            if buffer.count >= dashBoundary.count,
               dashBoundary.withUnsafeBufferPointer({ prefix in
                   (0..<prefix.count).allSatisfy { buffer[$0] == prefix[$0] }
               }),
               let ending = suffix(at: dashBoundary.count) {
                return Delimiter(contentEnd: 0, lineEnd: ending.lineEnd, isClose: ending.isClose)
            }
            return nextDelimiter(from: 0)
        }

        /// The next `LF --boundary` at or after `start` that is followed by a valid
        /// delimiter ending.
        func nextDelimiter(from start: Int) -> Delimiter? {
            var from = start
            while let lineFeed = searcher.firstIndex(in: buffer, from: from) {
                if let ending = suffix(at: lineFeed + 1 + dashBoundary.count) {
                    let hasCR = lineFeed > start && buffer[lineFeed - 1] == UInt8(ascii: "\r")
                    return Delimiter(
                        contentEnd: hasCR ? lineFeed - 1 : lineFeed,
                        lineEnd: ending.lineEnd, isClose: ending.isClose)
                }
                from = lineFeed + 1
            }
            return nil
        }

        /// What follows `--boundary` at `index`: `--` (close delimiter), or optional
        /// transport padding (spaces/tabs) and a line break. Nil otherwise.
        private func suffix(at index: Int) -> (lineEnd: Int, isClose: Bool)? {
            let n = buffer.count
            if index + 1 < n, buffer[index] == UInt8(ascii: "-"), buffer[index + 1] == UInt8(ascii: "-") {
                return (index + 2, true)
            }
            var i = index
            while i < n, isWhitespace(buffer[i]) { i += 1 }
            if i < n, buffer[i] == UInt8(ascii: "\n") { return (i + 1, false) }
            if i + 1 < n, buffer[i] == UInt8(ascii: "\r"), buffer[i + 1] == UInt8(ascii: "\n") {
                return (i + 2, false)
            }
            return nil
        }
    }

    /// Boyer-Moore-Horspool search for a fixed byte pattern.
    struct DelimiterSearcher {
        let pattern: [UInt8]
        private let skip: [Int]

        init(pattern: [UInt8]) {
            precondition(!pattern.isEmpty, "search pattern must not be empty")
            self.pattern = pattern
            var skip = [Int](repeating: pattern.count, count: 256)
            for (index, byte) in pattern.dropLast().enumerated() {
                skip[Int(byte)] = pattern.count - 1 - index
            }
            self.skip = skip
        }

        /// Index of the first occurrence of the pattern in `haystack` at or after `start`.
        func firstIndex(in haystack: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
            let m = pattern.count
            let n = haystack.count
            guard start >= 0, m <= n - start else { return nil }
            return pattern.withUnsafeBufferPointer { needle in
                skip.withUnsafeBufferPointer { skip in
                    let lastByte = needle[m - 1]
                    var i = start
                    while i <= n - m {
                        let candidate = haystack[i + m - 1]
                        if candidate == lastByte {
                            var j = m - 2
                            while j >= 0, haystack[i + j] == needle[j] { j -= 1 }
                            if j < 0 { return i }
                        }
                        i += skip[Int(candidate)]
                    }
                    return nil
                }
            }
        }
    }
}
