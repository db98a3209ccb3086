import CSQLite
import Dispatch
import Foundation
package import SetteeCore

/// A deadline for the SQLite reads made on the current thread (query timeouts). While one is set, every reader
/// connection handed out by ``DatabasePool/read(_:)`` on this thread gets a progress handler that interrupts its
/// statements once the deadline has passed; the read then fails with ``SetteeError/Code/timeout``.
package enum ReadDeadline {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The current thread's deadline in `DispatchTime` uptime nanoseconds, or 0 for none.
    package static var current: UInt64 {
        UInt64(UInt(bitPattern: pthread_getspecific(key)))
    }

    /// Runs `body` with reads on this thread interrupted at `deadline` (uptime nanoseconds; nested deadlines keep
    /// the earlier one).
    package static func with<T>(_ deadline: UInt64, _ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(key)
        let outer = UInt64(UInt(bitPattern: previous))
        let effective = outer != 0 ? min(outer, deadline) : deadline
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: UInt(effective)))
        defer { pthread_setspecific(key, previous) }
        return try body()
    }

    /// Whether the current thread's deadline has passed.
    package static var hasPassed: Bool {
        let d = current
        return d != 0 && DispatchTime.now().uptimeNanoseconds >= d
    }

    package static func timeoutError() -> SetteeError {
        SetteeError(.timeout, "The request took longer than the node's query timeout and was stopped.")
    }

    /// Installs (or with `deadline == 0` removes) the interrupting progress handler on a connection.
    static func install(_ deadline: UInt64, on db: OpaquePointer) {
        if deadline == 0 {
            sqlite3_progress_handler(db, 0, nil, nil)
        } else {
            // The deadline travels in the context pointer's bits: no allocation, nothing to free.
            sqlite3_progress_handler(db, 4000, { context in
                let deadline = UInt64(UInt(bitPattern: context))
                return DispatchTime.now().uptimeNanoseconds >= deadline ? 1 : 0
            }, UnsafeMutableRawPointer(bitPattern: UInt(deadline)))
        }
    }
}

extension Database {
    /// Runs `body` (blocking store work on the calling thread) with a time limit: SQLite reads made by it are
    /// interrupted once `seconds` have passed, and it throws ``SetteeError`` `.timeout`. The server uses it for
    /// query and view requests (`settee serve --query-timeout`).
    public static func withTimeout<T>(_ seconds: Double, _ body: () throws -> T) throws -> T {
        guard seconds > 0, seconds.isFinite else { return try body() }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        return try ReadDeadline.with(deadline, body)
    }
}
