import Testing
@testable import SetteeBLIP

/// Input a peer should never send: each is a clear ``BLIPError``, never a trap; fatal ones close the connection.
@Suite struct HostileInputTests {
    /// The frames of one request, as a client would send them.
    func frames(_ message: BLIPMessage, compress: Bool = false) -> [[UInt8]] {
        var config = BLIPConnection.Configuration()
        config.compressionThreshold = compress ? 0 : nil
        var sender = BLIPConnection(configuration: config)
        sender.send(message)
        return sender.drainFrames()
    }

    /// A frame as the first one of its direction: header, payload, CRC32 of the payload.
    static func rawFrame(number: UInt8, flags: UInt8, payload: [UInt8]) -> [UInt8] {
        let checksum = BLIPChecksum.update(0, payload[...])
        return [number, flags] + payload + [UInt8(checksum >> 24), UInt8(truncatingIfNeeded: checksum >> 16),
                                            UInt8(truncatingIfNeeded: checksum >> 8), UInt8(truncatingIfNeeded: checksum)]
    }

    @Test func badChecksumIsFatal() throws {
        var frame = frames(.request(profile: "getCheckpoint"))[0]
        frame[frame.count - 1] ^= 0xFF
        var server = BLIPConnection()
        #expect { try server.receive(frame) } throws: { ($0 as? BLIPError)?.kind == .badChecksum }
        #expect(server.isClosed)
        #expect { try server.receive(frame) } throws: { ($0 as? BLIPError)?.kind == .closed }
    }

    @Test func corruptDeflateDataIsFatal() throws {
        var frame = frames(.request(profile: "rev", body: Array(String(repeating: "abc", count: 300).utf8)), compress: true)[0]
        for i in 2..<(frame.count - 4) { frame[i] = 0xFF }
        var server = BLIPConnection()
        #expect { try server.receive(frame) } throws: { ($0 as? BLIPError)?.kind == .badCompression }
    }

    @Test func outOfOrderRequestNumberIsFatal() throws {
        var sender = BLIPConnection()
        sender.send(.request(profile: "a"))
        sender.send(.request(profile: "b"))
        let sent = sender.drainFrames()
        var server = BLIPConnection()
        #expect { try server.receive(sent[1]) } throws: { ($0 as? BLIPError)?.kind == .unexpectedMessageNumber }
    }

    @Test func replyToNothingIsRefused() throws {
        // RPY #9 with no properties, when nothing was asked.
        let frame = Self.rawFrame(number: 9, flags: BLIPMessageType.response.rawValue, payload: [0])
        var server = BLIPConnection()
        #expect { try server.receive(frame) } throws: { ($0 as? BLIPError)?.kind == .unexpectedMessageNumber }
    }

    @Test func oversizedMessageIsFatal() throws {
        var config = BLIPConnection.Configuration()
        config.maxMessageSize = 1000
        var server = BLIPConnection(configuration: config)
        var thrown: BLIPError?
        for frame in frames(.request(profile: "rev", body: [UInt8](repeating: 7, count: 50_000))) {
            do { _ = try server.receive(frame) } catch { thrown = error; break }
        }
        #expect(thrown?.kind == .messageTooLarge)
    }

    @Test func compressedBombIsStoppedAtTheLimit() throws {
        var config = BLIPConnection.Configuration()
        config.maxMessageSize = 10_000
        var server = BLIPConnection(configuration: config)
        // One frame whose 16 KB of zeros deflate to a few bytes.
        let frame = frames(.request(profile: "rev", body: [UInt8](repeating: 0, count: 16_000)), compress: true)[0]
        #expect { try server.receive(frame) } throws: { ($0 as? BLIPError)?.kind == .messageTooLarge }
    }

    @Test func badPropertiesAnswerTheRequestWithA400AndKeepTheConnection() throws {
        // Request #1 whose properties claim more bytes than the message has.
        let frame = Self.rawFrame(number: 1, flags: 0, payload: [50, 0x61, 0])
        var server = BLIPConnection()
        #expect { try server.receive(frame) } throws: { ($0 as? BLIPError)?.kind == .badProperties }
        #expect(!server.isClosed)
        // The 400 goes back as an ERR frame for message #1.
        let next = server.nextFrame()
        let reply = try #require(next)
        #expect(reply[0] == 1 && reply[1] & 0x07 == BLIPMessageType.error.rawValue)
    }

    @Test func truncatedAndEmptyFramesAreMalformed() {
        for bad: [UInt8] in [[], [0x80], [1], [1, 0], [1, 0, 0, 0]] {
            var server = BLIPConnection()
            #expect(throws: BLIPError.self) { try server.receive(bad) }
        }
    }

    @Test func arbitraryBytesNeverTrap() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var server = BLIPConnection()
            let count = Int.random(in: 0...40, using: &generator)
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = try? server.receive(bytes)
            _ = server.nextFrame()
        }
    }
}

@Suite struct ReplyRulesTests {
    @Test func repliesToNoReplyRequestsAndSecondRepliesAreDropped() throws {
        var pair = Pair()
        pair.client.send(.request(profile: "proposeChanges", noReply: true))
        pair.client.send(.request(profile: "getCheckpoint"))
        let received = try pair.pump().atServer
        #expect(received.count == 2)
        pair.server.send(.response(to: 1))   // no-reply request: dropped
        pair.server.send(.response(to: 2))
        pair.server.send(.response(to: 2))   // second reply: dropped
        pair.server.send(.response(to: 7))   // no such request: dropped
        let replies = try pair.pump().atClient
        #expect(replies.map(\.number) == [2])
    }
}
