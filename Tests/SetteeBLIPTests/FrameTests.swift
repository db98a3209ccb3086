import SetteeCore
import Testing
@testable import SetteeBLIP

/// Two connected ends, passing every frame from one to the other.
struct Pair {
    var client = BLIPConnection()
    var server = BLIPConnection()

    /// Moves frames both ways until neither has any; returns what each side received.
    mutating func pump() throws -> (atClient: [BLIPMessage], atServer: [BLIPMessage]) {
        var atClient: [BLIPMessage] = [], atServer: [BLIPMessage] = []
        var moved = true
        while moved {
            moved = false
            while let frame = client.nextFrame() {
                moved = true
                if let message = try server.receive(frame) { atServer.append(message) }
            }
            while let frame = server.nextFrame() {
                moved = true
                if let message = try client.receive(frame) { atClient.append(message) }
            }
        }
        return (atClient, atServer)
    }
}

@Suite struct VarintTests {
    @Test func roundTripsBoundaries() throws {
        for value: UInt64 in [0, 1, 127, 128, 300, 16383, 16384, UInt64(UInt32.max), UInt64.max] {
            let bytes = Varint.encode(value)
            var index = 0
            #expect(try Varint.read(bytes[...], at: &index) == value)
            #expect(index == bytes.count)
        }
        #expect(Varint.encode(300) == [0xAC, 0x02])
    }

    @Test func cutOffVarintIsMalformed() {
        var index = 0
        #expect(throws: BLIPError(.malformedFrame, "frame ends inside a varint")) { try Varint.read([0x80, 0x80][...], at: &index) }
        var long = 0
        #expect(throws: BLIPError.self) { try Varint.read([UInt8](repeating: 0xFF, count: 11)[...], at: &long) }
    }
}

@Suite struct PropertiesTests {
    @Test func encodeAndDecodeInOrder() throws {
        let properties: BLIPProperties = ["Profile": "rev", "id": "doc-1", "history": "2-b,1-a"]
        var bytes: [UInt8] = []
        properties.write(into: &bytes)
        let (decoded, end) = try BLIPProperties.read(bytes[...])
        #expect(decoded == properties)
        #expect(end == bytes.count)
        #expect(decoded.pairs.map(\.key) == ["Profile", "id", "history"])
    }

    @Test func emptyPropertiesStillWriteTheirLength() throws {
        var bytes: [UInt8] = []
        BLIPProperties().write(into: &bytes)
        #expect(bytes == [0])
    }

    @Test func rejectsMalformedProperties() {
        for bad: [UInt8] in [[5, 0x61, 0], [2, 0x61, 0x62], [2, 0x61, 0], [4, 0xFF, 0, 0x61, 0], []] {
            #expect(throws: BLIPError.self) { try BLIPProperties.read(bad[...]) }
        }
    }

    @Test func readsNonASCIIPropertiesAndStartsTheBodyAfterThem() throws {
        var bytes: [UInt8] = [0xAA]  // read from a slice that does not start at 0
        BLIPProperties(dictionaryLiteral: ("id", "café-☕"), ("rev", "1-a")).write(into: &bytes)
        bytes += Array("{}".utf8)
        let (properties, bodyStart) = try BLIPProperties.read(bytes[1...])
        #expect(properties["id"] == "café-☕")
        #expect(properties["rev"] == "1-a")
        #expect(Array(bytes[bodyStart...]) == Array("{}".utf8))
        // An overlong encoding is not UTF-8.
        #expect(throws: BLIPError.self) { try BLIPProperties.read([6, 0x61, 0, 0xC0, 0x80, 0x62, 0][...]) }
    }
}

@Suite struct ConnectionTests {
    @Test func requestAndResponseRoundTrip() throws {
        var pair = Pair()
        let number = pair.client.send(.request(profile: "getCheckpoint", properties: ["client": "cp-1"]))
        #expect(number == 1)
        let (_, atServer) = try pair.pump()
        let request = try #require(atServer.first)
        #expect(request.type == .request && request.number == 1)
        #expect(request.profile == "getCheckpoint" && request.properties["client"] == "cp-1")
        pair.server.send(.response(to: 1, properties: ["rev": "1-a"], body: Array(#"{"local":7}"#.utf8)))
        let (atClient, _) = try pair.pump()
        let reply = try #require(atClient.first)
        #expect(reply.type == .response && reply.properties["rev"] == "1-a")
        #expect(try reply.jsonBody() == ["local": 7])
        #expect(pair.client.pendingReplies == 0)
    }

    @Test func errorResponsesCarryDomainCodeAndMessage() throws {
        var pair = Pair()
        pair.client.send(.request(profile: "getCheckpoint"))
        _ = try pair.pump()
        pair.server.send(.error(to: 1, domain: .http, code: 404, message: "missing"))
        let replies = try pair.pump().atClient
        let reply = try #require(replies.first)
        let info = try #require(reply.errorInfo)
        #expect(info.domain == "HTTP" && info.code == 404 && info.message == "missing")
    }

    @Test func largeCompressedMessagesSpanFramesAndAreAcknowledged() throws {
        var pair = Pair()
        // 600 KB of compressible JSON-ish text, then incompressible bytes: many frames, ACKs along the way.
        var body = Array(String(repeating: #"{"name":"doc","n":12345},"#, count: 24_000).utf8)
        var generator = SeededGenerator(seed: 7)
        body += (0..<200_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        pair.client.send(.request(profile: "rev", properties: ["id": "big"], body: body))
        pair.client.send(.request(profile: "changes", body: Array("[]".utf8)))
        let (_, atServer) = try pair.pump()
        #expect(atServer.count == 2)
        #expect(atServer.first { $0.profile == "rev" }?.body == body)
        #expect(atServer.first { $0.profile == "changes" }?.body == Array("[]".utf8))
    }

    @Test func flowControlHoldsAMessageUntilAcknowledged() throws {
        var config = BLIPConnection.Configuration()
        config.compressionThreshold = nil
        var client = BLIPConnection(configuration: config)
        var server = BLIPConnection()
        client.send(.request(profile: "rev", body: [UInt8](repeating: 1, count: 400_000)))
        var frames: [[UInt8]] = []
        while let frame = client.nextFrame() { frames.append(frame) }
        // Stopped after ~128 KB unacknowledged.
        #expect(frames.count < 10)
        for frame in frames { _ = try server.receive(frame) }
        var acks = 0
        while let ack = server.nextFrame() { acks += 1; _ = try client.receive(ack) }
        #expect(acks >= 1)
        #expect(client.nextFrame() != nil)
    }

    /// ACKs count payload bytes — everything after the frame header, the checksum included — as LiteCore counts
    /// what it sent: an ACK that also counted the headers would be more than LiteCore sent, which it ignores, and a
    /// message it had paused would stay paused (a Couchbase Lite push of many 1 MB blobs stalled so).
    @Test func acknowledgementsCountPayloadBytesAsLiteCoreDoes() throws {
        var config = BLIPConnection.Configuration()
        config.compressionThreshold = nil
        var client = BLIPConnection(configuration: config)
        var server = BLIPConnection()
        client.send(.request(profile: "getAttachment", body: [UInt8](repeating: 7, count: 400_000)))
        var frames: [[UInt8]] = []
        while let frame = client.nextFrame() { frames.append(frame) }
        // Request #1, flags < 128: a 2-byte header; LiteCore counts the rest of each frame. Each ACK carries exactly
        // the payload bytes received so far.
        var received = 0, acks = 0
        for frame in frames {
            _ = try server.receive(frame)
            received += frame.count - 2
            while let ack = server.nextFrame() {
                var index = 2  // ACKMSG #1: a 2-byte header, then the count (no checksum)
                #expect(try Varint.read(ack[...], at: &index) == UInt64(received))
                acks += 1
                _ = try client.receive(ack)
            }
        }
        #expect(acks >= 2)
        // The sender paused at its limit counts the same way: the ACKs release it.
        #expect(client.nextFrame() != nil)
    }

    @Test func manySmallMessagesShareOneCompressionStream() throws {
        var pair = Pair()
        var config = BLIPConnection.Configuration()
        config.compressionThreshold = 0
        pair.client = BLIPConnection(configuration: config)
        for i in 1...200 {
            pair.client.send(.request(profile: "rev", properties: ["id": "doc-\(i)"], body: Array(#"{"value":"\#(i)"}"#.utf8)))
        }
        let (_, atServer) = try pair.pump()
        #expect(atServer.map { $0.properties["id"] } == (1...200).map { "doc-\($0)" })
    }

    /// A push queues a whole batch of `rev`s at once; they leave in order, a large message among them keeps its
    /// turn (round-robin) and its acknowledgements, and the sender's queue is empty afterwards.
    @Test func aBatchQueuedAtOnceLeavesInOrderWithALargeMessageAmongIt() throws {
        var pair = Pair()
        let large = [UInt8](repeating: 9, count: 300_000)
        for i in 1...1_500 {
            let body = i == 700 ? large : Array(#"{"value":\#(i)}"#.utf8)
            pair.client.send(.request(profile: "rev", properties: ["id": "doc-\(i)"], body: body))
        }
        let (_, atServer) = try pair.pump()
        #expect(atServer.count == 1_500)
        // The large message's later frames share turns with what followed it, so it completes later than its number.
        #expect(Set(atServer.map { $0.number }) == Set((1...1_500).map(UInt64.init)))
        #expect(atServer.filter { $0.number != 700 }.map(\.number) == (1...1_500).filter { $0 != 700 }.map(UInt64.init))
        #expect(atServer.first { $0.number == 700 }?.body == large)
        #expect(!pair.client.hasPendingFrames)
        for message in atServer { pair.server.send(.response(to: message.number)) }
        let (atClient, _) = try pair.pump()
        #expect(atClient.count == 1_500)
        #expect(pair.client.pendingReplies == 0)
    }

    @Test func noReplyRequestsAwaitNothing() throws {
        var pair = Pair()
        pair.client.send(.request(profile: "changes", noReply: true))
        #expect(pair.client.pendingReplies == 0)
        let received = try pair.pump().atServer
        let message = try #require(received.first)
        #expect(message.flags.contains(.noReply))
    }
}
