import Foundation
import SetteeStore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The directory a process's replicators stage attachment bodies in, and the removal of what processes killed
/// mid-transfer left behind.
///
/// A replicator has no data directory of its own: each process stages in `settee-replication/<pid>.<random>/` in
/// the system's temporary directory, and holds an exclusive `flock` on the `.lock` file in it for as long as it
/// runs. The lock, not the process id, says whether a directory is in use: it holds across PID namespaces that
/// share the temporary directory (containers sharing `/tmp`) and through process-id reuse, and the kernel drops it
/// when the process ends, however it ends. A directory is made and locked under a hidden name, then renamed into
/// place, so no other process sees it unlocked.
enum ReplicationStaging {
    static let lockName = ".lock"
    /// How long something without a lock (a directory whose process died before locking it, a hidden one whose
    /// claim was cut short, a file of the layout before directories) must have been left unchanged before it is
    /// removed.
    static let staleAge: TimeInterval = 15 * 60

    /// This process's staging directory, claimed under `root` (default: `settee-replication` in the temporary
    /// directory), the sweep of what dead processes left there started in the background.
    static func claimDirectory(in root: String = (NSTemporaryDirectory() as NSString).appendingPathComponent("settee-replication")) -> String {
        let name = "\(getpid()).\(String(UInt32.random(in: .min ... .max), radix: 16))"
        let path = (root as NSString).appendingPathComponent(name)
        claim(path, name: name, root: root)
        // On the store's background threads (file-system work, not for the cooperative pool).
        BackgroundWork.run { sweepStale(in: root, keeping: name) }
        return path
    }

    /// Makes `path` with a held lock in it. Should that fail, staging still works there (a staging file makes its
    /// directory), unlocked: a later sweep removes it once unchanged for ``staleAge``.
    private static func claim(_ path: String, name: String, root: String) {
        let files = FileManager.default
        try? files.createDirectory(atPath: root, withIntermediateDirectories: true)
        let hidden = (root as NSString).appendingPathComponent("." + name)
        guard (try? files.createDirectory(atPath: hidden, withIntermediateDirectories: false)) != nil else { return }
        let fd = open((hidden as NSString).appendingPathComponent(lockName), O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        // The descriptor stays open, and the lock held, until the process ends.
        guard fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0, rename(hidden, path) == 0 else {
            if fd >= 0 { close(fd) }
            try? files.removeItem(atPath: hidden)
            return
        }
    }

    /// Removes `path` when the process exits normally (one killed leaves it to a later sweep). For the process's
    /// own staging directory only: one at a time.
    static func removeAtExit(_ path: String) {
        let first = claimed.withLock { claimed in
            defer { claimed = path }
            return claimed == nil
        }
        if first { atexit { ReplicationStaging.removeClaimed() } }
    }

    private static let claimed = Mutex<String?>(nil)

    private static func removeClaimed() {
        guard let path = claimed.withLock({ $0 }) else { return }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Removes, under `root`, what no running process uses: a directory whose `.lock` no process holds (at once);
    /// one without a lock, a hidden one, or a loose file, once unchanged for ``staleAge``. `keeping` (this
    /// process's directory) is left alone.
    static func sweepStale(in root: String, keeping: String? = nil, now: Date = Date()) {
        let files = FileManager.default
        guard let entries = try? files.contentsOfDirectory(atPath: root) else { return }
        for entry in entries where entry != keeping {
            let path = (root as NSString).appendingPathComponent(entry)
            var isDirectory: ObjCBool = false
            guard files.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue && !entry.hasPrefix(".") {
                let fd = open((path as NSString).appendingPathComponent(lockName), O_RDWR | O_CLOEXEC)
                if fd >= 0 {
                    defer { close(fd) }
                    // Taken: its process is gone. Held: in use.
                    if flock(fd, LOCK_EX | LOCK_NB) == 0 { try? files.removeItem(atPath: path) }
                    continue
                }
            }
            if let changed = lastChange(path, isDirectory: isDirectory.boolValue), now.timeIntervalSince(changed) >= staleAge {
                try? files.removeItem(atPath: path)
            }
        }
    }

    /// When `path` (or, for a directory, anything in it: writing a file doesn't change its directory's time) last
    /// changed.
    private static func lastChange(_ path: String, isDirectory: Bool) -> Date? {
        let files = FileManager.default
        func modified(_ path: String) -> Date? { (try? files.attributesOfItem(atPath: path))?[.modificationDate] as? Date }
        guard var latest = modified(path) else { return nil }
        if isDirectory {
            for entry in (try? files.contentsOfDirectory(atPath: path)) ?? [] {
                if let date = modified((path as NSString).appendingPathComponent(entry)), date > latest { latest = date }
            }
        }
        return latest
    }
}
