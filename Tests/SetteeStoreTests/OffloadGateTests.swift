import Foundation
import Synchronization
import Testing
@testable import SetteeStore

/// `Database.offload` runs at most `offloadWidth` blocking calls at once; the rest wait without a thread.
@Suite struct OffloadGateTests {
    /// How many calls are inside at once, and the most there were.
    final class Occupancy: Sendable {
        private let now = Atomic<Int>(0)
        private let most = Atomic<Int>(0)
        func enter() { most.max(now.add(1, ordering: .relaxed).newValue, ordering: .relaxed) }
        func leave() { now.subtract(1, ordering: .relaxed) }
        var peak: Int { most.load(ordering: .relaxed) }
    }

    @Test func aGateRunsAtMostItsWidthAndServesEveryone() async throws {
        let gate = OffloadGate(width: 3)
        let inside = Occupancy()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    await gate.enter()
                    inside.enter()
                    try await Task.sleep(for: .milliseconds(2))
                    inside.leave()
                    gate.leave()
                }
            }
            try await group.waitForAll()
        }
        #expect(inside.peak <= 3)
        #expect(inside.peak >= 2)
        #expect(gate.peak <= 3)
        // Every slot came back: three more enter at once.
        for _ in 0..<3 { await gate.enter() }
        for _ in 0..<3 { gate.leave() }
    }

    @Test func offloadIsBoundedByItsWidth() async throws {
        let inside = Occupancy()
        let calls = Database.offloadWidth * 3
        try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<calls {
                group.addTask {
                    try await Database.offload {
                        inside.enter()
                        usleep(2_000)  // a blocking call, as a write waiting for its group commit is
                        inside.leave()
                        return i
                    }
                }
            }
            var sum = 0
            for try await i in group { sum += i }
            #expect(sum == calls * (calls - 1) / 2)
        }
        #expect(inside.peak <= Database.offloadWidth)
    }
}
