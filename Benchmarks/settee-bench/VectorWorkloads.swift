// The `vector` workload: IVF recall@10 and single-thread queries/s, through the index API and through SQL++, on
// seeded Gaussian-mixture vectors (exact ground truth computed here) and on the MiniLM embeddings of
// ../shared/data/minilm when present; FAISS (PyPI faiss-cpu) measured on the same data in the same run.
import Foundation
import SetteeCore
import SetteeIndex
import SetteeQuery
import SetteeSQLPP
import SetteeStore
import SetteeVector

let vectorWorkloads = ["vector"]

/// A vector data set: row-major base and query vectors and the exact 10 nearest base rows of each query.
struct VectorDataSet {
    let name: String
    let dimensions: Int
    let base: [Float]
    let queries: [Float]
    let truth: [[Int32]]
    var count: Int { base.count / dimensions }
    var queryCount: Int { queries.count / dimensions }
    func query(_ i: Int) -> ArraySlice<Float> { queries[(i * dimensions)..<((i + 1) * dimensions)] }
}

/// `n` vectors from a mixture of `components` Gaussians (means spread N(0, 1), spread σ around each), seeded.
func gaussianMixture(n: Int, queries: Int, dimensions d: Int, components: Int, sigma: Float, seed: UInt64) -> ([Float], [Float]) {
    var rng = SeededGenerator(seed: seed)
    func normal() -> Float {
        let u1 = max(Double(rng.next() >> 11) / 9_007_199_254_740_992.0, 1e-300)
        let u2 = Double(rng.next() >> 11) / 9_007_199_254_740_992.0
        return Float((-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2))
    }
    let means = (0..<(components * d)).map { _ in normal() }
    func draw(_ count: Int) -> [Float] {
        var out = [Float](repeating: 0, count: count * d)
        for i in 0..<count {
            let c = Int(rng.next() % UInt64(components))
            for j in 0..<d { out[i * d + j] = means[c * d + j] + sigma * normal() }
        }
        return out
    }
    let base = draw(n)
    return (base, draw(queries))
}

/// Exact k nearest (squared L2) of each query by brute force on every core; also returns the brute-force rate.
func exactNeighbours(base: [Float], queries: [Float], dimensions d: Int, k: Int) -> ([[Int32]], Double) {
    let n = base.count / d, q = queries.count / d
    final class Box: @unchecked Sendable { var rows: [[Int32]]; init(_ n: Int) { rows = Array(repeating: [], count: n) } }
    let box = Box(q)
    let lock = NSLock()
    let seconds = measure {
        base.withUnsafeBufferPointer { b in
            queries.withUnsafeBufferPointer { qs in
                let bp = Unchecked(b.baseAddress!), qp = Unchecked(qs.baseAddress!)
                DispatchQueue.concurrentPerform(iterations: q) { i in
                    var heap: [(Float, Int32)] = []
                    heap.reserveCapacity(k + 1)
                    for j in 0..<n {
                        let dist = VectorDistance.euclideanSquared(qp.value + i * d, bp.value + j * d, count: d)
                        if heap.count < k || dist < heap[heap.count - 1].0 {
                            let at = heap.firstIndex { $0.0 > dist } ?? heap.count
                            heap.insert((dist, Int32(j)), at: at)
                            if heap.count > k { heap.removeLast() }
                        }
                    }
                    let row = heap.map(\.1)
                    lock.withLock { box.rows[i] = row }
                }
            }
        }
    }
    return (box.rows, Double(q) / seconds * 1 / Double(ProcessInfo.processInfo.activeProcessorCount))
}

struct Unchecked<T>: @unchecked Sendable { let value: T; init(_ v: T) { value = v } }

func readVecs(_ path: String) -> (dimensions: Int, rows: [[UInt8]])? {
    guard let data = FileManager.default.contents(atPath: path), data.count >= 4 else { return nil }
    var rows: [[UInt8]] = []
    var offset = 0
    var d = 0
    while offset + 4 <= data.count {
        d = Int(data[offset..<(offset + 4)].withUnsafeBytes { $0.loadUnaligned(as: Int32.self) })
        let start = offset + 4, end = start + 4 * d
        guard d > 0, end <= data.count else { return nil }
        rows.append(Array(data[start..<end]))
        offset = end
    }
    return (d, rows)
}

func floats(_ rows: [[UInt8]]) -> [Float] {
    var out: [Float] = []
    for r in rows { r.withUnsafeBytes { out.append(contentsOf: $0.bindMemory(to: Float.self)) } }
    return out
}

func writeVecs<T>(_ path: String, _ values: [T], dimensions d: Int) {
    var data = Data()
    let rows = values.count / d
    for i in 0..<rows {
        var dim = Int32(d)
        withUnsafeBytes(of: &dim) { data.append(contentsOf: $0) }
        values[(i * d)..<((i + 1) * d)].withUnsafeBytes { data.append(contentsOf: $0) }
    }
    _ = FileManager.default.createFile(atPath: path, contents: data)
}

func loadMiniLM() -> VectorDataSet? {
    let env = ProcessInfo.processInfo.environment["SETTEE_MINILM"]
    let cwd = FileManager.default.currentDirectoryPath
    for dir in [env, cwd + "/../shared/data/minilm", cwd + "/../../shared/data/minilm"].compactMap({ $0 }) {
        guard let base = readVecs(dir + "/base.fvecs"), let queries = readVecs(dir + "/queries.fvecs"),
              let gt = readVecs(dir + "/gt.ivecs") else { continue }
        let truth = gt.rows.map { row in row.withUnsafeBytes { Array($0.bindMemory(to: Int32.self).prefix(10)) } }
        return VectorDataSet(name: "MiniLM \(base.rows.count)×\(base.dimensions)", dimensions: base.dimensions,
                             base: floats(base.rows), queries: floats(queries.rows), truth: truth)
    }
    return nil
}

/// One recall/QPS point.
struct VectorPoint { let encoding: String; let nprobe: Int; let recall: Double; let qps: Double }

func recall(_ found: [[Int64]], _ truth: [[Int32]], k: Int = 10) -> Double {
    var hits = 0
    for (f, t) in zip(found, truth) { hits += Set(f.prefix(k)).intersection(t.prefix(k).map(Int64.init)).count }
    return Double(hits) / Double(truth.count * k)
}

/// FAISS on the same data (Benchmarks/scripts/faiss_baseline.py), or nil with the reason printed.
func faissBaseline(_ data: VectorDataSet, nlist: Int, nprobes: [Int], workDir: String) -> [String: Any]? {
    let dir = workDir + "/faiss-\(data.dimensions)"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    writeVecs(dir + "/base.fvecs", data.base, dimensions: data.dimensions)
    writeVecs(dir + "/queries.fvecs", data.queries, dimensions: data.dimensions)
    writeVecs(dir + "/gt.ivecs", data.truth.flatMap { $0 }, dimensions: 10)
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/faiss_baseline.py").path
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", script, "--base", dir + "/base.fvecs", "--queries", dir + "/queries.fvecs",
                         "--gt", dir + "/gt.ivecs", "--nlist", "\(nlist)", "--nprobes", nprobes.map(String.init).joined(separator: ",")]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { print("vector   FAISS baseline not run: \(error)"); return nil }
    let out = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard let json = try? JSONSerialization.jsonObject(with: out) as? [String: Any] else {
        print("vector   FAISS baseline failed (python3 with faiss-cpu and numpy needed: pip install faiss-cpu)")
        return nil
    }
    if let error = json["error"] as? String { print("vector   FAISS baseline skipped: \(error)"); return nil }
    return json
}

@MainActor func runVectorWorkloads(workDir: String, count: Int) throws {
    let nprobes = [1, 4, 8, 16, 32]
    var sets: [VectorDataSet] = []
    let n = max(1_000, count)
    let (base, queries) = gaussianMixture(n: n, queries: 1_000, dimensions: 128, components: 1_000, sigma: 0.5, seed: 42)
    let (truth, bruteRate) = exactNeighbours(base: base, queries: queries, dimensions: 128, k: 10)
    sets.append(VectorDataSet(name: "Gaussian mixture \(n)×128", dimensions: 128, base: base, queries: queries, truth: truth))
    if !jsonOutput { print("vector   brute-force exact search (one core): \(Int(bruteRate)) queries/s on \(n)×128") }
    if let minilm = loadMiniLM() { sets.append(minilm) } else if !jsonOutput { print("vector   MiniLM embeddings not found: skipped") }
    var csv = "dataset,engine,encoding,nprobe,recall,qps\n"

    for data in sets {
        let centroids = Int(Double(data.count).squareRoot().rounded())
        let tag = data.dimensions == 128 ? "" : " (MiniLM)"
        if !jsonOutput { print("vector   \(data.name), \(centroids) centroids, \(data.queryCount) queries") }
        let faiss = faissBaseline(data, nlist: centroids, nprobes: nprobes, workDir: workDir)
        for (name, encoding) in [("sq8", VectorEncoding.scalarQuantizer(bits: 8)), ("none", VectorEncoding.none)] {
            // Index API: train on up to 256 × centroids vectors, add every vector, search one query at a time.
            let ivf = try IVFIndex(dimensions: data.dimensions, centroids: centroids, metric: .euclideanSquared, encoding: encoding)
            let sampleSize = min(data.count, 256 * centroids)
            let trainSeconds = try measure {
                try data.base.withUnsafeBufferPointer { all in
                    try ivf.train(UnsafeBufferPointer(rebasing: all[0..<(sampleSize * data.dimensions)]), seed: 7,
                                  parallel: { n, body in DispatchQueue.concurrentPerform(iterations: n, execute: body) })
                    for i in 0..<data.count {
                        try ivf.add(id: Int64(i), vector: UnsafeBufferPointer(rebasing: all[(i * data.dimensions)..<((i + 1) * data.dimensions)]))
                    }
                }
            }
            if !jsonOutput {
                let goal = data.dimensions == 128 && data.count == 100_000 ? "   goal ≤ 3 s \(trainSeconds <= 3 ? "✓" : "✗")" : ""
                print("vector   \(name)\(tag) train + add \(data.count) vectors: \(String(format: "%.2f", trainSeconds)) s\(goal)")
            }
            let faissPoints = (faiss?["encodings"] as? [String: Any])?[name] as? [String: Any]
            for nprobe in nprobes {
                var found: [[Int64]] = []
                var seconds = Double.infinity
                for _ in 0..<max(1, rounds) {
                    var round: [[Int64]] = []
                    round.reserveCapacity(data.queryCount)
                    let t = try measure {
                        for i in 0..<data.queryCount {
                            let q = data.query(i)
                            round.append(try q.withUnsafeBufferPointer { try ivf.search($0, k: 10, nprobes: nprobe).map(\.id) })
                        }
                    }
                    if t < seconds { seconds = t; found = round }
                }
                let qps = Double(data.queryCount) / seconds
                let r = recall(found, data.truth)
                csv += "\(data.name),settee,\(name),\(nprobe),\(r),\(qps)\n"
                var baseline: Double?
                var baselineName: String?
                if let points = faissPoints?["points"] as? [[String: Any]],
                   let p = points.first(where: { ($0["nprobe"] as? Int) == nprobe }),
                   let fq = p["qps"] as? Double, let fr = p["recall"] as? Double {
                    baseline = fq
                    baselineName = "FAISS IVF-\(name == "sq8" ? "SQ8" : "Flat") (recall \(String(format: "%.3f", fr)))"
                    csv += "\(data.name),faiss,\(name),\(nprobe),\(fr),\(fq)\n"
                }
                let goal: Double? = (data.dimensions == 128 && name == "sq8" && nprobe == 8) ? (baseline == nil ? 6_000 : 0.5) : nil
                report(Figure(workload: "vector", metric: "\(name)\(tag) nprobe \(nprobe) recall@10 \(String(format: "%.3f", r)) queries", value: qps,
                              baseline: baseline, baselineName: baselineName, goal: goal))
            }
            if let ft = faissPoints?["train_seconds"] as? Double, !jsonOutput {
                print("vector   \(name)\(tag) FAISS train + add: \(String(format: "%.2f", ft)) s")
            }
        }
    }

    // The SQL++ path on the Gaussian set: documents with a `vector` member, a vector index built by the index
    // manager (training included), `ORDER BY APPROX_VECTOR_DISTANCE … LIMIT 10` one query at a time.
    let data = sets[0]
    let db = try Database(name: "vector-bench", config: DatabaseConfiguration(directory: workDir))
    defer { db.close() }
    let c = try db.defaultCollection()
    for start in stride(from: 0, to: data.count, by: 2_000) {
        let writes = (start..<min(data.count, start + 2_000)).map { i in
            RevisionWrite(id: "v\(i)", body: ["n": .int(Int64(i)),
                                             "vector": .array(data.base[(i * 128)..<((i + 1) * 128)].map { .double(Double($0)) })],
                          mode: .edit(parent: nil))
        }
        for r in try c.write(writes) { _ = try r.get() }
    }
    try IndexManager.shared(for: db).isBackgroundEnabled = false
    let centroids = UInt32(Double(data.count).squareRoot().rounded())
    let config = VectorIndexConfiguration(expression: "vector", dimensions: 128, centroids: centroids)
    let build = try measure { try c.createIndex(withName: "vec", config: config) }
    if !jsonOutput { print("vector   SQL++ index build incl. training, \(data.count) docs: \(String(format: "%.2f", build)) s") }
    let query = try db.createQuery("SELECT META().id FROM _ ORDER BY APPROX_VECTOR_DISTANCE(vector, $v, 'L2_SQUARED', 8) LIMIT 10")
    let plan = try query.explain()
    precondition(plan.contains("vector index vec"), plan)
    let params = (0..<data.queryCount).map { i in Parameters(["v": .array(data.query(i).map { .double(Double($0)) })]) }
    var found: [[Int64]] = []
    let t = try best { _ in
        found = []
        return try measure {
            for p in params {
                query.parameters = p
                found.append(try query.execute().compactMap { $0.string(forKey: "id").flatMap { Int64($0.dropFirst()) } })
            }
        }
    }
    let sqlRecall = recall(found, data.truth)
    report(Figure(workload: "vector", metric: "SQL++ sq8 nprobe 8 LIMIT 10, recall@10 \(String(format: "%.3f", sqlRecall)) queries",
                  value: Double(data.queryCount) / t, baseline: nil, baselineName: nil, goal: 1_500))
    let csvPath = ProcessInfo.processInfo.environment["SETTEE_VECTOR_CSV"] ?? (workDir + "/vector.csv")
    try csv.write(toFile: csvPath, atomically: true, encoding: .utf8)
    if !jsonOutput { print("vector   recall/QPS points written to \(csvPath)") }
}
