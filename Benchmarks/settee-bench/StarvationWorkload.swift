// starvation: one tenant's endless design functions must not take the node from the others (issue 44's bar).
// Eight design documents of the database `tenant` each have a view whose map function never ends; eight
// clients query them over and over (each query holds a query server until `os_process_timeout` kills it and
// answers 500 os_process_error). Meanwhile one client GETs documents of the loaded database every 5 ms for ten
// seconds, each GET's latency counted from when it was due (so a stall counts for every GET it held up): the
// share answered within 100 ms (goal ≥ 99 %, i.e. p99 < 100 ms), with p50, p99 and the slowest, against the same
// GETs with nothing else running, measured first in the same run.
import Foundation
import SetteeCore
import Synchronization

extension HTTPBench {
    func starvationWorkload(port: Int) throws {
        let admin = try HTTPConnection(port: port)
        defer { admin.disconnect() }
        try expect(try admin.request(method: "PUT", path: "/tenant"), [201, 202], "PUT /tenant")
        try expect(try admin.request(method: "PUT", path: "/tenant/seed", body: Array(#"{"x":1}"#.utf8)), [201], "PUT /tenant/seed")
        let endless = #"{"views":{"v":{"map":"function(doc) { while (true) {} }"}}}"#
        for i in 0..<8 {
            try expect(try admin.request(method: "PUT", path: "/tenant/_design/stuck\(i)", body: Array(endless.utf8)), [201],
                       "PUT /tenant/_design/stuck\(i)")
        }

        let quiet = try timedGets(port: port, seconds: 3)

        let stop = Atomic<Bool>(false)
        let answered = Atomic<Int>(0)
        let failures = Mutex<[String]>([])
        var threads: [Thread] = []
        let finished = DispatchGroup()
        for i in 0..<8 {
            finished.enter()
            let thread = Thread {
                defer { finished.leave() }
                do {
                    let c = try HTTPConnection(port: port)
                    defer { c.disconnect() }
                    while !stop.load(ordering: .relaxed) {
                        let r = try c.request(method: "GET", path: "/tenant/_design/stuck\(i)/_view/v")
                        // The endless function is killed at the time limit: CouchDB's 500 os_process_error.
                        guard r.status == 500, String(decoding: r.body, as: UTF8.self).contains("os_process_error") else {
                            failures.withLock { $0.append("stuck\(i): HTTP \(r.status) \(String(decoding: r.body.prefix(200), as: UTF8.self))") }
                            return
                        }
                        answered.add(1, ordering: .relaxed)
                    }
                } catch {
                    failures.withLock { $0.append("stuck\(i): \(error)") }
                }
            }
            threads.append(thread)
            thread.start()
        }
        Thread.sleep(forTimeInterval: 0.5)
        let loaded = try timedGets(port: port, seconds: 10)
        stop.store(true, ordering: .relaxed)
        _ = finished.wait(timeout: .now() + 30)
        if let failure = failures.withLock({ $0.first }) { throw HTTPBenchFailure(message: "starvation: \(failure)") }
        guard answered.load(ordering: .relaxed) > 0 else {
            throw HTTPBenchFailure(message: "starvation: no endless query was answered with os_process_error")
        }
        try expect(try admin.request(method: "DELETE", path: "/tenant"), [200, 202], "DELETE /tenant")

        func ms(_ s: Double) -> String { String(format: "%.1f", s * 1000) }
        report(Figure(workload: "starvation",
                      metric: "GETs of another database within 100 ms while 8 endless map functions run "
                        + "(\(loaded.count) GETs: p50 \(ms(loaded.p50)) ms, p99 \(ms(loaded.p99)) ms, slowest \(ms(loaded.max)) ms; "
                        + "quiet: p99 \(ms(quiet.p99)) ms; \(answered.load(ordering: .relaxed)) endless queries timed out)",
                      value: loaded.under100 * 100, baseline: nil, baselineName: nil, goal: 99, unit: "%"))
    }

    /// GETs of random documents of the loaded database on one keep-alive connection, scheduled every 5 ms for
    /// `seconds` (an open-loop schedule, as wrk2 measures): a GET's latency counts from when it was due, so a stall
    /// counts for every GET it held up, not just the one in flight.
    private func timedGets(port: Int, seconds: Double) throws -> (count: Int, p50: Double, p99: Double, max: Double, under100: Double) {
        let c = try HTTPConnection(port: port)
        defer { c.disconnect() }
        var rng = SeededGenerator(seed: 11)
        var latencies: [Double] = []
        let interval = 0.005
        let start = DispatchTime.now().uptimeNanoseconds
        let total = Int(seconds / interval)
        for k in 0..<total {
            let due = start + UInt64(Double(k) * interval * 1e9)
            let now = DispatchTime.now().uptimeNanoseconds
            if now < due { usleep(UInt32((due - now) / 1000)) }
            let id = ids[Int(rng.next() % UInt64(count))]
            let response = try c.request(method: "GET", path: "/\(dbName)/\(id)")
            try expect(response, [200], "GET /\(dbName)/\(id)")
            latencies.append(Double(DispatchTime.now().uptimeNanoseconds - due) / 1e9)
        }
        latencies.sort()
        func at(_ q: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * q))] }
        let under = Double(latencies.count { $0 < 0.1 }) / Double(max(1, latencies.count))
        return (latencies.count, at(0.5), at(0.99), latencies.last ?? 0, under)
    }
}
