// MIME multipart (RFC 2046) support for CouchDB's attachment protocol.
//
// Pure Swift over `[UInt8]`: no Hummingbird/NIO types, no Foundation.
//
// - `PUT /db/doc` with `Content-Type: multipart/related; boundary=...`: the first
//   part is the JSON document (its `_attachments` entries carry `"follows": true`),
//   the following parts are the attachment bodies, in `_attachments` key order.
//   Parse with `Multipart.boundary(fromContentType:)` + `Multipart.parse(_:boundary:)`.
// - `GET /db/doc?open_revs=...` with `Accept: multipart/mixed`: one
//   `Content-Type: application/json` part per revision, or
//   `Content-Type: application/json; error="true"` with `{"missing":"<rev>"}` for a
//   missing revision. Build with `MultipartPart.json(_:isError:)` + `Multipart.write`.
//
// The parser lives in MultipartParser.swift, the writer in MultipartWriter.swift.

/// One body part of a multipart entity: its header fields and its raw (binary) body.
package struct MultipartPart: Sendable, Equatable {
    /// Header fields in the order they were sent; names keep the case they were sent with.
    package var headers: [(name: String, value: String)]
    /// Raw body bytes. No character encoding is assumed.
    package var body: [UInt8]

    package init(headers: [(name: String, value: String)] = [], body: [UInt8]) {
        self.headers = headers
        self.body = body
    }

    /// A part with a single `Content-Type` header (none when `contentType` is nil).
    package init(contentType: String?, body: [UInt8]) {
        self.headers = contentType.map { [(name: "Content-Type", value: $0)] } ?? []
        self.body = body
    }

    /// A JSON part, as in CouchDB's `open_revs` multipart/mixed responses:
    /// `Content-Type: application/json`, or `application/json; error="true"` when
    /// `isError` (used for `{"missing":"<rev>"}` entries).
    package static func json(_ body: [UInt8], isError: Bool = false) -> MultipartPart {
        MultipartPart(
            contentType: isError ? #"application/json; error="true""# : "application/json",
            body: body
        )
    }

    /// The value of the first header named `name` (ASCII case-insensitive), or nil.
    package func header(_ name: String) -> String? {
        for field in headers where Multipart.equalsIgnoringASCIICase(field.name, name) {
            return field.value
        }
        return nil
    }

    package var contentType: String? { header("Content-Type") }

    /// The `filename` parameter of this part's `Content-Disposition` header, if any.
    package var filename: String? {
        header("Content-Disposition").flatMap(Multipart.filename(fromContentDisposition:))
    }

    /// Equal when the bodies are byte-identical and the headers match pairwise, in
    /// order, with names compared ASCII case-insensitively and values exactly.
    package static func == (lhs: MultipartPart, rhs: MultipartPart) -> Bool {
        guard lhs.body == rhs.body, lhs.headers.count == rhs.headers.count else { return false }
        for (l, r) in zip(lhs.headers, rhs.headers) {
            guard Multipart.equalsIgnoringASCIICase(l.name, r.name), l.value == r.value else {
                return false
            }
        }
        return true
    }
}

/// One body part found by ``Multipart/scan(_:boundary:)``: its header fields and where its body lies in the
/// scanned buffer (not copied).
package struct MultipartSpan: Sendable {
    /// Header fields in the order they were sent; names keep the case they were sent with.
    package var headers: [(name: String, value: String)]
    /// The body's bytes in the scanned buffer.
    package var body: Range<Int>

    package init(headers: [(name: String, value: String)], body: Range<Int>) {
        self.headers = headers
        self.body = body
    }

    /// The value of the first header named `name` (ASCII case-insensitive), or nil.
    package func header(_ name: String) -> String? {
        for field in headers where Multipart.equalsIgnoringASCIICase(field.name, name) {
            return field.value
        }
        return nil
    }
}

/// Malformed multipart input.
package struct MultipartError: Error, CustomStringConvertible, Equatable {
    package let description: String

    package init(_ description: String) {
        self.description = description
    }
}

/// Namespace for multipart parsing, writing and header-parameter helpers.
package enum Multipart {
    // MARK: Header parameters

    /// Extracts the `boundary` parameter from a Content-Type such as
    /// `multipart/related; boundary="abc"` (quoted or not; parameter and media type
    /// names are case-insensitive). Returns nil when the media type is not
    /// `multipart/*`, or the boundary is absent or empty.
    package static func boundary(fromContentType contentType: String) -> String? {
        let bytes = Array(contentType.utf8)
        let typeEnd = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.endIndex
        let mediaType = trimmed(bytes[..<typeEnd])
        let prefix = Array("multipart/".utf8)
        guard mediaType.count > prefix.count,
              equalsIgnoringASCIICase(mediaType.prefix(prefix.count), prefix[...])
        else { return nil }
        guard let boundary = parameter(named: "boundary", in: contentType), !boundary.isEmpty else {
            return nil
        }
        return boundary
    }

    /// Extracts the file name from a Content-Disposition such as
    /// `attachment; filename="recipe.txt"` (quoted or not). An RFC 5987/6266
    /// `filename*=UTF-8''na%C3%AFve.txt` parameter takes precedence when it decodes.
    /// Returns nil when there is no (non-empty) file name.
    package static func filename(fromContentDisposition disposition: String) -> String? {
        if let extended = parameter(named: "filename*", in: disposition),
           let decoded = decodeExtendedValue(extended), !decoded.isEmpty {
            return decoded
        }
        if let plain = parameter(named: "filename", in: disposition), !plain.isEmpty {
            return plain
        }
        return nil
    }

    /// A Content-Disposition value for an attachment part: `attachment; filename="name"`,
    /// with `"` and `\` escaped (CR/LF are replaced by spaces).
    package static func contentDisposition(attachmentFilename name: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(name.utf8.count + 2)
        for scalar in name.unicodeScalars {
            switch scalar {
            case "\"", "\\": escaped.append("\\"); escaped.unicodeScalars.append(scalar)
            case "\r", "\n": escaped.append(" ")
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return "attachment; filename=\"\(escaped)\""
    }

    /// `multipart/<subtype>; boundary="<boundary>"`, the form CouchDB sends.
    package static func contentType(subtype: String, boundary: String) -> String {
        "multipart/\(subtype); boundary=\"\(boundary)\""
    }

    /// The value of the parameter `name` (case-insensitive) in a header value of the
    /// form `type; name=value; name2="quoted \"value\""`. Quoted strings are unescaped.
    /// Returns the first occurrence, or nil.
    package static func parameter(named name: String, in headerValue: String) -> String? {
        let bytes = Array(headerValue.utf8)
        let wanted = Array(name.utf8)
        let n = bytes.count
        // Skip the leading type/subtype (or disposition type); it contains no quotes.
        guard var i = bytes.firstIndex(of: UInt8(ascii: ";")) else { return nil }
        while i < n {
            // Skip separators and whitespace before the parameter name.
            while i < n, bytes[i] == UInt8(ascii: ";") || isWhitespace(bytes[i]) { i += 1 }
            let nameStart = i
            while i < n, bytes[i] != UInt8(ascii: "="), bytes[i] != UInt8(ascii: ";") { i += 1 }
            let paramName = trimmed(bytes[nameStart..<i])
            guard i < n, bytes[i] == UInt8(ascii: "=") else { continue }  // valueless parameter
            i += 1
            while i < n, isWhitespace(bytes[i]) { i += 1 }
            var value: [UInt8] = []
            if i < n, bytes[i] == UInt8(ascii: "\"") {
                i += 1
                while i < n, bytes[i] != UInt8(ascii: "\"") {
                    if bytes[i] == UInt8(ascii: "\\"), i + 1 < n { i += 1 }
                    value.append(bytes[i])
                    i += 1
                }
                i += 1  // closing quote (tolerates a missing one at the end)
                while i < n, bytes[i] != UInt8(ascii: ";") { i += 1 }  // ignore junk after it
            } else {
                let valueStart = i
                while i < n, bytes[i] != UInt8(ascii: ";") { i += 1 }
                value = Array(trimmed(bytes[valueStart..<i]))
            }
            if equalsIgnoringASCIICase(paramName, wanted[...]) {
                return String(decoding: value, as: UTF8.self)
            }
        }
        return nil
    }

    // MARK: Boundaries

    /// A random boundary: 32 lowercase hex characters.
    package static func makeBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        return hex64(generator.next()) + hex64(generator.next())
    }

    private static func hex64(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    // MARK: Byte helpers (shared with the parser and writer)

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
    }

    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var lower = bytes.startIndex
        var upper = bytes.endIndex
        while lower < upper, isWhitespace(bytes[lower]) { lower += 1 }
        while upper > lower, isWhitespace(bytes[upper - 1]) { upper -= 1 }
        return bytes[lower..<upper]
    }

    static func equalsIgnoringASCIICase(_ lhs: String, _ rhs: String) -> Bool {
        lhs.utf8.elementsEqual(rhs.utf8) { asciiLowercased($0) == asciiLowercased($1) }
    }

    static func equalsIgnoringASCIICase(_ lhs: ArraySlice<UInt8>, _ rhs: ArraySlice<UInt8>) -> Bool {
        lhs.elementsEqual(rhs) { asciiLowercased($0) == asciiLowercased($1) }
    }

    @inline(__always)
    static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    /// Decodes an RFC 5987 ext-value `charset'language'pct-encoded` (UTF-8 or ISO-8859-1).
    private static func decodeExtendedValue(_ value: String) -> String? {
        let bytes = Array(value.utf8)
        guard let firstQuote = bytes.firstIndex(of: UInt8(ascii: "'")),
              let secondQuote = bytes[(firstQuote + 1)...].firstIndex(of: UInt8(ascii: "'"))
        else { return nil }
        let charset = bytes[..<firstQuote]
        var decoded: [UInt8] = []
        var i = secondQuote + 1
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count,
                      let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2])
                else { return nil }
                decoded.append(high << 4 | low)
                i += 3
            } else {
                decoded.append(bytes[i])
                i += 1
            }
        }
        if equalsIgnoringASCIICase(charset, Array("UTF-8".utf8)[...]) {
            let string = String(decoding: decoded, as: UTF8.self)
            return string.utf8.elementsEqual(decoded) ? string : nil  // reject invalid UTF-8
        }
        if equalsIgnoringASCIICase(charset, Array("ISO-8859-1".utf8)[...]) {
            var result = ""
            result.unicodeScalars.append(contentsOf: decoded.map { Unicode.Scalar($0) })
            return result
        }
        return nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
