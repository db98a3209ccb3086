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
