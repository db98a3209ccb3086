import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeCore

/// Building CouchDB-style responses.
enum Reply {
    /// `Server`: CouchDB's product token first, as the CouchDB version this node speaks (clients and CouchDB's own
    /// tests look for `^CouchDB`), then Settee's own.
    static let serverHeader = "CouchDB/3.5.0 (Settee/0.1.0)"

    /// A JSON response.
    static func json(_ status: HTTPResponse.Status = .ok, _ value: JSON, headers extra: HTTPFields = [:]) -> Response {
        var bytes = value.serializedBytes
        bytes.append(0x0a)
        return raw(status, bytes, headers: extra)
    }

    /// A response whose body is already-serialized JSON.
    static func raw(_ status: HTTPResponse.Status, _ bytes: [UInt8], contentType: String = "application/json",
                    headers extra: HTTPFields = [:]) -> Response {
        var headers = fields(extra)
        headers.add(.contentType, contentType)
        if !extra.contains(.cacheControl) { headers.append(HTTPField(name: .cacheControl, value: "must-revalidate")) }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// Like ``raw(_:_:contentType:headers:)``, with a newline after the body (CouchDB ends JSON bodies so),
    /// written straight into the response buffer.
    static func rawLine(_ status: HTTPResponse.Status, _ bytes: [UInt8], headers extra: HTTPFields = [:]) -> Response {
        var headers = fields(extra)
        headers.add(.contentType, "application/json")
        headers.add(.cacheControl, "must-revalidate")
        var buffer = ByteBuffer()
        buffer.reserveCapacity(bytes.count + 1)
        buffer.writeBytes(bytes)
        buffer.writeInteger(UInt8(ascii: "\n"))
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: buffer))
    }

    /// `extra` with room for the fields every response gets — content type, cache control, and on the way out
    /// content length, date and server — so that adding them doesn't regrow the field array three times.
    private static func fields(_ extra: HTTPFields) -> HTTPFields {
        var headers = HTTPFields()
        headers.reserveCapacity(extra.count + 5)
        headers.append(contentsOf: extra)
        return headers
    }

    static func ok(_ status: HTTPResponse.Status = .ok) -> Response { json(status, ["ok": true]) }

    static func error(_ e: CouchError) -> Response {
        json(e.status, ["error": .string(e.error), "reason": .string(e.reason)])
    }
}

extension JSON {
    /// Writes a JSON string literal.
    static func appendString(_ s: String, to out: inout [UInt8]) {
        JSON.string(s).serialize(into: &out)
    }
}

/// Splices `_id`, `_rev` (when there is one) and `_deleted` into a stored body without parsing it: the fast path for
/// reads, and the documents design functions are given.
enum DocumentBytes {
    static func splice(id: String, rev: String?, deleted: Bool, body: [UInt8], into out: inout [UInt8],
                       revisions: (start: Int, ids: [RevID])? = nil) {
        out.append(contentsOf: #"{"_id":"#.utf8)
        JSON.appendString(id, to: &out)
        if let rev {
            out.append(contentsOf: #","_rev":"#.utf8)
            JSON.appendString(rev, to: &out)
        }
        if deleted { out.append(contentsOf: #","_deleted":true"#.utf8) }
        if let revisions {
            out.append(contentsOf: #","_revisions":{"start":"#.utf8)
            out.append(contentsOf: String(revisions.start).utf8)
            out.append(contentsOf: #","ids":["#.utf8)
            for (i, r) in revisions.ids.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.appendString(r.digest, to: &out)
            }
            out.append(contentsOf: "]}".utf8)
        }
        // body is `{…}`: drop its opening brace; an empty object contributes only the closing one.
        var i = 1
        while i < body.count, body[i] == 0x20 || body[i] == 0x0a || body[i] == 0x0d || body[i] == 0x09 { i += 1 }
        if i < body.count, body[i] != UInt8(ascii: "}") { out.append(UInt8(ascii: ",")) }
        if i < body.count { out.append(contentsOf: body[i...]) } else { out.append(UInt8(ascii: "}")) }
    }

    static func splice(id: String, rev: String, deleted: Bool, body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(body.count + id.utf8.count + 64)
        splice(id: id, rev: rev, deleted: deleted, body: body, into: &out)
        return out
    }
}
