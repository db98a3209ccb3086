import SetteeCore
import Testing
@testable import SetteeBLIP

/// Frames Couchbase Lite C 3.2.4 sent to `settee serve` when pushing three new documents (recorded on the server):
/// `getCheckpoint`, a compressed urgent `proposeChanges`, three compressed `rev`s sharing the deflate stream, and
/// `setCheckpoint`. They check Settee's reading of LiteCore's framing, compression and checksums byte for byte.
@Suite struct RecordedExchangeTests {
    static let pushOfThreeDocuments: [String] = [
        "01003d50726f66696c6500676574436865636b706f696e7400636c69656e740063702d363934492b4b42367a4d47485953445364303930354474593944413d0049e1b688",
        "02186cccb16ec3300c84613f8b6707104d51b2e64ed98aae8107893ab6010c2bb0933e7f5d4f1d7af37f9f7bdf9add17748fad3dda8eb7afbc7e62efb4adb6dcf5795d757955ec1ff8ee9edb0bddedd6d7a617f73bea879e2e5c0c8aa8528c944a8ae2cd4d5c1c0701a013f358c7e48eb81f649a873fc2780aded8d8234b89115e7260307c501a2d1c570b5152e43afd27f029282b230a3222a552c5530228233b091288933f108be914829be71f00871d3fe7",
        "03088c90310a80301004f394e36a9bb4fec6c40505bd6872098af877a320b696bb6c31b3eef58e556ceccde7f434ffad4cc29a211ec61a09ef6da9a683855bdbb062536e6fe23c43942ca56e4fe46257020d4131918482d921563cdd17d4b577139f1700ae0715d9",
        "0408c2e94823a823890d3884238db039d208d39146104726672416e564a62ae4172727162924e6146424a2b91100b6da4d9d",
        "0508c2e94663a81b898d1a841b8db1b9d118d38dc61037a6a4e694242a940115e717e10a4900000591a2cd",
        "06004250726f66696c6500736574436865636b706f696e7400636c69656e740063702d363934492b4b42367a4d47485953445364303930354474593944413d0072657600007b2274696d65223a313739363630393236312c226c6f63616c223a337dd8d498b0",
    ]

    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    @Test func couchbaseLitePushFramesDecode() throws {
        var server = BLIPConnection()
        var messages: [BLIPMessage] = []
        for frame in Self.pushOfThreeDocuments.map(Self.bytes) {
            if let message = try server.receive(frame) { messages.append(message) }
        }
        #expect(messages.map(\.profile) == ["getCheckpoint", "proposeChanges", "rev", "rev", "rev", "setCheckpoint"])
        #expect(messages.map(\.number) == [1, 2, 3, 4, 5, 6])
        let proposals = try #require(try messages[1].jsonBody()?.arrayValue)
        #expect(proposals.count == 3)
        #expect(proposals[0][0]?.stringValue == "doc-000001")
        for rev in messages[2...4] {
            #expect(rev.flags.contains(.compressed))
            #expect(rev.properties["id"]?.hasPrefix("doc-00000") == true)
            #expect(rev.properties["rev"]?.hasPrefix("1-") == true)
            #expect(try rev.jsonBody()?["type"]?.stringValue == "cbl")
        }
        #expect(messages[5].properties["client"]?.hasPrefix("cp-") == true)
        // Each wanted a reply; answering them queues exactly one frame each.
        for message in messages { server.send(.response(to: message.number)) }
        #expect(server.drainFrames().count == 6)
    }

    @Test func aFlippedByteInARecordedCompressedFrameIsCaught() throws {
        var server = BLIPConnection()
        var frames = Self.pushOfThreeDocuments.map(Self.bytes)
        frames[2][frames[2].count / 2] ^= 0x01
        var failure: BLIPError?
        for frame in frames {
            do { _ = try server.receive(frame) } catch { failure = error; break }
        }
        #expect(failure?.kind == .badChecksum || failure?.kind == .badCompression)
        #expect(server.isClosed)
    }
}
