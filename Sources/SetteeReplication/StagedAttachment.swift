import Foundation
import SetteeCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An attachment body a replicator staged to a file instead of holding it in memory: `length` bytes as they will
/// be stored. The file is removed when the last revision holding this value is released.
package final class StagedAttachment: Sendable {
    /// The file.
    public let path: String
    /// Its length in bytes.
    public let length: Int

    init(path: String, length: Int) {
        self.path = path
        self.length = length
    }

    deinit { unlink(path) }

    /// Bodies larger than this are staged rather than held in memory.
    static let threshold = 1 << 20

    /// Where this process's replicators stage attachment bodies (``ReplicationStaging``); removed when the process
    /// exits.
    static let directory: String = {
        let path = ReplicationStaging.claimDirectory()
        ReplicationStaging.removeAtExit(path)
        return path
    }()

    /// The bytes, read whole (for a target that needs them in memory).
    /// - Throws: ``ReplicationError`` (`.local`) if the file can't be read.
    public func bytes() throws(ReplicationError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path), data.count == length else {
            throw ReplicationError(.local, "the staged attachment \(path) can't be read")
        }
        return [UInt8](data)
    }
}


/// A staged body is a part of the `multipart/related` body a push sends, read from its file as the body goes out.
extension StagedAttachment: MultipartPayload {}
