import Foundation
import Synchronization
import Testing
import Settee
import SetteeIndex

/// The query-server pool is shared fairly between design documents (map functions count by their source): one whose
/// calls never end holds at most its share of the processes, so another's call waits at most one time limit.
@Suite(.serialized) struct JavaScriptFairShareTests {
    @Test func endlessFunctionsHoldOnlyTheirShareOfTheQueryServers() throws {
        let engine = JavaScriptEngine(configuration: .init(maxProcesses: 2, timeout: .seconds(1)))
        defer { engine.shutdown() }
        let endless = ["function(doc) { while (true) {} }"]
        let outcomes = Mutex<[String]>([])
        let group = DispatchGroup()
        // Six endless calls first: two hold the processes, four wait.
        for _ in 0..<6 {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    _ = try engine.map(functions: endless, library: nil, document: ["_id": "x"])
                    outcomes.withLock { $0.append("answered") }
                } catch {
                    outcomes.withLock { $0.append("\(error)") }
                }
            }.start()
        }
        Thread.sleep(forTimeInterval: 0.3)
        // Another design document's call gets the first process returned, not a place behind the four.
        let started = Date()
        let rows = try engine.map(functions: ["function(doc) { emit(doc._id, 1); }"], library: nil, document: ["_id": "y"])
        let waited = Date().timeIntervalSince(started)
        #expect(rows.first?.first?.key == "y")
        #expect(waited < 1.9, "waited \(waited) s behind another design document's endless calls")
        _ = group.wait(timeout: .now() + 30)
        // Every endless call ended at the time limit.
        #expect(outcomes.withLock { $0.count } == 6)
        #expect(outcomes.withLock { $0.allSatisfy { $0.contains("time limit") } }, "\(outcomes.withLock { $0 })")
    }

    @Test func idleProcessesBeyondTheSoftLimitAreStopped() throws {
        let engine = JavaScriptEngine(configuration: .init(maxProcesses: 4, idleProcesses: 1))
        defer { engine.shutdown() }
        let group = DispatchGroup()
        // Four calls at once start four processes; once they are back, one is kept.
        for i in 0..<4 {
            group.enter()
            Thread {
                defer { group.leave() }
                _ = try? engine.map(functions: ["function(doc) { var t = Date.now(); while (Date.now() - t < 200) {} emit(\(i), 1); }"],
                                    library: nil, document: ["_id": "x"])
            }.start()
        }
        _ = group.wait(timeout: .now() + 30)
        #expect(engine.processesStarted == 4)
        #expect(engine.idleProcessCount == 1)
    }
}
