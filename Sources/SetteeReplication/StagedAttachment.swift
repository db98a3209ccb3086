import Foundation
import SetteeCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An attachment body a replicator staged to a file instead of holding it in memory: `length` bytes as they will
/// be stored. The file is removed when the last revision holding this value is released.
public final class StagedAttachment: Sendable {
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

    /// Where this process's replicators stage attachment bodies: `settee-replication/<pid>` in the system's
    /// temporary directory (a replicator has no data directory of its own). A process killed mid-transfer leaves
    /// its directory behind; the first replication of a later process removes it (``sweepStale(in:now:)``).
    static let directory: String = {
        let root = (NSTemporaryDirectory() as NSString).appendingPathComponent("settee-replication")
        sweepStale(in: root)
        return (root as NSString).appendingPathComponent(String(getpid()))
    }()

    /// How long a dead process's staging directory must have been left unchanged before it is removed: a
    /// process in another PID namespace sharing the temporary directory looks dead from here, and a transfer of
    /// its would touch its directory far more often than this.
    static let staleAge: TimeInterval = 15 * 60

    /// Removes the staging directories, under `root`, of processes that no longer run: at once when empty (what
    /// every process that ended normally leaves), else once unchanged for ``staleAge``. A running process's
    /// directory (or one this process can't signal, another user's) stays, as does anything not named by a
    /// process id.
    static func sweepStale(in root: String, now: Date = Date()) {
        let files = FileManager.default
        guard let entries = try? files.contentsOfDirectory(atPath: root) else { return }
        for entry in entries {
            guard let pid = Int32(entry), pid > 0, pid != getpid() else { continue }
            if kill(pid, 0) == 0 || errno != ESRCH { continue }
            let path = (root as NSString).appendingPathComponent(entry)
            if rmdir(path) == 0 { continue }  // (fails unless empty)
            guard let changed = (try? files.attributesOfItem(atPath: path))?[.modificationDate] as? Date,
                  now.timeIntervalSince(changed) >= staleAge else { continue }
            try? files.removeItem(atPath: path)
        }
    }

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
