extension JSON {
    /// Parses one JSON value from UTF-8 bytes (RFC 8259, strict).
    ///
    /// Whitespace is only space, tab, CR and LF; there are no comments, trailing commas, leading
    /// zeros, `NaN` or `Infinity`; strings must be valid UTF-8 with control characters escaped;
    /// `\u` escapes must pair surrogates. A repeated object key keeps its first position and its
    /// last value. Anything but whitespace after the value is an error.
    ///
    /// ```swift
    /// let doc = try JSON.parse(bytes)
    /// ```
    ///
    /// - Parameter bytes: The UTF-8 text. Only read during the call.
    /// - Parameter limits: Nesting depth and size bounds.
    /// - Throws: ``JSONError`` naming the problem and its byte offset.
    public static func parse(_ bytes: UnsafeRawBufferPointer, limits: JSONLimits = .default) throws(JSONError) -> JSON {
        if bytes.count > limits.maxBytes {
            throw JSONError(.tooLarge, at: limits.maxBytes)
        }
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw JSONError(.unexpectedEnd, at: 0)
        }
        if bytes.count <= 64, let scalar = scalarFastPath(bytes) { return scalar }
        return try withUnsafeTemporaryAllocation(of: JSON.self, capacity: 16) { (values) throws(JSONError) -> JSON in
            try withUnsafeTemporaryAllocation(of: JSONParser.PendingMember.self, capacity: 32) { (members) throws(JSONError) -> JSON in
                var parser = JSONParser(
                    base: base, count: bytes.count, maxDepth: limits.maxDepth,
                    valueStorage: values, memberStorage: members
                )
                return try parser.parseDocument()
            }
        }
    }

    /// Short scalars that need no parser state (index keys and values are often one): a plain ASCII string without
    /// escapes, a small integer, `null`, `true`, `false`. Anything else — or anything unusual — returns nil and takes
    /// the full parser, which owns every error.
    @inline(__always)
    static func scalarFastPath(_ bytes: UnsafeRawBufferPointer) -> JSON? {
        let n = bytes.count
        let first = bytes[0]
        if first == UInt8(ascii: "\"") {
            guard n >= 2, bytes[n - 1] == UInt8(ascii: "\"") else { return nil }
            for i in 1..<(n - 1) {
                let b = bytes[i]
                if b < 0x20 || b >= 0x7F || b == UInt8(ascii: "\\") || b == UInt8(ascii: "\"") { return nil }
            }
            return .string(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[1..<(n - 1)]), as: UTF8.self))
        }
        if first == UInt8(ascii: "-") || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) {
            let negative = first == UInt8(ascii: "-")
            let start = negative ? 1 : 0
            let digits = n - start
            guard digits >= 1, digits <= 18 else { return nil }
            if bytes[start] == UInt8(ascii: "0") && digits > 1 { return nil }  // a leading zero: the parser's error
            var value: Int64 = 0
            for i in start..<n {
                let d = bytes[i] &- UInt8(ascii: "0")
                guard d <= 9 else { return nil }
                value = value &* 10 &+ Int64(d)
            }
            if negative && value == 0 { return nil }  // -0: the parser decides
            return .int(negative ? -value : value)
        }
        switch n {
        case 4 where first == UInt8(ascii: "n") && bytes[1] == UInt8(ascii: "u") && bytes[2] == UInt8(ascii: "l") && bytes[3] == UInt8(ascii: "l"):
            return .null
        case 4 where first == UInt8(ascii: "t") && bytes[1] == UInt8(ascii: "r") && bytes[2] == UInt8(ascii: "u") && bytes[3] == UInt8(ascii: "e"):
            return .bool(true)
        case 5 where first == UInt8(ascii: "f") && bytes[1] == UInt8(ascii: "a") && bytes[2] == UInt8(ascii: "l") && bytes[3] == UInt8(ascii: "s") && bytes[4] == UInt8(ascii: "e"):
            return .bool(false)
        default:
            return nil
        }
    }

    /// Parses one JSON value from UTF-8 bytes; see ``parse(_:limits:)-(UnsafeRawBufferPointer,_)``.
    public static func parse(_ bytes: [UInt8], limits: JSONLimits = .default) throws(JSONError) -> JSON {
        let result = bytes.withUnsafeBytes { raw -> Result<JSON, JSONError> in
            do throws(JSONError) {
                return .success(try parse(raw, limits: limits))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Parses one JSON value from text; see ``parse(_:limits:)-(UnsafeRawBufferPointer,_)``.
    public static func parse(_ text: String, limits: JSONLimits = .default) throws(JSONError) -> JSON {
        var text = text
        let result = text.withUTF8 { utf8 -> Result<JSON, JSONError> in
            do throws(JSONError) {
                return .success(try parse(UnsafeRawBufferPointer(utf8), limits: limits))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
