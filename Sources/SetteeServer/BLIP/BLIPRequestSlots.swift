import Synchronization

/// How many of one connection's requests are answered at once in tasks of their own.
///
/// Requests that wait on the store (checkpoints, `changes` and `proposeChanges` lists, attachments) are answered
/// in tasks, so the connection's reader goes on to the frames behind them — a `setCheckpoint` waiting for a write
/// transaction would otherwise hold up every pushed `rev` queued after it. The reader takes a slot before it
/// starts such a task and waits when none is free: a client that sends requests faster than they are answered
/// stops being read (and TCP pushes back) instead of piling up tasks.
final class BLIPRequestSlots: Sendable {
    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(_ count: Int) {
        state = Mutex(State(free: count))
    }

    /// Takes a slot, waiting for one to be released when none is free.
    func acquire() async {
        let taken = state.withLock { state in
            guard state.free > 0 else { return false }
            state.free -= 1
            return true
        }
        if taken { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let takenNow = state.withLock { state in
                guard state.free > 0 else {
                    state.waiting.append(continuation)
                    return false
                }
                state.free -= 1
                return true
            }
            if takenNow { continuation.resume() }
        }
    }

    /// Gives a slot back (to the longest waiter, if any).
    func release() {
        let next: CheckedContinuation<Void, Never>? = state.withLock { state in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
