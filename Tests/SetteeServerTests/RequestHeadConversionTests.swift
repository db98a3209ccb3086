import HTTPTypes
import NIOHTTP1
import NIOHTTPTypesHTTP1
@testable import SetteeServer
import Testing

/// The connection's own conversion of a parsed request head to HTTP types (`HTTP1ConnectionHandler.httpRequest`)
/// gives what swift-nio-extras' `HTTPRequest(head, secure: false, splitCookie: true)` gives, for every target form.
@Suite struct RequestHeadConversionTests {
    @Test func requestHeadsConvertAsTheLibraryConvertsThem() throws {
        let cases: [(HTTPMethod, String, [(String, String)])] = [
            (.GET, "/db/doc?rev=1-abc&open_revs=%5B%5D", [("Host", "example.org:5984"), ("Accept", "application/json")]),
            (.GET, "/", []),
            (.PUT, "/db/a%2Fb", [("host", "lower"), ("Cookie", "AuthSession=abc; other=1"), ("Content-Length", "2")]),
            (.POST, "/db/_changes?feed=longpoll", [("HOST", "first"), ("Host", "second"), ("X-Custom", "v")]),
            (.HEAD, "//double/slash", [("Host", "h")]),
            (.RAW(value: "PURGE"), "/db/_purge", [("Host", "h")]),
            (.DELETE, "/db/doc?rev=2-x", [("Hostname", "not-the-host"), ("Host", "the-host")]),
            // Absolute form (a proxy's request line): left to the library's conversion.
            (.GET, "http://example.org:5984/db/doc?x=1", [("Host", "example.org:5984")]),
            (.GET, "http://example.org", []),
        ]
        for (method, uri, fields) in cases {
            let head = HTTPRequestHead(version: .http1_1, method: method, uri: uri, headers: HTTPHeaders(fields))
            let ours = try HTTP1ConnectionHandler.httpRequest(head)
            let library = try HTTPRequest(head, secure: false, splitCookie: true)
            #expect(ours == library, "\(method) \(uri)")
            #expect(ours.path == library.path && ours.authority == library.authority, "\(method) \(uri)")
        }
    }
}
