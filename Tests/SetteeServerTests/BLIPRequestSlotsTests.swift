import Testing
@testable import SetteeServer

/// The bound on a `_blipsync` connection's requests answered at once: the reader waits for a slot once they are
/// all taken, and each release lets the longest waiter in.
@Suite struct BLIPRequestSlotsTests {
    actor Entered {
        var order: [Int] = []
        func add(_ n: Int) { order.append(n) }
    }

    @Test func aThirdRequestWaitsForOneOfTwoSlots() async throws {
        let slots = BLIPRequestSlots(2)
        await slots.acquire()
        await slots.acquire()
        let entered = Entered()
        let waiters = (1...2).map { n in
            Task {
                await slots.acquire()
                await entered.add(n)
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(await entered.order.isEmpty, "no slot was free")
        slots.release()
        try await Task.sleep(for: .milliseconds(100))
        #expect(await entered.order.count == 1, "one release lets one waiter in")
        slots.release()
        for waiter in waiters { await waiter.value }
        #expect(await Set(entered.order) == [1, 2])
        // Both holders give their slots back: two are free again, without waiting.
        slots.release()
        slots.release()
        await slots.acquire()
        await slots.acquire()
    }
}
