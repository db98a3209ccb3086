// Multipart body writer, CouchDB style.

extension Multipart {
    /// Writes `parts` as a multipart body: for each part `--boundary CRLF`, its
    /// header lines (`Name: value CRLF`), `CRLF`, the body, `CRLF`; then the closing
    /// `--boundary--` with no trailing line break (the byte layout CouchDB emits).
    ///
    /// CR and LF bytes inside header names or values are replaced by spaces so a
    /// header can never inject extra lines. The caller must choose a boundary that
    /// does not occur in any body (`makeBoundary()` makes that overwhelmingly likely).
    package static func write(_ parts: [MultipartPart], boundary: String) -> [UInt8] {
        var output: [UInt8] = []
        write(parts, boundary: boundary, into: &output)
        return output
    }

    /// Appends the multipart body for `parts` to `output` (see `write(_:boundary:)`).
    package static func write(_ parts: [MultipartPart], boundary: String, into output: inout [UInt8]) {
        let dashBoundary = Array("--\(boundary)".utf8)
        var capacity = dashBoundary.count + 2
        for part in parts {
            capacity += dashBoundary.count + 2 + 2 + part.body.count + 2
            for field in part.headers { capacity += field.name.utf8.count + field.value.utf8.count + 4 }
        }
        output.reserveCapacity(output.count + capacity)

        for part in parts {
            output.append(contentsOf: dashBoundary)
            appendCRLF(&output)
            for field in part.headers {
                appendHeaderText(field.name, to: &output)
                output.append(UInt8(ascii: ":"))
                output.append(UInt8(ascii: " "))
                appendHeaderText(field.value, to: &output)
                appendCRLF(&output)
            }
            appendCRLF(&output)
            output.append(contentsOf: part.body)
            appendCRLF(&output)
        }
        output.append(contentsOf: dashBoundary)
        output.append(UInt8(ascii: "-"))
        output.append(UInt8(ascii: "-"))
    }

    @inline(__always)
    private static func appendCRLF(_ output: inout [UInt8]) {
        output.append(UInt8(ascii: "\r"))
        output.append(UInt8(ascii: "\n"))
    }

    static func appendHeaderText(_ text: String, to output: inout [UInt8]) {
        for byte in text.utf8 {
            output.append(byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") ? UInt8(ascii: " ") : byte)
        }
    }
}
