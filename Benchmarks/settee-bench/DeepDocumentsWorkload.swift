// `deep`: one document with a long history and one with many conflicting leaves, on two `settee serve` nodes.
//
//   long  10,000 edits of one document (`_revs_limit` raised to keep them all), one PUT each over HTTP; node B
//         pulls it (one-shot `_replicate`), A is compacted, and `GET ?revs=true` reads it back.
//   wide  1,000 conflicting leaves of one document in one `_bulk_docs` (`new_edits=false`), as a replicator writes
//         them; B pulls it, `GET ?conflicts=true` reads it, A is compacted.
//
// Each step's rate (revisions or leaves per second) against the same step at a tenth of the size in the same run:
// the ratio is 1 when the cost is linear in the size, 0.1 when it is quadratic (goal ≥ 0.5).
import Foundation
import SetteeCore

let deepWorkloads = ["deep"]

@MainActor func runDeepDocuments(workDir: String, binary: String, info: (String) -> Void) throws {
    func check(_ r: HTTPResponse, _ ok: Set<Int>, _ what: String) throws {
        guard ok.contains(r.status) else {
            throw HTTPBenchFailure(message: "\(what) → \(r.status): \(String(decoding: r.body.prefix(300), as: UTF8.self))")
        }
    }
    /// Seconds per step for `revisions` edits of one document and `leaves` conflicting leaves of another.
    func run(revisions: Int, leaves: Int) throws -> [(String, Int, Double)] {
        let dirA = workDir + "/deep-a", dirB = workDir + "/deep-b"
        for d in [dirA, dirB] {
            try? FileManager.default.removeItem(atPath: d)
            try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        }
        let a = try SetteeServerProcess(binary: binary, dataDirectory: dirA, logPath: workDir + "/deep-a.log")
        defer { a.stop() }
        let b = try SetteeServerProcess(binary: binary, dataDirectory: dirB, logPath: workDir + "/deep-b.log")
        defer { b.stop() }
        let connA = try HTTPConnection(port: a.port), connB = try HTTPConnection(port: b.port)
        // Both keep every revision (a database stems to its own `_revs_limit`, 1,000 by default, as CouchDB's).
        for conn in [connA, connB] {
            try check(try conn.request(method: "PUT", path: "/deep"), [201], "PUT /deep")
            try check(try conn.request(method: "PUT", path: "/deep/_revs_limit", body: Array(String(revisions + 10).utf8)), [200],
                      "PUT _revs_limit")
        }
        var steps: [(String, Int, Double)] = []

        // long: one PUT per edit.
        var rev = ""
        let edits = try measure {
            for i in 0..<revisions {
                let body = rev.isEmpty ? #"{"n":0}"# : #"{"_rev":"\#(rev)","n":\#(i)}"#
                let r = try connA.request(method: "PUT", path: "/deep/long", body: Array(body.utf8))
                try check(r, [201], "PUT /deep/long #\(i)")
                rev = try JSON.parse(r.body)["rev"]?.stringValue ?? ""
            }
        }
        steps.append(("long: edits (revisions/s)", revisions, edits))
        // wide: the leaves in one _bulk_docs, as a replicator sends them.
        let root = MD5.hex(Array("root".utf8))
        var bulk = #"{"new_edits":false,"docs":["#
        for i in 0..<leaves {
            if i > 0 { bulk += "," }
            let leaf = MD5.hex(Array("leaf \(i)".utf8))
            bulk += #"{"_id":"wide","_rev":"2-\#(leaf)","_revisions":{"start":2,"ids":["\#(leaf)","\#(root)"]},"leaf":\#(i)}"#
        }
        bulk += "]}"
        var response: HTTPResponse?
        let write = try measure { response = try connA.request(method: "POST", path: "/deep/_bulk_docs", body: Array(bulk.utf8)) }
        try check(response!, [201], "_bulk_docs of the leaves")
        steps.append(("wide: leaves in one _bulk_docs (leaves/s)", leaves, write))

        let spec = #"{"source":"http://127.0.0.1:\#(a.port)/deep","target":"deep"}"#
        let pull = try measure { response = try connB.request(method: "POST", path: "/_replicate", body: Array(spec.utf8)) }
        try check(response!, [200], "B pulls")
        steps.append(("both: B pulls them (revisions + leaves/s)", revisions + leaves, pull))
        let readLong = try measure {
            let r = try connB.request(method: "GET", path: "/deep/long?revs=true")
            try check(r, [200], "GET long on B")
            let ids = try JSON.parse(r.body)["_revisions"]?["ids"]?.arrayValue?.count ?? 0
            guard ids == revisions else { throw HTTPBenchFailure(message: "B has \(ids) revisions of long, expected \(revisions)") }
        }
        steps.append(("long: GET ?revs=true on B (revisions/s)", revisions, readLong))
        let readWide = try measure {
            let r = try connB.request(method: "GET", path: "/deep/wide?conflicts=true")
            try check(r, [200], "GET wide on B")
            let conflicts = try JSON.parse(r.body)["_conflicts"]?.arrayValue?.count ?? 0
            guard conflicts == leaves - 1 else { throw HTTPBenchFailure(message: "B has \(conflicts) conflicts, expected \(leaves - 1)") }
        }
        steps.append(("wide: GET ?conflicts=true on B (leaves/s)", leaves, readWide))
        let compact = try measure {
            try check(try connA.request(method: "POST", path: "/deep/_compact", body: Array("{}".utf8)), [202], "_compact")
            while true {
                let info = try JSON.parse(try connA.request(method: "GET", path: "/deep").body)
                if info["compact_running"]?.boolValue != true { break }
                usleep(2_000)
            }
        }
        steps.append(("both: compaction on A (revisions + leaves/s)", revisions + leaves, compact))
        return steps
    }
    let small = try run(revisions: 1_000, leaves: 100)
    let large = try run(revisions: 10_000, leaves: 1_000)
    for (s, l) in zip(small, large) {
        let rate = Double(l.1) / l.2, baseRate = Double(s.1) / s.2
        report(Figure(workload: "deep", metric: l.0 + " at \(l.1.formatted())", value: rate, baseline: baseRate,
                      baselineName: "same at \(s.1.formatted())", goal: 0.5))
        info(String(format: "deep: %@: %.3f s for %d, %.3f s for %d", l.0, l.2, l.1, s.2, s.1))
    }
}
