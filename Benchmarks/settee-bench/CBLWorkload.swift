// cbl: Couchbase Lite, side by side (issue 45).
//
// Settee's port of `../shared/cblite/tools/cbl-bench.c` through the public Swift API, as a Couchbase Lite app
// writes it (`Database`, `inBatch`, `MutableDocument`, `save`, `document(id:)`, `ValueIndexConfiguration`,
// `createQuery` with `Parameters`, `FullTextIndexConfiguration`, `MATCH`), and the real `cbl-bench` (Couchbase Lite
// C 3.2.4), built with its `build.sh` into a temporary folder, run alternately with the same parameters:
// `--count` is cbl-bench's `--docs` (default 100,000), 200 queries, seed 42. Each round runs cbl-bench, then the
// port; each figure is the best over `--rounds` (the database size and peak RSS: the smallest). The two hold
// identical documents (the same xorshift64* generator, the same order of draws): the checksum of the ages read
// back must match, and the rows each query returns too, or the workload fails.
//
// Where cbl-bench comes from: $SETTEE_CBLITE_DIR, else ../shared/cblite from the working directory, else from the
// executable's folder (…/.build/release → ../../../shared/cblite). Without gcc or the library the port runs alone.
//
// (`import Settee` re-exports exactly the modules below; settee-bench's target depends on them, not on the umbrella
// product, so they are imported one by one. The API used is the same.)
import Foundation
import SetteeCore
import SetteeIndex
import SetteeQuery
import SetteeSQLPP
import SetteeStore

let cblWorkloads = ["cbl"]

// MARK: - cbl-bench's data, ported

/// cbl-bench's `rnd()`: xorshift64*, seeded with `seed * 0x9E3779B97F4A7C15` (1 for seed 0).
struct CBLBenchRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed != 0 ? seed &* 0x9E37_79B9_7F4A_7C15 : 1 }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
    /// `rnd_below(n)`.
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}

enum CBLBenchData {
    static let first = [
        "Olivia", "Liam", "Emma", "Noah", "Amelia", "Oliver", "Ava", "Elijah", "Sophia", "Mateo",
        "Isabella", "Lucas", "Mia", "Levi", "Charlotte", "Asher", "Harper", "James", "Evelyn", "Leo",
        "Luna", "Grayson", "Ella", "Ezra", "Aria", "Hudson", "Nora", "Jack", "Hazel", "Aiden",
        "Chloe", "Kai", "Layla", "Omar", "Yuki", "Priya", "Chen", "Fatima", "Ivan", "Zofia"]
    static let last = [
        "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez",
        "Martinez", "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor",
        "Moore", "Jackson", "Martin", "Lee", "Perez", "Thompson", "White", "Harris", "Sanchez",
        "Clark", "Ramirez", "Lewis", "Robinson", "Nakamura", "Kowalski", "Okafor", "Singh", "Muller",
        "Rossi", "Dubois", "Novak", "Hansen", "Silva"]
    static let cities = [
        "Amsterdam", "Athens", "Auckland", "Austin", "Bangkok", "Barcelona", "Beijing", "Berlin",
        "Bogota", "Boston", "Brussels", "Budapest", "Buenos Aires", "Cairo", "Cape Town", "Chicago",
        "Copenhagen", "Dallas", "Delhi", "Denver", "Dubai", "Dublin", "Edinburgh", "Florence",
        "Frankfurt", "Geneva", "Hamburg", "Helsinki", "Hong Kong", "Honolulu", "Houston", "Istanbul",
        "Jakarta", "Johannesburg", "Karachi", "Kyoto", "Lagos", "Lima", "Lisbon", "London",
        "Los Angeles", "Lyon", "Madrid", "Manchester", "Manila", "Marseille", "Melbourne",
        "Mexico City", "Miami", "Milan", "Montreal", "Moscow", "Mumbai", "Munich", "Nairobi",
        "Naples", "New York", "Nice", "Osaka", "Oslo", "Ottawa", "Paris", "Perth", "Philadelphia",
        "Phoenix", "Porto", "Prague", "Quebec", "Reykjavik", "Riga", "Rio de Janeiro", "Rome",
        "Rotterdam", "San Diego", "San Francisco", "Santiago", "Sao Paulo", "Seattle", "Seoul",
        "Seville", "Shanghai", "Singapore", "Sofia", "Stockholm", "Sydney", "Taipei", "Tallinn",
        "Tel Aviv", "Tokyo", "Toronto", "Turin", "Valencia", "Vancouver", "Venice", "Vienna",
        "Vilnius", "Warsaw", "Washington", "Wellington", "Zurich"]
    static let tags = [
        "sports", "music", "travel", "food", "tech", "art", "books", "movies", "gaming", "fitness",
        "photography", "science", "history", "fashion", "gardening", "cooking", "hiking", "coffee",
        "wine", "dogs", "cats", "cycling", "running", "yoga", "chess"]
    static let adj = [
        "quick", "lazy", "bright", "quiet", "ancient", "modern", "curious", "gentle", "brave",
        "clever", "dusty", "elegant", "fierce", "fragile", "golden", "hidden", "hollow", "humble",
        "icy", "jolly", "lively", "lonely", "massive", "misty", "noisy", "polished", "proud",
        "rapid", "rusty", "silent", "silver", "sleepy", "smooth", "sturdy", "sunny", "tiny",
        "velvet", "vivid", "wild", "wooden"]
    static let noun = [
        "fox", "dog", "river", "mountain", "city", "garden", "library", "engine", "violin",
        "harbor", "forest", "castle", "bridge", "market", "lantern", "compass", "orchard", "island",
        "meadow", "tower", "train", "bicycle", "notebook", "teapot", "window", "painter", "farmer",
        "sailor", "teacher", "doctor", "pilot", "robot", "dragon", "whale", "falcon", "rabbit",
        "tiger", "owl", "glacier", "volcano", "desert", "canyon", "lighthouse", "cathedral",
        "museum", "theater", "bakery", "workshop", "observatory", "telescope"]
    static let verb = [
        "jumps over", "runs past", "watches", "follows", "paints", "builds", "repairs", "visits",
        "explores", "guards", "admires", "chases", "carries", "discovers", "remembers", "ignores",
        "greets", "photographs", "describes", "imagines", "crosses", "climbs", "circles",
        "sketches", "studies"]
    static let adv = [
        "slowly", "quickly", "quietly", "happily", "carefully", "boldly", "eagerly", "gracefully",
        "nervously", "patiently", "proudly", "rarely", "secretly", "suddenly", "warmly"]

    // GCC (x86-64, as build.sh compiles cbl-bench) evaluates a call's arguments right to left, so the draws inside
    // one `snprintf` come last argument first; the port draws in that order to hold the same strings.

    /// `snprintf(name, "%s %s", k_first[rnd_below], k_last[rnd_below])`.
    static func name(_ r: inout CBLBenchRandom) -> String {
        let l = last[r.below(last.count)]
        let f = first[r.below(first.count)]
        return f + " " + l
    }

    /// `make_sentence`: "The quick fox jumps over the misty river slowly near the icy harbor."
    static func sentence(_ r: inout CBLBenchRandom) -> String {
        let n3 = noun[r.below(noun.count)], a3 = adj[r.below(adj.count)]
        let av = adv[r.below(adv.count)], n2 = noun[r.below(noun.count)], a2 = adj[r.below(adj.count)]
        let v = verb[r.below(verb.count)], n1 = noun[r.below(noun.count)], a1 = adj[r.below(adj.count)]
        return "The \(a1) \(n1) \(v) the \(a2) \(n2) \(av) near the \(a3) \(n3)."
    }

    /// The MATCH term of query `i`.
    static func term(_ i: Int) -> String {
        switch i % 4 {
        case 0: return noun[(i / 4) % noun.count]
        case 1: return adj[(i / 4) % adj.count]
        case 2: return "\(adj[(i / 4) % adj.count]) \(noun[(i * 3) % noun.count])"  // implicit AND
        default: return "\(noun[(i * 5) % noun.count])*"  // prefix
        }
    }
}

/// `snprintf(id, "user-%07ld", i)`, without Foundation's `String(format:)` (which costs more than a Settee read).
func cblBenchID(_ i: Int) -> String {
    let digits = String(i)
    return "user-" + String(repeating: "0", count: max(0, 7 - digits.utf8.count)) + digits
}

// MARK: - the figures of one side

/// One run of the workload: cbl-bench's JSON fields, or the port's.
struct CBLBenchResult {
    var insertPerS = 0.0, readPerS = 0.0
    var valueIndexSeconds = 0.0, preparedPerS = 0.0, unpreparedPerS = 0.0
    var fullScanSeconds = 0.0, ftsIndexSeconds = 0.0, matchPerS = 0.0
    var dbBytes = 0, peakRSSKiB = 0
    var count = 0, ageChecksum: Int64 = 0
    var cityRows = 0, unpreparedRows = 0, scanRows = 0, ftsRows = 0
    var cityUsesIndex = false

    /// Best of two runs, figure by figure.
    func merged(_ o: CBLBenchResult) -> CBLBenchResult {
        var m = self
        m.insertPerS = max(insertPerS, o.insertPerS)
        m.readPerS = max(readPerS, o.readPerS)
        m.valueIndexSeconds = min(valueIndexSeconds, o.valueIndexSeconds)
        m.preparedPerS = max(preparedPerS, o.preparedPerS)
        m.unpreparedPerS = max(unpreparedPerS, o.unpreparedPerS)
        m.fullScanSeconds = min(fullScanSeconds, o.fullScanSeconds)
        m.ftsIndexSeconds = min(ftsIndexSeconds, o.ftsIndexSeconds)
        m.matchPerS = max(matchPerS, o.matchPerS)
        m.dbBytes = min(dbBytes, o.dbBytes)
        m.peakRSSKiB = min(peakRSSKiB, o.peakRSSKiB)
        return m
    }
}

/// The total size of the files under a folder.
private func folderBytes(_ path: String) -> Int {
    guard let e = FileManager.default.enumerator(atPath: path) else { return 0 }
    var total = 0
    for case let rel as String in e {
        if let a = try? FileManager.default.attributesOfItem(atPath: path + "/" + rel),
           a[.type] as? FileAttributeType == .typeRegular, let n = a[.size] as? NSNumber {
            total += n.intValue
            if cblPhaseLog { print("FILE \(rel) \(n.intValue)") }
        }
    }
    return total
}

private let cblPhaseLog = ProcessInfo.processInfo.environment["SETTEE_CBL_DEBUG"] != nil

private func monotonic() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Times a phase; with SETTEE_CBL_DEBUG set, prints its CLOCK_MONOTONIC bounds (for `perf record -k mono` and
/// `perf report --time START,END`).
private func seconds(_ phase: String = "", _ body: () throws -> Void) rethrows -> Double {
    let start = monotonic()
    try body()
    let end = monotonic()
    if cblPhaseLog { print(String(format: "PHASE %@ %.6f %.6f", phase, start, end)) }
    return end - start
}

// MARK: - Settee's port

/// cbl-bench's workload through Settee's Couchbase Lite API, in a fresh database under `dir`.
func runSetteeCBLPort(docs nDocs: Int, queries nQueries: Int, seed: UInt64, dir: String) throws -> CBLBenchResult {
    var out = CBLBenchResult()
    var rng = CBLBenchRandom(seed: seed)
    let debug = ProcessInfo.processInfo.environment["SETTEE_CBL_DEBUG"] != nil
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let database = try Database(name: "bench", config: DatabaseConfiguration(directory: dir))
    defer { database.close() }
    let collection = try database.defaultCollection()

    // 1. insert, one batch
    let insertS = try seconds("insert") {
        try database.inBatch {
            for i in 0..<nDocs {
                let id = cblBenchID(i)
                let name = CBLBenchData.name(&rng)
                let text = CBLBenchData.sentence(&rng)
                if debug && i < 3 { print("DOC \(i) \(name) / \(text)") }
                let doc = MutableDocument(id: id)
                doc.setString(name, forKey: "name")
                doc.setString(CBLBenchData.cities[rng.below(CBLBenchData.cities.count)], forKey: "city")
                doc.setInt(18 + rng.below(73), forKey: "age")
                let tags = MutableArrayObject()
                for _ in 0..<(1 + rng.below(4)) { tags.addString(CBLBenchData.tags[rng.below(CBLBenchData.tags.count)]) }
                doc.setArray(tags, forKey: "tags")
                doc.setString(text, forKey: "text")
                doc.setBoolean(rng.below(10) < 8, forKey: "active")
                try collection.save(document: doc)
            }
        }
    }
    out.insertPerS = Double(nDocs) / insertS
    out.count = Int(collection.count)

    // 2. read every document by id
    var ageSum: Int64 = 0, found = 0
    let readS = try seconds("read") {
        for i in 0..<nDocs {
            guard let doc = try collection.document(id: cblBenchID(i)) else {
                throw CBLBenchUnavailable.missing("document user-\(i) not found")
            }
            ageSum += Int64(doc.int(forKey: "age"))
            found += 1
        }
    }
    out.readPerS = Double(found) / readS
    out.ageChecksum = ageSum

    /// Runs a query, walks every row touching column 0 (as cbl-bench does); returns the row count.
    func run(_ q: Query) throws -> Int {
        var rows = 0, bytes = 0
        for r in try q.execute() {
            bytes &+= r.string(at: 0)?.utf8.count ?? 0
            rows += 1
        }
        precondition(bytes >= 0)
        return rows
    }

    // 3. value index + prepared equality queries, then a new query each time
    out.valueIndexSeconds = try seconds("value-index") {
        try collection.createIndex(withName: "idx_city", config: ValueIndexConfiguration(["city"]))
    }
    let qcity = try database.createQuery("SELECT META().id, name, age FROM _ WHERE city = $city")
    out.cityUsesIndex = try qcity.explain().contains("idx_city")
    let cityS = try seconds("prepared") {
        for i in 0..<nQueries {
            let p = Parameters()
            p.setString(CBLBenchData.cities[i % CBLBenchData.cities.count], forName: "city")
            qcity.parameters = p
            out.cityRows += try run(qcity)
        }
    }
    out.preparedPerS = Double(nQueries) / cityS
    let city2S = try seconds("unprepared") {
        for i in 0..<nQueries {
            let city = CBLBenchData.cities[(i * 7) % CBLBenchData.cities.count]
            let q = try database.createQuery("SELECT META().id, name, age FROM _ WHERE city = '\(city)'")
            out.unpreparedRows += try run(q)
        }
    }
    out.unpreparedPerS = Double(nQueries) / city2S

    // 4. one full-scan query (age is not indexed); the query is compiled before the clock starts, as in cbl-bench
    let qscan = try database.createQuery("SELECT META().id, name, city FROM _ WHERE age BETWEEN 30 AND 39 AND active = true")
    out.fullScanSeconds = try seconds("full-scan") { out.scanRows = try run(qscan) }

    // 5. full-text index + MATCH queries
    out.ftsIndexSeconds = try seconds("fts-index") {
        try collection.createIndex(withName: "idx_text",
                                   config: FullTextIndexConfiguration(["text"], ignoreAccents: false, language: "en"))
    }
    let qfts = try database.createQuery("SELECT META().id FROM _ WHERE MATCH(idx_text, $term)")
    let ftsS = try seconds("match") {
        for i in 0..<nQueries {
            let p = Parameters()
            p.setString(CBLBenchData.term(i), forName: "term")
            qfts.parameters = p
            out.ftsRows += try run(qfts)
        }
    }
    out.matchPerS = Double(nQueries) / ftsS
    out.dbBytes = folderBytes(dir)
    return out
}

// MARK: - cbl-bench itself

enum CBLBenchUnavailable: Error, CustomStringConvertible {
    case missing(String)
    var description: String { if case .missing(let why) = self { return why }; return "" }
}

/// The Couchbase Lite C folder (`include`, `lib`, `tools`).
private func cbliteDirectory() -> String? {
    var candidates: [String] = []
    if let env = ProcessInfo.processInfo.environment["SETTEE_CBLITE_DIR"] { candidates.append(env) }
    candidates.append(FileManager.default.currentDirectoryPath + "/../shared/cblite")
    let exe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    candidates.append(exe.appendingPathComponent("../../../shared/cblite").standardized.path)
    return candidates.first { FileManager.default.fileExists(atPath: $0 + "/tools/build.sh") }
}

/// Runs a program to completion with stdout and stderr in files; returns the exit status and the child's peak
/// resident set (wait4's `ru_maxrss`, KiB).
private func spawn(_ argv: [String], stdout: String, stderr: String) throws -> (status: Int32, maxRSSKiB: Int) {
    var actions: posix_spawn_file_actions_t = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    var cargs = argv.map { strdup($0) } + [nil]
    defer { for p in cargs { free(p) } }
    var pid: pid_t = 0
    let rc = posix_spawnp(&pid, argv[0], &actions, nil, &cargs, environ)
    guard rc == 0 else { throw CBLBenchUnavailable.missing("cannot start \(argv[0]): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
    let exited = (status & 0x7f) == 0
    return (exited ? (status >> 8) & 0xff : 128 + (status & 0x7f), Int(usage.ru_maxrss))
}

/// Builds cbl-bench into `outDir` with the library's own build.sh; returns the program's path.
func buildCBLBench(outDir: String) throws -> String {
    guard let root = cbliteDirectory() else {
        throw CBLBenchUnavailable.missing("Couchbase Lite C not found (../shared/cblite, or set SETTEE_CBLITE_DIR)")
    }
    guard FileManager.default.fileExists(atPath: root + "/lib/libcblite.so.3") else {
        throw CBLBenchUnavailable.missing("\(root)/lib/libcblite.so.3 is missing")
    }
    let gcc = try spawn(["gcc", "--version"], stdout: "/dev/null", stderr: "/dev/null")
    guard gcc.status == 0 else { throw CBLBenchUnavailable.missing("gcc is not installed") }
    let log = outDir + "/build.log"
    let built = try spawn(["bash", root + "/tools/build.sh", outDir], stdout: log, stderr: log + ".err")
    let program = outDir + "/cbl-bench"
    guard built.status == 0, FileManager.default.isExecutableFile(atPath: program) else {
        let err = (try? String(contentsOfFile: log + ".err", encoding: .utf8)) ?? ""
        throw CBLBenchUnavailable.missing("building cbl-bench failed (exit \(built.status)): \(err)")
    }
    return program
}

/// Runs cbl-bench once and reads its JSON.
func runCBLBench(_ program: String, docs: Int, queries: Int, seed: UInt64, dir: String) throws -> CBLBenchResult {
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let outFile = dir + "/cbl-bench.json", errFile = dir + "/cbl-bench.err"
    let r = try spawn([program, "--docs", "\(docs)", "--queries", "\(queries)", "--seed", "\(seed)", "--dir", dir],
                      stdout: outFile, stderr: errFile)
    let text = (try? String(contentsOfFile: outFile, encoding: .utf8)) ?? ""
    guard r.status == 0, case .object(let o)? = try? JSON.parse(text) else {
        let err = (try? String(contentsOfFile: errFile, encoding: .utf8)) ?? ""
        throw CBLBenchUnavailable.missing("cbl-bench failed (exit \(r.status)): \(err)\(text)")
    }
    func d(_ k: String) -> Double { o[k]?.doubleValue ?? .nan }
    var out = CBLBenchResult()
    out.insertPerS = d("insert_docs_per_s")
    out.readPerS = d("read_docs_per_s")
    out.valueIndexSeconds = d("value_index_create_seconds")
    out.preparedPerS = d("indexed_queries_per_s")
    out.unpreparedPerS = d("indexed_unprepared_queries_per_s")
    out.fullScanSeconds = d("full_scan_ms") / 1000
    out.ftsIndexSeconds = d("fts_index_create_seconds")
    out.matchPerS = d("fts_queries_per_s")
    out.dbBytes = Int(d("db_bytes"))
    out.peakRSSKiB = r.maxRSSKiB
    out.count = Int(d("count_after_insert"))
    out.ageChecksum = o["age_checksum"]?.intValue ?? -1
    out.cityRows = Int((d("indexed_avg_rows") * Double(queries)).rounded())
    out.unpreparedRows = Int((d("indexed_unprepared_avg_rows") * Double(queries)).rounded())
    out.scanRows = Int(d("full_scan_rows"))
    out.ftsRows = Int((d("fts_avg_rows") * Double(queries)).rounded())
    out.cityUsesIndex = o["indexed_query_uses_index"]?.boolValue ?? false
    return out
}

// MARK: - the workload

@MainActor
func runCBLWorkload(count: Int, rounds: Int, workDir: String, jsonOutput: Bool) {
    func info(_ line: String) {
        if jsonOutput { FileHandle.standardError.write(Data((line + "\n").utf8)) } else { print(line) }
    }
    func fail(_ line: String) -> Never {
        FileHandle.standardError.write(Data("settee-bench: cbl FAILED: \(line)\n".utf8))
        exit(1)
    }
    let env = ProcessInfo.processInfo.environment
    let queries = Int(env["SETTEE_CBL_QUERIES"] ?? "") ?? 200
    let seed = UInt64(env["SETTEE_CBL_SEED"] ?? "") ?? 42
    // SETTEE_CBL_SIDE=settee runs only the port (for profiling it), =cbl only cbl-bench.
    let side = env["SETTEE_CBL_SIDE"] ?? "both"

    var program: String?
    if side != "settee" {
        do {
            try FileManager.default.createDirectory(atPath: workDir + "/cbl-tools", withIntermediateDirectories: true)
            program = try buildCBLBench(outDir: workDir + "/cbl-tools")
        } catch {
            info("cbl      Couchbase Lite's cbl-bench is not run: \(error). Settee's figures only, without baselines.")
        }
    }

    var cbl: CBLBenchResult?, settee: CBLBenchResult?
    let me = getpid()
    for round in 0..<rounds {
        if let program {
            do {
                let r = try runCBLBench(program, docs: count, queries: queries, seed: seed, dir: workDir + "/cbl-\(round)")
                cbl = cbl.map { $0.merged(r) } ?? r
                try? FileManager.default.removeItem(atPath: workDir + "/cbl-\(round)")
            } catch {
                fail("\(error)")
            }
        }
        if side == "cbl" { continue }
        let dir = workDir + "/settee-cbl-\(round)"
        resetPeakRSS(me)
        do {
            var r = try runSetteeCBLPort(docs: count, queries: queries, seed: seed, dir: dir)
            r.peakRSSKiB = vmHWM(me)
            settee = settee.map { $0.merged(r) } ?? r
        } catch {
            fail("Settee's port: \(error)")
        }
        try? FileManager.default.removeItem(atPath: dir)
    }

    // The same data and the same answers, or the comparison means nothing.
    if let c = cbl, let s = settee {
        guard c.ageChecksum == s.ageChecksum, c.count == s.count else {
            fail("the data differ: age checksum Couchbase Lite \(c.ageChecksum), Settee \(s.ageChecksum); count \(c.count) vs \(s.count)")
        }
        guard c.cityRows == s.cityRows, c.unpreparedRows == s.unpreparedRows, c.scanRows == s.scanRows else {
            fail("the query answers differ: rows of the prepared queries \(c.cityRows) vs \(s.cityRows), "
                 + "unprepared \(c.unpreparedRows) vs \(s.unpreparedRows), full scan \(c.scanRows) vs \(s.scanRows)")
        }
        info("cbl      same data: age checksum \(s.ageChecksum) on both sides; rows: equality \(s.cityRows), unprepared \(s.unpreparedRows), full scan \(s.scanRows), MATCH \(s.ftsRows) (Couchbase Lite \(c.ftsRows))")
        if c.ftsRows != s.ftsRows {
            info("cbl      note: MATCH returns \(s.ftsRows) rows in Settee and \(c.ftsRows) in Couchbase Lite (tokenizer/stemmer differences)")
        }
        if !c.cityUsesIndex || !s.cityUsesIndex {
            info("cbl      note: the equality query uses the index: Couchbase Lite \(c.cityUsesIndex), Settee \(s.cityUsesIndex)")
        }
    }
    guard let s = settee else {
        if let c = cbl { info("cbl      Couchbase Lite only: \(c)") }
        return
    }
    let name = "Couchbase Lite C"
    let n = Double(count)
    func figure(_ metric: String, _ value: Double, _ base: Double?, goal: Double, unit: String = "/s") {
        var f = Figure(workload: "cbl", metric: metric, value: value, baseline: base, baselineName: base == nil ? nil : name,
                       goal: base == nil ? nil : goal)
        f.unit = unit
        report(f)
    }
    let c = cbl
    figure("insert, one batch (docs)", s.insertPerS, c?.insertPerS, goal: 1.5)
    figure("read every document by id (docs)", s.readPerS, c?.readPerS, goal: 1.5)
    figure(String(format: "value index build, docs indexed (Settee %.3f s, CBL %.3f s)", s.valueIndexSeconds, c?.valueIndexSeconds ?? .nan),
           n / s.valueIndexSeconds, c.map { n / $0.valueIndexSeconds }, goal: 1.0)
    figure("indexed equality query, prepared, ~\(s.cityRows / max(1, queries)) rows (queries)", s.preparedPerS, c?.preparedPerS, goal: 1.0)
    figure("the same, a new query each time (queries)", s.unpreparedPerS, c?.unpreparedPerS, goal: 1.0)
    figure(String(format: "full scan, %d of %d rows, as docs scanned (Settee %.1f ms, CBL %.1f ms)", s.scanRows, count,
                  s.fullScanSeconds * 1000, (c?.fullScanSeconds ?? .nan) * 1000),
           n / s.fullScanSeconds, c.map { n / $0.fullScanSeconds }, goal: 1.5)
    figure(String(format: "full-text index build, docs indexed (Settee %.2f s, CBL %.2f s)", s.ftsIndexSeconds, c?.ftsIndexSeconds ?? .nan),
           n / s.ftsIndexSeconds, c.map { n / $0.ftsIndexSeconds }, goal: 1.0)
    figure("MATCH, ~\(s.ftsRows / max(1, queries)) rows (queries)", s.matchPerS, c?.matchPerS, goal: 1.0)
    var size = Figure(workload: "cbl", metric: "database size (ratio: CBL's ÷ Settee's)", value: Double(s.dbBytes) / 1e6,
                      baseline: c.map { Double($0.dbBytes) / 1e6 }, baselineName: c == nil ? nil : name, goal: c == nil ? nil : 1.0)
    size.unit = "MB"
    size.lowerIsBetter = true
    report(size)
    var rss = Figure(workload: "cbl", metric: "peak RSS of the process (ratio: CBL's ÷ Settee's)", value: Double(s.peakRSSKiB) / 1024,
                     baseline: c.map { Double($0.peakRSSKiB) / 1024 }, baselineName: c == nil ? nil : name, goal: c == nil ? nil : 1.0)
    rss.unit = "MB"
    rss.lowerIsBetter = true
    report(rss)
}
