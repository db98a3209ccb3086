import Crypto
import Foundation
import SetteeBLIP
import SetteeCore
import SetteeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `_blipsync` on the wire, driven by a small WebSocket client over a blocking socket and Settee's own
/// ``BLIPConnection`` as the client's BLIP: what Couchbase Lite's tool can't show (a continuous feed delivering a
/// write made while connected) and input no real client sends (garbage frames, text messages).
@Suite(.serialized) struct BLIPWireTests {
    /// A blocking WebSocket client (RFC 6455 framing, client frames masked).
    final class WebSocketClient {
        let fd: Int32
        var buffer: [UInt8] = []

        init(port: Int, path: String, protocols: String = "BLIP_3+CBMobile_3,BLIP_3+CBMobile_2",
             auth: String = "admin:secret") throws {
            fd = try Self.connect(port: port)
            let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Basic \(Base64.encode(Array(auth.utf8)))\r\n"
                + "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: \(protocols)\r\n\r\n"
            try send(Array(request.utf8))
        }

        deinit { close(fd) }

        static func connect(port: Int) throws -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var timeout = timeval(tv_sec: 20, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard result == 0 else { throw ServerProcessError(message: "connect failed: \(errno)") }
            return fd
        }

        func send(_ bytes: [UInt8]) throws {
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { throw ServerProcessError(message: "send failed: \(errno)") }
                sent += n
            }
        }

        /// At least `count` buffered bytes, reading as needed; nil at end of stream.
        func fill(_ count: Int) -> Bool {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while buffer.count < count {
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard n > 0 else { return false }
                buffer += chunk[0..<n]
            }
            return true
        }

        /// The response head to the upgrade request.
        func readHead() -> String {
            while true {
                if let end = String(decoding: buffer, as: UTF8.self).range(of: "\r\n\r\n") {
                    let text = String(decoding: buffer, as: UTF8.self)
                    let head = String(text[..<end.upperBound])
                    buffer.removeFirst(head.utf8.count)
                    return head
                }
                guard fill(buffer.count + 1) else { return String(decoding: buffer, as: UTF8.self) }
            }
        }

        /// Sends one masked frame.
        func sendFrame(_ payload: [UInt8], opcode: UInt8 = 2) throws {
            var frame: [UInt8] = [0x80 | opcode]
            if payload.count < 126 {
                frame.append(0x80 | UInt8(payload.count))
            } else if payload.count < 65536 {
                frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
            } else {
                frame.append(0x80 | 127)
                frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
            }
            let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
            frame += mask
            frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
            try send(frame)
        }

        /// The next frame from the server: its opcode and payload; nil when the connection ended.
        func readFrame() -> (opcode: UInt8, payload: [UInt8])? {
            guard fill(2) else { return nil }
            let opcode = buffer[0] & 0x0F
            var length = Int(buffer[1] & 0x7F), header = 2
            if length == 126 {
                guard fill(4) else { return nil }
                length = Int(buffer[2]) << 8 | Int(buffer[3]); header = 4
            } else if length == 127 {
                guard fill(10) else { return nil }
                length = buffer[2..<10].reduce(0) { $0 << 8 | Int($1) }; header = 10
            }
            guard fill(header + length) else { return nil }
            let payload = Array(buffer[header..<(header + length)])
            buffer.removeFirst(header + length)
            return (opcode, payload)
        }
    }

    /// A BLIP client over the WebSocket client.
    final class BLIPClient {
        let socket: WebSocketClient
        var blip = BLIPConnection()

        init(_ socket: WebSocketClient) { self.socket = socket }

        func send(_ message: BLIPMessage) throws {
            blip.send(message)
            try flush()
        }

        func flush() throws {
            while let frame = blip.nextFrame() { try socket.sendFrame(frame) }
        }

        /// The next complete message from the server (requests and replies alike).
        func next() throws -> BLIPMessage? {
            while let (opcode, payload) = socket.readFrame() {
                guard opcode == 2 else { return nil }
                if let message = try blip.receive(payload) {
                    try flush()
                    return message
                }
                try flush()
            }
            return nil
        }
    }

    static func http(_ port: Int, _ method: String, _ path: String, _ body: String = "") throws -> String {
        let socket = WebSocketClient.self
        let fd = try socket.connect(port: port)
        defer { close(fd) }
        let request = "\(method) \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(Base64.encode(Array("admin:secret".utf8)))\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        _ = Array(request.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var out: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            out += chunk[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    @Test func continuousFeedDeliversAWriteMadeWhileConnected() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let port = server.port
        try await offThePool {
            #expect(try Self.http(port, "PUT", "/live").hasPrefix("HTTP/1.1 201"))
            #expect(try Self.http(port, "PUT", "/live/before", #"{"n":1}"#).hasPrefix("HTTP/1.1 201"))
            let socket = try WebSocketClient(port: port, path: "/live/_blipsync")
            let head = socket.readHead()
            #expect(head.hasPrefix("HTTP/1.1 101"))
            #expect(head.contains("Sec-WebSocket-Protocol: BLIP_3+CBMobile_3"))
            #expect(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
            let client = BLIPClient(socket)
            try client.send(.request(profile: "subChanges", properties: ["continuous": "true"]))
            #expect(try client.next()?.type == .response)
            // The existing document, then the caught-up marker.
            let first = try #require(try client.next())
            #expect(first.profile == "changes")
            #expect(try first.jsonBody()?[0]?[1]?.stringValue == "before")
            client.blip.send(.response(to: first.number, body: Array("[[]]".utf8)))
            try client.flush()
            let rev = try #require(try client.next())
            #expect(rev.profile == "rev" && rev.properties["id"] == "before")
            #expect(try rev.jsonBody() == ["n": 1])
            client.blip.send(.response(to: rev.number))
            try client.flush()
            let caughtUp = try #require(try client.next())
            #expect(caughtUp.profile == "changes" && caughtUp.body == Array("[]".utf8))
            client.blip.send(.response(to: caughtUp.number))
            try client.flush()
            // A write made now arrives on the open connection.
            #expect(try Self.http(port, "PUT", "/live/after", #"{"n":2}"#).hasPrefix("HTTP/1.1 201"))
            let live = try #require(try client.next())
            #expect(live.profile == "changes")
            #expect(try live.jsonBody()?[0]?[1]?.stringValue == "after")
        }
    }

    @Test func aClientThatStopsReadingStallsOnlyItsOwnConnection() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let port = server.port
        try await offThePool {
            #expect(try Self.http(port, "PUT", "/big").hasPrefix("HTTP/1.1 201"))
            // 300 documents of ~20 KB: far more than the socket buffers hold.
            let filler = String(repeating: "x", count: 20_000)
            for start in stride(from: 0, to: 300, by: 50) {
                let docs = (start..<(start + 50)).map { #"{"_id":"d\#(String(format: "%03d", $0))","filler":"\#(filler)\#($0)"}"# }
                #expect(try Self.http(port, "POST", "/big/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#).hasPrefix("HTTP/1.1 201"))
            }
            let stalled = try WebSocketClient(port: port, path: "/big/_blipsync")
            #expect(stalled.readHead().hasPrefix("HTTP/1.1 101"))
            let client = BLIPClient(stalled)
            try client.send(.request(profile: "subChanges", properties: ["batch": "300"]))
            #expect(try client.next()?.type == .response)
            let changes = try #require(try client.next())
            let count = try #require(try changes.jsonBody()?.arrayValue?.count)
            #expect(count == 300)
            // It asks for every revision, then never reads again.
            client.blip.send(.response(to: changes.number, body: JSON.array(Array(repeating: .array([]), count: count)).serializedBytes))
            try client.flush()
            usleep(500_000)

            // The node serves everyone else meanwhile: HTTP, and another BLIP connection.
            let clock = ContinuousClock()
            let start = clock.now
            #expect(try Self.http(port, "GET", "/big").contains(#""doc_count":300"#))
            #expect(try Self.http(port, "PUT", "/big/later", #"{"n":1}"#).hasPrefix("HTTP/1.1 201"))
            let other = try WebSocketClient(port: port, path: "/big/_blipsync")
            #expect(other.readHead().hasPrefix("HTTP/1.1 101"))
            let second = BLIPClient(other)
            try second.send(.request(profile: "getCheckpoint", properties: ["client": "someone"]))
            #expect(try second.next()?.errorInfo?.code == 404)
            #expect(clock.now - start < .seconds(10))
            // The stalled client goes away; the node and its data are as they were.
            shutdown(stalled.fd, Int32(SHUT_RDWR))
            #expect(try Self.http(port, "GET", "/big").contains(#""doc_count":301"#))
        }
    }

    @Test func garbageFramesCloseTheConnectionAndTheNodeGoesOn() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let port = server.port
        try await offThePool {
            #expect(try Self.http(port, "PUT", "/g").hasPrefix("HTTP/1.1 201"))
            for garbage: (payload: [UInt8], opcode: UInt8) in [([1, 0, 0xDE, 0xAD, 0xBE, 0xEF, 0], 2),   // bad checksum
                                                              ([0x80], 2),                              // cut-off varint
                                                              ([5, 0, 0, 0, 0, 0, 0], 2),               // out-of-order request
                                                              (Array("hello".utf8), 1)] {               // a text message
                let socket = try WebSocketClient(port: port, path: "/g/_blipsync")
                #expect(socket.readHead().hasPrefix("HTTP/1.1 101"))
                try socket.sendFrame(garbage.payload, opcode: garbage.opcode)
                var closed = false
                while let frame = socket.readFrame() { if frame.opcode == 8 { closed = true; break } }
                #expect(closed, "no close frame after \(garbage.payload)")
            }
            // Unknown sub-protocols and plain GETs are refused with 400; the node still serves.
            let refused = try WebSocketClient(port: port, path: "/g/_blipsync", protocols: "BLIP_2")
            #expect(refused.readHead().hasPrefix("HTTP/1.1 400"))
            #expect(try Self.http(port, "GET", "/g/_blipsync").hasPrefix("HTTP/1.1 400"))
            #expect(try Self.http(port, "PUT", "/g/still", #"{"ok":1}"#).hasPrefix("HTTP/1.1 201"))
            #expect(try Self.http(port, "GET", "/g").contains(#""doc_count":1"#))
        }
    }

    @Test func wrongPasswordIsRefusedBeforeTheUpgrade() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let port = server.port
        try await offThePool {
            #expect(try Self.http(port, "PUT", "/p").hasPrefix("HTTP/1.1 201"))
            let socket = try WebSocketClient(port: port, path: "/p/_blipsync", auth: "admin:wrong")
            #expect(socket.readHead().hasPrefix("HTTP/1.1 401"))
        }
    }

    @Test func checkpointsAndProposalsAnswerAsSyncGatewayDoes() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let port = server.port
        try await offThePool {
            #expect(try Self.http(port, "PUT", "/sg").hasPrefix("HTTP/1.1 201"))
            let created = try Self.http(port, "PUT", "/sg/here", #"{"n":1}"#)
            let rev = try #require(created.range(of: #""rev":"[^"]+""#, options: .regularExpression).map { String(created[$0].dropFirst(7).dropLast()) })
            let socket = try WebSocketClient(port: port, path: "/sg/_blipsync")
            #expect(socket.readHead().hasPrefix("HTTP/1.1 101"))
            let client = BLIPClient(socket)
            func ask(_ message: BLIPMessage) throws -> BLIPMessage {
                try client.send(message)
                return try #require(try client.next())
            }
            // Checkpoints: missing is HTTP 404; saved with an empty rev; a stale rev is 409.
            #expect(try ask(.request(profile: "getCheckpoint", properties: ["client": "cp-1"])).errorInfo?.code == 404)
            let saved = try ask(.request(profile: "setCheckpoint", properties: ["client": "cp-1", "rev": ""],
                                         body: Array(#"{"remote":7}"#.utf8)))
            let checkpointRev = try #require(saved.properties["rev"])
            let got = try ask(.request(profile: "getCheckpoint", properties: ["client": "cp-1"]))
            let body = try got.jsonBody()
            #expect(got.properties["rev"] == checkpointRev && body == ["remote": 7])
            let stale = try ask(.request(profile: "setCheckpoint", properties: ["client": "cp-1", "rev": "0-99"],
                                         body: Array("{}".utf8)))
            #expect(stale.errorInfo?.domain == "HTTP" && stale.errorInfo?.code == 409)
            // proposeChanges: new (0), already here (304), built on the current revision (0), a conflict (409).
            let proposals = #"[["new","1-aaaa"],["here","\#(rev)"],["here","2-bbbb","\#(rev)"],["here","2-cccc","1-ffff"]]"#
            let answer = try ask(.request(profile: "proposeChanges", body: Array(proposals.utf8)))
            #expect(try answer.jsonBody() == [0, 304, 0, 409])
            // A rev over the current one is written; the same rev with noconflicts over a stale parent is 409.
            let written = try ask(.request(profile: "rev", properties: ["id": "here", "rev": "2-bbbb", "history": rev],
                                           body: Array(#"{"n":2}"#.utf8)))
            #expect(written.type == .response)
            let refused = try ask(.request(profile: "rev", properties: ["id": "here", "rev": "2-cccc", "history": "1-ffff",
                                                                         "noconflicts": "true"], body: Array(#"{"n":3}"#.utf8)))
            #expect(refused.errorInfo?.code == 409)
            // `changes` from a pushing client: the known ancestors of what is missing, 0 for what is here.
            let offered = try ask(.request(profile: "changes", body: Array(#"[[1,"here","3-dddd"],[2,"here","2-bbbb"]]"#.utf8)))
            #expect(try offered.jsonBody() == [["2-bbbb"]])
            #expect(offered.properties["maxHistory"] == "1000")
            // getCollections: the served collection's checkpoint, null for others; then `collection` indexes are checked.
            let listed = try ask(.request(profile: "getCollections", body: Array(
                #"{"collections":["_default._default","inventory.items"],"checkpoint_ids":["cp-1","cp-2"]}"#.utf8)))
            let checkpoints = try listed.jsonBody()
            #expect(checkpoints?[0]?["remote"] == 7 && checkpoints?[0]?["_rev"]?.stringValue == checkpointRev)
            #expect(checkpoints?[1] == .null)
            let other = try ask(.request(profile: "getCheckpoint", properties: ["client": "cp-2", "collection": "1"]))
            #expect(other.errorInfo?.code == 404 && other.errorInfo?.message.contains("collection") == true)
            // Unknown profiles are BLIP 404.
            let unknown = try ask(.request(profile: "frobnicate"))
            #expect(unknown.errorInfo?.domain == "BLIP" && unknown.errorInfo?.code == 404)
            #expect(try Self.http(port, "GET", "/sg/here").contains(#""_rev":"2-bbbb""#))
        }
    }

    @Test func oneShotFeedHonoursDocIDsAndActiveOnly() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let port = server.port
        try await offThePool {
            #expect(try Self.http(port, "PUT", "/f").hasPrefix("HTTP/1.1 201"))
            for id in ["a", "b", "c"] { #expect(try Self.http(port, "PUT", "/f/\(id)", #"{"x":1}"#).hasPrefix("HTTP/1.1 201")) }
            let gone = try Self.http(port, "GET", "/f/c")
            let rev = gone.range(of: #"1-[0-9a-f]+"#, options: .regularExpression).map { String(gone[$0]) } ?? ""
            #expect(try Self.http(port, "DELETE", "/f/c?rev=\(rev)").hasPrefix("HTTP/1.1 200"))
            /// The ids of the first `changes` a subChanges produces (answering it with "want none"), and the next one.
            func feed(_ properties: BLIPProperties, body: String = "") throws -> (ids: [String], then: [UInt8]) {
                let socket = try WebSocketClient(port: port, path: "/f/_blipsync")
                #expect(socket.readHead().hasPrefix("HTTP/1.1 101"))
                let client = BLIPClient(socket)
                try client.send(.request(profile: "subChanges", properties: properties, body: Array(body.utf8)))
                #expect(try client.next()?.type == .response)
                let changes = try #require(try client.next())
                let ids = try changes.jsonBody()?.arrayValue?.compactMap { $0[1]?.stringValue } ?? []
                client.blip.send(.response(to: changes.number, body: Array("[]".utf8)))
                try client.flush()
                let next = try #require(try client.next())
                return (ids, next.body)
            }
            let all = try feed([:])
            #expect(all.ids == ["a", "b", "c"] && all.then == Array("[]".utf8))
            #expect(try feed(["activeOnly": "true"]).ids == ["a", "b"])
            #expect(try feed([:], body: #"{"docIDs":["b","c"]}"#).ids == ["b", "c"])
            #expect(try feed(["since": "2"]).ids == ["c"])
        }
    }

    // MARK: Attachments and blobs

    /// Couchbase Lite's name for bytes: `sha1-` + base64 of their SHA-1.
    static func sha1(_ bytes: [UInt8]) -> String { "sha1-" + Base64.encode(Array(Insecure.SHA1.hash(data: bytes))) }
    /// CouchDB's digest of bytes stored as they are.
    static func md5(_ bytes: [UInt8]) -> String { "md5-" + Base64.encode(Array(Insecure.MD5.hash(data: bytes))) }
    /// The proof `proveAttachment` asks for: SHA-1 of the nonce's length, the nonce and the bytes.
    static func proof(_ nonce: [UInt8], _ bytes: [UInt8]) -> [UInt8] {
        Array(("sha1-" + Base64.encode(Array(Insecure.SHA1.hash(data: [UInt8(nonce.count)] + nonce + bytes)))).utf8)
    }

    /// The body of an HTTP response (after the head).
    static func body(_ response: String) -> String {
        response.range(of: "\r\n\r\n").map { String(response[$0.upperBound...]) } ?? ""
    }

    /// `getAttachment` and `proveAttachment` answer for attachments of documents the connection may read: of the
    /// document named (`docID`), or of a revision being sent while its `rev` is unanswered; everything else is 404.
    /// Pulled revisions carry their attachments and blobs under SHA-1 names.
    @Test func attachmentsAreServedByTheirSHA1Names() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let port = server.port
        try await offThePool {
            let photo = Array("a photo's bytes, pretend they are a PNG".utf8), other = Array("another document's".utf8)
            #expect(try Self.http(port, "PUT", "/att").hasPrefix("HTTP/1.1 201"))
            // A blob as the Swift API stores it: CouchDB's digest in the body and in its `blob_/…` stub.
            let doc = #"{"photo":{"@type":"blob","content_type":"image/png","digest":"\#(Self.md5(photo))","length":\#(photo.count)},"#
                + #""_attachments":{"blob_/photo":{"content_type":"image/png","data":"\#(Base64.encode(photo))"}}}"#
            #expect(try Self.http(port, "PUT", "/att/doc", doc).hasPrefix("HTTP/1.1 201"))
            #expect(try Self.http(port, "PUT", "/att/other",
                                  #"{"_attachments":{"o.txt":{"content_type":"text/plain","data":"\#(Base64.encode(other))"}}}"#).hasPrefix("HTTP/1.1 201"))
            let socket = try WebSocketClient(port: port, path: "/att/_blipsync")
            #expect(socket.readHead().hasPrefix("HTTP/1.1 101"))
            let client = BLIPClient(socket)
            func ask(_ message: BLIPMessage) throws -> BLIPMessage {
                try client.send(message)
                return try #require(try client.next())
            }
            func get(_ digest: String, docID: String?) throws -> BLIPMessage {
                var properties: BLIPProperties = ["digest": digest]
                if let docID { properties["docID"] = docID }
                return try ask(.request(profile: "getAttachment", properties: properties))
            }
            // By document: its attachments only.
            #expect(try get(Self.sha1(photo), docID: "doc").body == photo)
            #expect(try get(Self.sha1(other), docID: "doc").errorInfo?.code == 404)
            #expect(try get(Self.sha1(Array("nothing".utf8)), docID: "doc").errorInfo?.code == 404)
            #expect(try get(Self.sha1(photo), docID: "missing").errorInfo?.code == 404)
            #expect(try get(Self.sha1(photo), docID: nil).errorInfo?.code == 404)
            #expect(try ask(.request(profile: "getAttachment")).errorInfo?.code == 400)
            // proveAttachment: the proof of a nonce, or 400 without one.
            let nonce: [UInt8] = Array(0..<20)
            let proved = try ask(.request(profile: "proveAttachment", properties: ["digest": Self.sha1(photo), "docID": "doc"], body: nonce))
            #expect(proved.body == Self.proof(nonce, photo))
            #expect(try ask(.request(profile: "proveAttachment", properties: ["digest": Self.sha1(photo), "docID": "doc"])).errorInfo?.code == 400)

            // Pulled: the rev names the attachment and the blob by SHA-1; while it is unanswered, a 2.x-style
            // getAttachment (no docID) is served, and not after.
            try client.send(.request(profile: "subChanges"))
            #expect(try client.next()?.type == .response)
            let changes = try #require(try client.next())
            #expect(try changes.jsonBody()?.arrayValue?.count == 2)
            client.blip.send(.response(to: changes.number, body: Array("[[],0]".utf8)))
            try client.flush()
            let rev = try #require(try client.next())
            #expect(rev.profile == "rev" && rev.properties["id"] == "doc")
            let body = try #require(try rev.jsonBody())
            #expect(body["photo"]?["digest"]?.stringValue == Self.sha1(photo))
            #expect(body["_attachments"]?["blob_/photo"] == ["content_type": "image/png", "digest": .string(Self.sha1(photo)),
                                                             "length": .int(Int64(photo.count)), "revpos": 1, "stub": true])
            #expect(try get(Self.sha1(photo), docID: nil).body == photo)
            client.blip.send(.response(to: rev.number))
            try client.flush()
            #expect(try client.next()?.body == Array("[]".utf8))  // caught up
            #expect(try get(Self.sha1(photo), docID: nil).errorInfo?.code == 404)
        }
    }

    /// A pushed revision's attachments: a new body is fetched with `getAttachment` and checked; a body the server
    /// has under another document is proved with `proveAttachment`; wrong bytes, a wrong proof, a body the client
    /// can't supply, an unknown CouchDB digest and an oversized claim each fail that revision alone, before
    /// anything of it is stored, and the connection goes on.
    @Test func pushedAttachmentsAreFetchedProvedAndChecked() async throws {
        let dir = TempDir()
        let server = try ServerProcess(dataDirectory: dir.path)
        defer { server.stop() }
        let port = server.port
        try await offThePool {
            #expect(try Self.http(port, "PUT", "/push").hasPrefix("HTTP/1.1 201"))
            let socket = try WebSocketClient(port: port, path: "/push/_blipsync")
            #expect(socket.readHead().hasPrefix("HTTP/1.1 101"))
            let client = BLIPClient(socket)
            /// A rev as Couchbase Lite pushes a blob: the blob in the body and its legacy `blob_/…` stub.
            func rev(_ id: String, _ bytes: [UInt8], length: Int? = nil, type: String = "image/png") throws {
                let digest = Self.sha1(bytes), count = length ?? bytes.count
                let body = #"{"pic":{"content_type":"\#(type)","digest":"\#(digest)","length":\#(count),"@type":"blob"},"#
                    + #""_attachments":{"blob_/pic":{"content_type":"\#(type)","digest":"\#(digest)","length":\#(count),"stub":true,"revpos":1}}}"#
                client.blip.send(.request(profile: "rev", properties: ["id": id, "rev": "1-\(String(repeating: "ab", count: 20))",
                                                                        "sequence": "1", "noconflicts": "true"], body: Array(body.utf8)))
                try client.flush()
            }
            let bytes = Array("the blob's bytes".utf8)

            // New: fetched, checked, stored as the attachment blob_/pic.
            try rev("a", bytes)
            let fetch = try #require(try client.next())
            #expect(fetch.profile == "getAttachment" && fetch.properties["digest"] == Self.sha1(bytes))
            #expect(fetch.properties["docID"] == "a" && fetch.properties["compress"] == nil)
            client.blip.send(.response(to: fetch.number, body: bytes))
            try client.flush()
            #expect(try client.next()?.type == .response)
            #expect(Self.body(try Self.http(port, "GET", "/push/a/blob_%2Fpic")) == "the blob's bytes")
            #expect(try Self.http(port, "GET", "/push/a").contains(#""digest":"\#(Self.md5(bytes))""#))

            // Held under another document: the client proves it has the bytes; a wrong proof is 403.
            for (proof, expected) in [(Array("sha1-wrong".utf8), 403), (nil, 0)] {
                try rev("b", bytes)
                let prove = try #require(try client.next())
                #expect(prove.profile == "proveAttachment" && prove.properties["digest"] == Self.sha1(bytes))
                #expect(prove.body.count == 20)
                client.blip.send(.response(to: prove.number, body: proof ?? Self.proof(prove.body, bytes)))
                try client.flush()
                let answer = try #require(try client.next())
                #expect((answer.errorInfo?.code ?? 0) == expected)
                #expect(try Self.http(port, "GET", "/push/b").hasPrefix(expected == 0 ? "HTTP/1.1 200" : "HTTP/1.1 404"))
            }

            // Wrong bytes (400) and no bytes (412): the revision fails, nothing is stored.
            for (id, reply, expected) in [("c", BLIPMessage.response(to: 0, body: Array("other bytes!".utf8)), 400),
                                          ("d", BLIPMessage.error(to: 0, domain: .http, code: 404, message: "no blob"), 412)] {
                try rev(id, Array("\(id)'s own bytes".utf8))
                let fetch = try #require(try client.next())
                #expect(fetch.profile == "getAttachment")
                var answer = reply
                answer.number = fetch.number
                client.blip.send(answer)
                try client.flush()
                #expect(try client.next()?.errorInfo?.code == expected, "\(id)")
                #expect(try Self.http(port, "GET", "/push/\(id)").hasPrefix("HTTP/1.1 404"))
            }
            // Over the size limit: 413 before anything is asked.
            try rev("e", Array("big".utf8), length: 1 << 30)
            #expect(try client.next()?.errorInfo?.code == 413)
            // A CouchDB digest the server lacks can't be asked for: 412 at once.
            let unknown = #"{"_attachments":{"x.txt":{"content_type":"text/plain","digest":"md5-AAAAAAAAAAAAAAAAAAAAAA==","length":3,"stub":true}}}"#
            client.blip.send(.request(profile: "rev", properties: ["id": "f", "rev": "1-ffff"], body: Array(unknown.utf8)))
            try client.flush()
            #expect(try client.next()?.errorInfo?.code == 412)
            // The connection goes on.
            client.blip.send(.request(profile: "getCheckpoint", properties: ["client": "x"]))
            try client.flush()
            #expect(try client.next()?.errorInfo?.code == 404)
            #expect(try Self.http(port, "GET", "/push").contains(#""doc_count":2"#))
        }
    }
}
