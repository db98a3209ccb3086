import Testing

@testable import SetteeCore

// MARK: - Helpers

private func bytes(_ string: String) -> [UInt8] { Array(string.utf8) }

/// Converts LF line endings (as in a multi-line string literal) to CRLF.
private func crlf(_ string: String) -> [UInt8] {
    var out: [UInt8] = []
    for byte in string.utf8 {
        if byte == UInt8(ascii: "\n") { out.append(UInt8(ascii: "\r")) }
        out.append(byte)
    }
    return out
}

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// Deterministic pseudo-random bytes (SplitMix64), so failures are reproducible.
private func pseudoRandomBytes(count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    var out: [UInt8] = []
    out.reserveCapacity(count)
    while out.count < count {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        for shift in stride(from: 0, to: 64, by: 8) where out.count < count {
            out.append(UInt8(truncatingIfNeeded: z >> UInt64(shift)))
        }
    }
    return out
}

private func expectParseError(
    _ body: [UInt8], boundary: String, mentioning fragment: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    do {
        let parts = try Multipart.parse(body, boundary: boundary)
        Issue.record("expected a MultipartError, got \(parts.count) part(s)", sourceLocation: sourceLocation)
    } catch let error as MultipartError {
        #expect(
            error.description.contains(fragment),
            "error \"\(error.description)\" should mention \"\(fragment)\"",
            sourceLocation: sourceLocation)
    } catch {
        Issue.record("unexpected error type: \(error)", sourceLocation: sourceLocation)
    }
}

// MARK: - Content-Type boundary

@Suite("Multipart.boundary(fromContentType:)")
struct MultipartBoundaryTests {
    @Test func unquoted() {
        #expect(Multipart.boundary(fromContentType: "multipart/related; boundary=abc123") == "abc123")
        #expect(Multipart.boundary(fromContentType: "multipart/related;boundary=abc123") == "abc123")
        #expect(Multipart.boundary(fromContentType: "multipart/mixed; boundary = abc123 ") == "abc123")
    }

    @Test func quoted() {
        // Exactly as in the CouchDB documentation.
        #expect(Multipart.boundary(fromContentType: #"multipart/related;boundary="abc123""#) == "abc123")
        #expect(
            Multipart.boundary(
                fromContentType: #"multipart/related; boundary="e89b3e29388aef23453450d10e5aaed0""#)
                == "e89b3e29388aef23453450d10e5aaed0")
        // Quoted boundaries may contain characters that are special in headers.
        #expect(Multipart.boundary(fromContentType: #"multipart/mixed; boundary="a;b=c d""#) == "a;b=c d")
        #expect(Multipart.boundary(fromContentType: #"multipart/mixed; boundary="a\"b""#) == #"a"b"#)
    }

    @Test func caseInsensitiveAndAmongOtherParameters() {
        #expect(Multipart.boundary(fromContentType: "Multipart/Related; BOUNDARY=xyz") == "xyz")
        #expect(
            Multipart.boundary(
                fromContentType: #"multipart/related; type="application/json"; boundary=xyz; start="<a>""#)
                == "xyz")
        #expect(Multipart.boundary(fromContentType: "multipart/form-data; charset=utf-8; boundary=\"q\"") == "q")
    }

    @Test func absentOrNotMultipart() {
        #expect(Multipart.boundary(fromContentType: "application/json") == nil)
        #expect(Multipart.boundary(fromContentType: "application/json; boundary=abc") == nil)
        #expect(Multipart.boundary(fromContentType: "multipart/related") == nil)
        #expect(Multipart.boundary(fromContentType: "multipart/related; charset=utf-8") == nil)
        #expect(Multipart.boundary(fromContentType: #"multipart/related; boundary="""#) == nil)
        #expect(Multipart.boundary(fromContentType: "multipart/related; boundary=") == nil)
        #expect(Multipart.boundary(fromContentType: "multipart/; boundary=abc") == nil)
        #expect(Multipart.boundary(fromContentType: "") == nil)
        // A parameter whose name merely ends in "boundary" is not the boundary.
        #expect(Multipart.boundary(fromContentType: "multipart/mixed; xboundary=abc") == nil)
    }

    @Test func contentTypeHelperRoundTrips() {
        let boundary = Multipart.makeBoundary()
        let contentType = Multipart.contentType(subtype: "mixed", boundary: boundary)
        #expect(contentType == "multipart/mixed; boundary=\"\(boundary)\"")
        #expect(Multipart.boundary(fromContentType: contentType) == boundary)
    }

    @Test func makeBoundaryIs32HexCharacters() {
        var seen: Set<String> = []
        for _ in 0..<100 {
            let boundary = Multipart.makeBoundary()
            #expect(boundary.utf8.count == 32)
            #expect(boundary.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            seen.insert(boundary)
        }
        #expect(seen.count == 100)
    }
}

// MARK: - Content-Disposition filename

@Suite("Multipart.filename(fromContentDisposition:)")
struct MultipartFilenameTests {
    @Test func quotedAndUnquoted() {
        #expect(Multipart.filename(fromContentDisposition: #"attachment; filename="recipe.txt""#) == "recipe.txt")
        #expect(Multipart.filename(fromContentDisposition: "attachment; filename=recipe.txt") == "recipe.txt")
        #expect(Multipart.filename(fromContentDisposition: "attachment;filename=recipe.txt ") == "recipe.txt")
        #expect(Multipart.filename(fromContentDisposition: #"Attachment; FileName="a b.txt""#) == "a b.txt")
    }

    @Test func escapesAndSpecialCharactersInQuotes() {
        #expect(Multipart.filename(fromContentDisposition: #"attachment; filename="say \"hi\".txt""#) == #"say "hi".txt"#)
        #expect(Multipart.filename(fromContentDisposition: #"attachment; filename="a;b=c.txt""#) == "a;b=c.txt")
        #expect(Multipart.filename(fromContentDisposition: #"attachment; filename="dir\\file""#) == #"dir\file"#)
        #expect(Multipart.filename(fromContentDisposition: #"attachment; filename="naïve.txt""#) == "naïve.txt")
    }

    @Test func otherParameters() {
        #expect(
            Multipart.filename(fromContentDisposition: #"form-data; name="file"; filename="photo.jpg""#)
                == "photo.jpg")
        #expect(
            Multipart.filename(fromContentDisposition: #"attachment; filename="x.txt"; size=12"#) == "x.txt")
    }

    @Test func extendedFilenameTakesPrecedence() {
        #expect(
            Multipart.filename(
                fromContentDisposition: #"attachment; filename="fallback.txt"; filename*=UTF-8''na%C3%AFve%20file.txt"#)
                == "naïve file.txt")
        #expect(Multipart.filename(fromContentDisposition: "attachment; filename*=iso-8859-1'en'caf%E9") == "café")
        // Undecodable extended value: fall back to the plain one.
        #expect(
            Multipart.filename(fromContentDisposition: #"attachment; filename*=UTF-8''%FF%FE; filename="ok.bin""#)
                == "ok.bin")
    }

    @Test func absent() {
        #expect(Multipart.filename(fromContentDisposition: "attachment") == nil)
        #expect(Multipart.filename(fromContentDisposition: "inline; name=foo") == nil)
        #expect(Multipart.filename(fromContentDisposition: #"attachment; filename="""#) == nil)
        #expect(Multipart.filename(fromContentDisposition: "") == nil)
    }

    @Test func contentDispositionHelperRoundTrips() {
        for name in ["recipe.txt", #"we "quote" it.txt"#, #"back\slash"#, "a;b=c", "ünïcödé 📎.png"] {
            let header = Multipart.contentDisposition(attachmentFilename: name)
            #expect(Multipart.filename(fromContentDisposition: header) == name)
        }
        #expect(Multipart.contentDisposition(attachmentFilename: "recipe.txt") == #"attachment; filename="recipe.txt""#)
        #expect(!Multipart.contentDisposition(attachmentFilename: "evil\r\nX-Injected: 1").contains("\n"))
    }

    @Test func partFilenameAccessor() {
        let part = MultipartPart(
            headers: [(name: "content-disposition", value: #"attachment; filename="a.txt""#)], body: [])
        #expect(part.filename == "a.txt")
        #expect(MultipartPart(contentType: "text/plain", body: []).filename == nil)
    }
}

// MARK: - MultipartPart

@Suite("MultipartPart")
struct MultipartPartTests {
    @Test func headerLookupIsCaseInsensitive() {
        let part = MultipartPart(
            headers: [(name: "content-TYPE", value: "text/plain"), (name: "X-Thing", value: "1"), (name: "x-thing", value: "2")],
            body: [])
        #expect(part.header("Content-Type") == "text/plain")
        #expect(part.contentType == "text/plain")
        #expect(part.header("X-THING") == "1")  // first occurrence wins
        #expect(part.header("Content-Length") == nil)
        #expect(part.headers[0].name == "content-TYPE")  // names kept as sent
    }

    @Test func equality() {
        let a = MultipartPart(headers: [(name: "Content-Type", value: "text/plain")], body: [1, 2, 3])
        let b = MultipartPart(headers: [(name: "content-type", value: "text/plain")], body: [1, 2, 3])
        #expect(a == b)
        #expect(a != MultipartPart(headers: [(name: "Content-Type", value: "TEXT/PLAIN")], body: [1, 2, 3]))
        #expect(a != MultipartPart(headers: [(name: "Content-Type", value: "text/plain")], body: [1, 2]))
        #expect(a != MultipartPart(headers: [], body: [1, 2, 3]))
        #expect(a == MultipartPart(contentType: "text/plain", body: [1, 2, 3]))
        #expect(MultipartPart(contentType: nil, body: []).headers.isEmpty)
    }

    @Test func jsonParts() {
        #expect(MultipartPart.json(bytes("{}")).contentType == "application/json")
        #expect(MultipartPart.json(bytes("{}"), isError: true).contentType == #"application/json; error="true""#)
    }
}

// MARK: - Parsing

@Suite("Multipart.parse")
struct MultipartParseTests {
    /// The `PUT /temp/somedoc` request body from the CouchDB documentation
    /// ("Creating Multiple Attachments", api/document/common.rst), verbatim.
    static let couchDBPutExample = """
        --abc123
        Content-Type: application/json

        {
            "body": "This is a body.",
            "_attachments": {
                "foo.txt": {
                    "follows": true,
                    "content_type": "text/plain",
                    "length": 21
                },
                "bar.txt": {
                    "follows": true,
                    "content_type": "text/plain",
                    "length": 20
                }
            }
        }

        --abc123

        this is 21 chars long
        --abc123

        this is 20 chars lon
        --abc123--
        """

    static let couchDBPutJSON = """
        {
            "body": "This is a body.",
            "_attachments": {
                "foo.txt": {
                    "follows": true,
                    "content_type": "text/plain",
                    "length": 21
                },
                "bar.txt": {
                    "follows": true,
                    "content_type": "text/plain",
                    "length": 20
                }
            }
        }

        """

    @Test(arguments: [false, true])
    func couchDBDocumentationPutExample(useCRLF: Bool) throws {
        let body = useCRLF ? crlf(Self.couchDBPutExample) : bytes(Self.couchDBPutExample)
        let boundary = try #require(Multipart.boundary(fromContentType: #"multipart/related;boundary="abc123""#))
        let parts = try Multipart.parse(body, boundary: boundary)
        try #require(parts.count == 3)

        #expect(parts[0].headers.count == 1)
        #expect(parts[0].contentType == "application/json")
        let json = useCRLF ? crlf(Self.couchDBPutJSON) : bytes(Self.couchDBPutJSON)
        #expect(parts[0].body == json)

        // Attachment parts carry no headers at all; lengths match `_attachments`.
        #expect(parts[1].headers.isEmpty)
        #expect(parts[1].body == bytes("this is 21 chars long"))
        #expect(parts[1].body.count == 21)
        #expect(parts[2].headers.isEmpty)
        #expect(parts[2].body == bytes("this is 20 chars lon"))
        #expect(parts[2].body.count == 20)
    }

    /// The `GET /recipes/secret?attachments=true` multipart/related response from the
    /// CouchDB documentation, verbatim (with CRLF line endings, as sent on the wire).
    @Test func couchDBDocumentationGetResponseExample() throws {
        let contentType = #"multipart/related; boundary="e89b3e29388aef23453450d10e5aaed0""#
        let body = crlf("""
            --e89b3e29388aef23453450d10e5aaed0
            Content-Type: application/json

            {"_id":"secret","_rev":"2-c1c6c44c4bc3c9344b037c8690468605","_attachments":{"recipe.txt":{"content_type":"text/plain","revpos":2,"digest":"md5-HV9aXJdEnu0xnMQYTKgOFA==","length":86,"follows":true}}}
            --e89b3e29388aef23453450d10e5aaed0
            Content-Disposition: attachment; filename="recipe.txt"
            Content-Type: text/plain
            Content-Length: 86

            1. Take R
            2. Take E
            3. Mix with L
            4. Add some A
            5. Serve with X

            --e89b3e29388aef23453450d10e5aaed0--
            """)
        let boundary = try #require(Multipart.boundary(fromContentType: contentType))
        let parts = try Multipart.parse(body, boundary: boundary)
        try #require(parts.count == 2)
        #expect(parts[0].contentType == "application/json")
        #expect(text(parts[0].body).hasPrefix(#"{"_id":"secret","#))
        #expect(text(parts[0].body).hasSuffix("}}}"))

        #expect(parts[1].headers.map(\.name) == ["Content-Disposition", "Content-Type", "Content-Length"])
        #expect(parts[1].header("content-disposition") == #"attachment; filename="recipe.txt""#)
        #expect(parts[1].filename == "recipe.txt")
        #expect(parts[1].contentType == "text/plain")
        #expect(parts[1].header("Content-Length") == "86")
        #expect(parts[1].body == crlf("1. Take R\n2. Take E\n3. Mix with L\n4. Add some A\n5. Serve with X\n"))
    }

    @Test func preambleAndEpilogueAreIgnored() throws {
        let body = crlf("""
            This is the preamble. It mentions --abc but not as a delimiter line.
            --abc
            Content-Type: text/plain

            hello
            --abc--
            This is the epilogue.
            --abc
            Content-Type: text/plain

            not a part
            """)
        let parts = try Multipart.parse(body, boundary: "abc")
        #expect(parts == [MultipartPart(contentType: "text/plain", body: bytes("hello"))])
    }

    @Test func preambleWithBinaryGarbage() throws {
        var body: [UInt8] = [0x00, 0xFF, 0x0D, 0x0A, 0x2D, 0x2D, 0x0D]
        body += crlf("\n--b\nX: y\n\nz\n--b--\n")
        #expect(try Multipart.parse(body, boundary: "b") == [MultipartPart(headers: [(name: "X", value: "y")], body: bytes("z"))])
    }

    @Test func lfOnlyLineEndings() throws {
        let body = bytes("--xyz\nContent-Type: application/json\n\n{\"a\":1}\n--xyz\nContent-Type: text/plain\n\nline1\nline2\n--xyz--\n")
        let parts = try Multipart.parse(body, boundary: "xyz")
        #expect(parts == [
            MultipartPart(contentType: "application/json", body: bytes(#"{"a":1}"#)),
            MultipartPart(contentType: "text/plain", body: bytes("line1\nline2")),
        ])
    }

    @Test func mixedLineEndings() throws {
        let body = bytes("--xyz\r\nA: 1\n\r\nbody one\n--xyz\nB: 2\r\n\nbody two\r\n--xyz--")
        let parts = try Multipart.parse(body, boundary: "xyz")
        #expect(parts == [
            MultipartPart(headers: [(name: "A", value: "1")], body: bytes("body one")),
            MultipartPart(headers: [(name: "B", value: "2")], body: bytes("body two")),
        ])
    }

    @Test func transportPaddingAfterDelimiters() throws {
        let body = bytes("--b \t\r\nA: 1\r\n\r\nx\r\n--b\t\r\n\r\ny\r\n--b--  \r\n")
        let parts = try Multipart.parse(body, boundary: "b")
        #expect(parts.map(\.body) == [bytes("x"), bytes("y")])
    }

    @Test func binaryBodiesWithCRLFAndBoundaryLikeBytes() throws {
        let boundary = "abc123"
        let tricky: [[UInt8]] = [
            bytes("\r\n--abc12"),                          // truncated boundary
            bytes("\r\n--abc123x\r\n"),                    // boundary followed by other bytes
            bytes("\r\n--abc123-\r\nmore"),                // single dash is not a close delimiter
            bytes("--abc123 x"),                           // at a line start, padding then junk
            bytes("x--abc123--"),                          // not at the start of a line
            bytes("\r\n-abc123\r\n"),                      // one dash only
            bytes("\r\r\n\n\r\n\r\n"),                     // line-break soup
            bytes("\r"),                                   // lone trailing CR
            [0x00, 0x0D, 0x0A, 0x2D, 0x2D, 0x61, 0x62, 0x63, 0xFF, 0xFE, 0x0A],
        ]
        let parts = tricky.enumerated().map { index, body in
            MultipartPart(headers: [(name: "Content-Type", value: "application/octet-stream"), (name: "X-Index", value: "\(index)")], body: body)
        }
        let written = Multipart.write(parts, boundary: boundary)
        let parsed = try Multipart.parse(written, boundary: boundary)
        #expect(parsed == parts)
    }

    @Test func lineStartingWithBoundaryButLongerIsBodyContent() throws {
        let body = crlf("--abc\n\n--abcdef\n--abc  x\n--abc--")
        let parts = try Multipart.parse(body, boundary: "abc")
        #expect(parts == [MultipartPart(headers: [], body: crlf("--abcdef\n--abc  x"))])
    }

    @Test func emptyParts() throws {
        // Empty header block and empty body, as written by `write`.
        #expect(try Multipart.parse(bytes("--b\r\n\r\n\r\n--b--"), boundary: "b") == [MultipartPart(body: [])])
        // A completely empty part (RFC 2046 allows omitting headers and body).
        #expect(try Multipart.parse(bytes("--b\r\n\r\n--b--"), boundary: "b") == [MultipartPart(body: [])])
        #expect(try Multipart.parse(bytes("--b\r\n--b--"), boundary: "b") == [MultipartPart(body: [])])
        // Headers but no body.
        #expect(
            try Multipart.parse(bytes("--b\r\nContent-Type: text/plain\r\n\r\n--b--"), boundary: "b")
                == [MultipartPart(contentType: "text/plain", body: [])])
        // No parts at all.
        #expect(try Multipart.parse(bytes("--b--"), boundary: "b").isEmpty)
        #expect(try Multipart.parse(bytes("preamble\r\n--b--\r\n"), boundary: "b").isEmpty)
    }

    @Test func headerParsing() throws {
        let body = crlf("""
            --b
            Content-Type:text/plain
            X-Spaces:    padded value\t
            X-Folded: first
              second
            \tthird
            X-Empty:
            X-Colon: a:b:c

            body
            --b--
            """)
        let part = try #require(try Multipart.parse(body, boundary: "b").first)
        #expect(part.headers.map(\.name) == ["Content-Type", "X-Spaces", "X-Folded", "X-Empty", "X-Colon"])
        #expect(part.contentType == "text/plain")
        #expect(part.header("x-spaces") == "padded value")
        #expect(part.header("X-Folded") == "first second third")
        #expect(part.header("X-Empty") == "")
        #expect(part.header("X-Colon") == "a:b:c")
        #expect(part.body == bytes("body"))
    }

    @Test func boundaryWithSpecialCharacters() throws {
        // RFC 2046 bchars include ' ( ) + _ , - . / : = ? and space (not last).
        let boundary = "'()+_,-./:=? x"
        let parts = [MultipartPart(contentType: "text/plain", body: bytes("a")), MultipartPart(contentType: nil, body: bytes("b"))]
        let written = Multipart.write(parts, boundary: boundary)
        #expect(try Multipart.parse(written, boundary: boundary) == parts)
        let contentType = Multipart.contentType(subtype: "mixed", boundary: boundary)
        #expect(Multipart.boundary(fromContentType: contentType) == boundary)
    }

    @Test func largeBinaryBodies() throws {
        let boundary = Multipart.makeBoundary()
        let parts = (0..<4).map { index in
            MultipartPart(
                headers: [(name: "Content-Type", value: "application/octet-stream")],
                body: pseudoRandomBytes(count: 1 << 20 + index * 7, seed: UInt64(index)))
        }
        let parsed = try Multipart.parse(Multipart.write(parts, boundary: boundary), boundary: boundary)
        #expect(parsed == parts)
    }
}

// MARK: - Malformed input

@Suite("Multipart.parse errors")
struct MultipartParseErrorTests {
    @Test func noOpeningDelimiter() {
        expectParseError(bytes(""), boundary: "b", mentioning: "no opening boundary")
        expectParseError(bytes("just some text\r\n"), boundary: "b", mentioning: "no opening boundary")
        expectParseError(bytes("--other\r\n\r\nx\r\n--other--"), boundary: "b", mentioning: "no opening boundary")
        expectParseError(bytes("--bb\r\n\r\nx\r\n--bb--"), boundary: "b", mentioning: "no opening boundary")
    }

    @Test func noClosingDelimiter() {
        expectParseError(bytes("--b\r\nA: 1\r\n\r\nbody"), boundary: "b", mentioning: "no closing boundary")
        expectParseError(bytes("--b\r\nA: 1\r\n\r\nbody\r\n"), boundary: "b", mentioning: "no closing boundary")
        expectParseError(bytes("--b\r\n\r\none\r\n--b\r\n\r\ntwo\r\n--b"), boundary: "b", mentioning: "after part 2")
        expectParseError(bytes("--b\r\n\r\none\r\n--b-"), boundary: "b", mentioning: "no closing boundary")
        expectParseError(bytes("--b\r\n\r\none\r\n--b\r"), boundary: "b", mentioning: "no closing boundary")
        // Truncated in the middle of the stream.
        let full = Multipart.write([MultipartPart(contentType: "text/plain", body: bytes("hello"))], boundary: "b")
        expectParseError(Array(full.dropLast(3)), boundary: "b", mentioning: "no closing boundary")
    }

    @Test func headersWithoutBlankLine() {
        expectParseError(
            bytes("--b\r\nContent-Type: text/plain\r\n--b--"), boundary: "b", mentioning: "not terminated by a blank line")
        expectParseError(
            bytes("--b\r\nContent-Type: text/plain\r\nhello\r\n--b--"), boundary: "b", mentioning: "not terminated by a blank line")
        expectParseError(
            bytes("--b\r\nContent-Type: text/plain\r\nhello\r\nworld\r\n--b--"), boundary: "b", mentioning: "malformed header line \"hello\"")
    }

    @Test func malformedHeaderLines() {
        expectParseError(bytes("--b\r\nno colon here\r\n\r\nx\r\n--b--"), boundary: "b", mentioning: "malformed header line \"no colon here\"")
        expectParseError(bytes("--b\r\n: empty name\r\n\r\nx\r\n--b--"), boundary: "b", mentioning: "malformed header line")
        expectParseError(bytes("--b\r\nBad Name: v\r\n\r\nx\r\n--b--"), boundary: "b", mentioning: "malformed header line")
        expectParseError(bytes("--b\r\n continuation: first\r\n\r\nx\r\n--b--"), boundary: "b", mentioning: "continuation")
        expectParseError(
            bytes("--b\r\n\r\nok\r\n--b\r\nbroken\r\n\r\nx\r\n--b--"), boundary: "b", mentioning: "part 2")
    }

    @Test func emptyBoundary() {
        expectParseError(bytes("--\r\n\r\nx\r\n----"), boundary: "", mentioning: "boundary must not be empty")
        // A boundary with a line break in it (found by the fuzzer: it parsed as one part and wrote back as two).
        expectParseError(bytes("--q\r\r\n\r\n.\r\n--q\r--"), boundary: "q\r", mentioning: "must not contain a line break")
    }
}

// MARK: - Writing

@Suite("Multipart.write")
struct MultipartWriteTests {
    @Test func exactBytes() {
        let parts = [
            MultipartPart(contentType: "application/json", body: bytes(#"{"_id":"a"}"#)),
            MultipartPart(headers: [(name: "Content-Disposition", value: #"attachment; filename="x.txt""#), (name: "Content-Type", value: "text/plain")], body: bytes("hi")),
        ]
        let expected = "--B\r\nContent-Type: application/json\r\n\r\n{\"_id\":\"a\"}\r\n"
            + "--B\r\nContent-Disposition: attachment; filename=\"x.txt\"\r\nContent-Type: text/plain\r\n\r\nhi\r\n"
            + "--B--"
        #expect(text(Multipart.write(parts, boundary: "B")) == expected)
        #expect(text(Multipart.write([], boundary: "B")) == "--B--")
    }

    /// Byte layout of CouchDB's `open_revs` multipart/mixed response (couch_httpd
    /// `send_docs_multipart`): `--B`, then per part `CRLF headers CRLF CRLF json CRLF --B`,
    /// then `--`; a missing revision is `application/json; error="true"` + `{"missing":rev}`.
    @Test func openRevsMultipartMixed() throws {
        let boundary = "4b1a3ae7a5b5f2b6ff25a4fb7e2f1c5d"
        let doc = bytes(#"{"_id":"doc","_rev":"1-967a00dff5e02add41819138abb3284d","value":1}"#)
        let missing = bytes(#"{"missing":"2-7051cbe5c8faecd085a3fa619e6e6337"}"#)
        let written = Multipart.write([.json(doc), .json(missing, isError: true)], boundary: boundary)
        let couchDB: [UInt8] = bytes("--\(boundary)")
            + bytes("\r\nContent-Type: application/json\r\n\r\n") + doc + bytes("\r\n--\(boundary)")
            + bytes("\r\nContent-Type: application/json; error=\"true\"\r\n\r\n") + missing + bytes("\r\n--\(boundary)")
            + bytes("--")
        #expect(written == couchDB)

        let parsed = try Multipart.parse(written, boundary: boundary)
        #expect(parsed.count == 2)
        #expect(parsed[0].body == doc)
        #expect(parsed[1].contentType.flatMap { Multipart.parameter(named: "error", in: $0) } == "true")
        #expect(parsed[1].body == missing)
    }

    @Test func roundTrip() throws {
        let boundary = Multipart.makeBoundary()
        let parts = [
            MultipartPart(contentType: "application/json", body: bytes(#"{"_id":"doc","_attachments":{"a.bin":{"follows":true}}}"#)),
            MultipartPart(
                headers: [
                    (name: "Content-Disposition", value: Multipart.contentDisposition(attachmentFilename: "a.bin")),
                    (name: "Content-Type", value: "application/octet-stream"),
                    (name: "Content-Length", value: "4096"),
                ],
                body: pseudoRandomBytes(count: 4096, seed: 42)),
            MultipartPart(headers: [], body: bytes("no headers")),
            MultipartPart(contentType: "text/plain", body: []),
            MultipartPart(contentType: "text/plain; charset=utf-8", body: bytes("ünïcödé\r\nline two\n")),
        ]
        let written = Multipart.write(parts, boundary: boundary)
        let contentType = Multipart.contentType(subtype: "related", boundary: boundary)
        let parsed = try Multipart.parse(written, boundary: try #require(Multipart.boundary(fromContentType: contentType)))
        #expect(parsed == parts)
        #expect(parsed[1].filename == "a.bin")
        // Header names survive with their original spelling.
        #expect(parsed[1].headers.map(\.name) == ["Content-Disposition", "Content-Type", "Content-Length"])
    }

    @Test func roundTripManyRandomBodies() throws {
        for seed in UInt64(0)..<50 {
            let boundary = "sep"  // short boundary: more chance of partial matches in random data
            var body = pseudoRandomBytes(count: Int(seed) * 37, seed: seed)
            // Sprinkle in delimiter prefixes that must not terminate the part.
            body.insert(contentsOf: bytes("\r\n--se"), at: body.count / 2)
            body.append(contentsOf: bytes("\r\n--sepx"))
            // Random bytes may contain the real delimiter by chance; skip those rare inputs.
            if text(body).contains("\n--sep\r\n") || text(body).contains("\n--sep--") || text(body).contains("\n--sep\n") { continue }
            let parts = [MultipartPart(contentType: "application/octet-stream", body: body), MultipartPart(body: body.reversed())]
            #expect(try Multipart.parse(Multipart.write(parts, boundary: boundary), boundary: boundary) == parts, "seed \(seed)")
        }
    }

    @Test func headerInjectionIsNeutralised() throws {
        let part = MultipartPart(headers: [(name: "X-Name", value: "evil\r\nContent-Type: text/html")], body: bytes("x"))
        let written = Multipart.write([part], boundary: "b")
        let parsed = try Multipart.parse(written, boundary: "b")
        #expect(parsed.count == 1)
        #expect(parsed[0].headers.count == 1)
        #expect(parsed[0].header("X-Name") == "evil  Content-Type: text/html")
        #expect(parsed[0].contentType == nil)
    }

    @Test func writeIntoAppends() {
        var output = bytes("prefix")
        Multipart.write([MultipartPart(body: bytes("x"))], boundary: "b", into: &output)
        #expect(text(output) == "prefix--b\r\n\r\nx\r\n--b--")
    }
}

@Suite("SegmentedMultipartBody")
struct SegmentedMultipartBodyTests {
    /// A payload standing for bytes read later: `fill` repeated `length` times.
    struct Filler: MultipartPayload {
        let fill: UInt8
        let length: Int
    }

    /// The body written out, payloads expanded.
    static func written(_ body: SegmentedMultipartBody<Filler>) -> [UInt8] {
        body.segments.flatMap { segment -> [UInt8] in
            switch segment {
            case .bytes(let b): b
            case .payload(let p): [UInt8](repeating: p.fill, count: p.length)
            }
        }
    }

    /// With payloads expanded, the body is byte for byte what `Multipart.write` writes for the same parts; each
    /// payload is a segment of its own and the length counts it.
    @Test func layoutIsMultipartWritesWithPayloadsInTheirPlace() {
        var body = SegmentedMultipartBody<Filler>(boundary: "B")
        body.appendPart(headers: [("Content-Type", "application/json")], .bytes(bytes(#"{"_id":"a"}"#)))
        body.appendPart(headers: [("Content-Type", "text/plain"), ("X-Evil", "a\r\nInjected: 1")],
                        .payload(Filler(fill: 0x61, length: 5)))
        body.appendPart(headers: [("Content-Type", "text/plain")], .bytes(bytes("hi")))
        #expect(!body.isInMemory)
        body.close()
        let expected = Multipart.write([
            MultipartPart(contentType: "application/json", body: bytes(#"{"_id":"a"}"#)),
            MultipartPart(headers: [(name: "Content-Type", value: "text/plain"), (name: "X-Evil", value: "a\r\nInjected: 1")],
                          body: bytes("aaaaa")),
            MultipartPart(headers: [(name: "Content-Type", value: "text/plain")], body: bytes("hi")),
        ], boundary: "B")
        #expect(Self.written(body) == expected)
        #expect(body.length == expected.count)
        #expect(body.segments.count == 3)
        #expect(!text(expected).contains("\r\nInjected"))
    }

    /// A body nested as a part (a revision's `multipart/related` inside `multipart/mixed`) keeps its payloads.
    @Test func aNestedBodyKeepsItsPayloads() {
        var inner = SegmentedMultipartBody<Filler>(boundary: "I")
        inner.appendPart(headers: [], .payload(Filler(fill: 0x7a, length: 3)))
        inner.close()
        var outer = SegmentedMultipartBody<Filler>(boundary: "O")
        outer.appendPart(headers: [("Content-Type", "multipart/related; boundary=\"I\"")], inner)
        outer.close()
        #expect(text(Self.written(outer)) == "--O\r\nContent-Type: multipart/related; boundary=\"I\"\r\n\r\n--I\r\n\r\nzzz\r\n--I--\r\n--O--")
        #expect(outer.length == Self.written(outer).count)

        var plain = SegmentedMultipartBody<Filler>(boundary: "P")
        plain.appendPart(headers: [], .bytes(bytes("x")))
        plain.close()
        #expect(plain.isInMemory && plain.segments.count == 1)
    }
}
