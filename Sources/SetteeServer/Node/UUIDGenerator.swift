import Foundation
import Synchronization
import SetteeCore

/// Makes `/_uuids` ids by CouchDB's algorithms (`[uuids] algorithm`): `random`, `sequential` (the default: a random
/// 26-hex-digit prefix and a 6-hex-digit suffix that grows by a random step, a new prefix when it would overflow, so
/// ids made in a row sort together and keep B-tree inserts local), `utc_random` and `utc_id`.
final class UUIDGenerator: Sendable {
    private struct Sequence {
        var prefix = Hex.random(bytes: 13)
        var suffix = Int.random(in: 1...0xfff)
    }

    private let sequence = Mutex(Sequence())
    /// The last time prefix handed out, so `utc_*` ids made in the same microsecond still increase.
    private let lastMicros = Mutex<Int>(0)

    func next(_ count: Int, _ settings: UUIDSettings) -> [String] {
        (0..<count).map { _ in next(settings) }
    }

    func next(_ settings: UUIDSettings) -> String {
        switch settings.algorithm {
        case .random:
            return Hex.random(bytes: 16)
        case .sequential:
            return sequence.withLock { s in
                s.suffix += Int.random(in: 1...0xffe)
                if s.suffix >= 0xfff000 {
                    s.prefix = Hex.random(bytes: 13)
                    s.suffix = Int.random(in: 1...0xfff)
                }
                return s.prefix + hex(s.suffix, width: 6)
            }
        case .utcRandom:
            return utcPrefix() + String(Hex.random(bytes: 9))
        case .utcID:
            return utcPrefix() + settings.utcIDSuffix
        }
    }

    /// Microseconds since 1970 as 14 hex digits.
    private func utcPrefix() -> String {
        let now = Int(Date().timeIntervalSince1970 * 1_000_000)
        let micros = lastMicros.withLock { last in
            last = max(now, last + 1)
            return last
        }
        return hex(micros, width: 14)
    }

    private func hex(_ value: Int, width: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}
