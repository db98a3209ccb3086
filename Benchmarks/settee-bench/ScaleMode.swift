// `settee-bench scale`: the main workloads at growing document counts, each in a process of its own, and how
// their figures and memory grow.
//
//   settee-bench scale [--counts 100000,1000000] [--rounds N] [--out DIR] [workload …]
//
// For every count and workload it runs `settee-bench --json --count N --rounds R workload` as a child and
// records every figure it prints and the child's peak RSS (`wait4`'s `ru_maxrss`: the benchmark process with its
// in-memory documents and, for local workloads, the store; workloads that start nodes report the nodes' own peak
// RSS as figures). Writes `scale.md` (the growth table: each figure per count and its ratio largest/smallest)
// and `scale.svg` (each workload's main rate, or its ratio to its baseline when it has one, relative to the
// smallest count, on a log scale of documents: a flat line is a rate that holds) to DIR (default: the current directory), and prints the table.
// 10M documents need ~30 GB for the benchmark's own copy of the documents: documented, not run in CI.
import Foundation
import Glibc
import SetteeCore

/// The workloads `scale` runs when none are named.
let scaleWorkloads = ["insert", "get", "changes", "http-get", "replicate", "query-indexed", "view-build", "find"]

/// Runs scale mode with the arguments after `scale`; exits the process.
func runScaleMode(_ arguments: [String]) -> Never {
    var args = arguments
    func option(_ name: String) -> String? {
        guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
        defer { args.removeSubrange(i...(i + 1)) }
        return args[i + 1]
    }
    let counts = (option("--counts") ?? "100000,1000000").split(separator: ",").compactMap { Int($0) }.sorted()
    let roundsText = option("--rounds") ?? "1"
    let out = option("--out") ?? FileManager.default.currentDirectoryPath
    let workloads = args.isEmpty ? scaleWorkloads : args
    guard !counts.isEmpty else { fail("--counts takes numbers separated by commas") }
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).path

    /// (workload, metric) → value per count; workload → peak RSS KiB per count.
    var values: [String: [Int: Double]] = [:]
    var order: [(workload: String, metric: String)] = []
    var peaks: [String: [Int: Int]] = [:]
    /// (workload, metric) → the figure's ratio to its baseline per count, for figures that have one.
    var ratios: [String: [Int: Double]] = [:]
    for count in counts {
        for workload in workloads {
            FileHandle.standardError.write(Data("scale: \(workload) at \(count) documents…\n".utf8))
            let started = Date()
            guard let (stdout, maxRSS) = runChild(binary, ["--json", "--count", String(count), "--rounds", roundsText, workload]),
                  case .array(let results)? = (try? JSON.parse(stdout))?["results"] else {
                FileHandle.standardError.write(Data("scale: \(workload) at \(count) failed\n".utf8))
                continue
            }
            peaks[workload, default: [:]][count] = maxRSS
            for result in results {
                guard let text = result["metric"]?.stringValue, let value = result["per_second"]?.doubleValue else { continue }
                // Figures that name the count ("1666 rows each", "of 100000 docs") are the same figure at every count.
                let metric = text.replacingOccurrences(of: #"\d{4,}"#, with: "N", options: .regularExpression)
                let key = workload + "\u{1}" + metric
                if values[key] == nil { order.append((workload, metric)) }
                values[key, default: [:]][count] = value
                if let ratio = result["ratio"]?.doubleValue { ratios[key, default: [:]][count] = ratio }
            }
            FileHandle.standardError.write(Data(String(format: "scale: %@ at %d done in %.0f s, peak RSS %d MB\n",
                                                       workload, count, Date().timeIntervalSince(started), maxRSS / 1024).utf8))
        }
    }

    // The table.
    func number(_ v: Double?) -> String {
        guard let v else { return "—" }
        return v >= 100 ? String(Int(v.rounded())) : String(format: "%.2f", v)
    }
    let first = counts.first!, last = counts.last!
    var table = "| workload | figure | " + counts.map { "\($0.formatted()) docs" }.joined(separator: " | ")
        + " | \(last.formatted()) / \(first.formatted()) |\n"
    table += "|---|---|" + String(repeating: "---|", count: counts.count + 1) + "\n"
    for (workload, metric) in order {
        let row = values[workload + "\u{1}" + metric] ?? [:], ratio = ratios[workload + "\u{1}" + metric] ?? [:]
        let growth = row[first].flatMap { a in row[last].map { b in a == 0 ? nil : b / a } } ?? nil
        table += "| \(workload) | \(metric) | "
            + counts.map { c in number(row[c]) + (ratio[c].map { String(format: " (%.2f× baseline)", $0) } ?? "") }
                .joined(separator: " | ")
            + " | \(growth.map { String(format: "%.2f×", $0) } ?? "—") |\n"
    }
    for workload in workloads where peaks[workload] != nil {
        let row = peaks[workload]!
        let growth = row[first].flatMap { a in row[last].map { b in Double(b) / Double(max(a, 1)) } }
        table += "| \(workload) | peak RSS MB of the benchmark process (its copy of the documents; the store too when local) | "
            + counts.map { row[$0].map { String($0 / 1024) } ?? "—" }.joined(separator: " | ")
            + " | \(growth.map { String(format: "%.2f×", $0) } ?? "—") |\n"
    }
    print(table)

    // The plot: each workload's first rate figure (not a memory one), relative to its value at the smallest count;
    // a figure with a baseline in the same run (raw SQLite) is plotted by its ratio to it, which is what holds or
    // not (a query returning 10× the rows runs at a tenth of the rate on both sides).
    var series: [(name: String, points: [(Int, Double)])] = []
    for workload in workloads {
        guard let (w, metric) = order.first(where: { $0.workload == workload && !$0.metric.contains("RSS") }),
              let row = ratios[w + "\u{1}" + metric] ?? values[w + "\u{1}" + metric], let base = row[first], base > 0
        else { continue }
        series.append((workload, counts.compactMap { c in row[c].map { (c, $0 / base) } }))
    }
    let svg = scalePlot(series, counts: counts)
    do {
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try Data(table.utf8).write(to: URL(fileURLWithPath: out).appendingPathComponent("scale.md"))
        try Data(svg.utf8).write(to: URL(fileURLWithPath: out).appendingPathComponent("scale.svg"))
    } catch {
        fail("can't write to \(out): \(error)")
    }
    FileHandle.standardError.write(Data("scale: wrote \(out)/scale.md and \(out)/scale.svg\n".utf8))
    exit(0)
}

private func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("settee-bench scale: \(message)\n".utf8))
    exit(2)
}

/// Runs `binary` with `arguments` (stderr shared), returning its standard output and peak RSS in KiB, or nil if it
/// failed. `posix_spawn`, not Foundation's `Process` (which over-reads `/proc/self/fd` entries on Linux).
private func runChild(_ binary: String, _ arguments: [String]) -> (String, Int)? {
    var pipeFDs: [Int32] = [0, 0]
    guard pipe(&pipeFDs) == 0 else { return nil }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
    posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
    posix_spawn_file_actions_addclose(&actions, pipeFDs[1])
    let argv = ([binary] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, binary, &actions, nil, argv, environ)
    close(pipeFDs[1])
    guard rc == 0 else { close(pipeFDs[0]); return nil }
    var output: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(pipeFDs[0], $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { break }
        output += chunk[..<n]
    }
    close(pipeFDs[0])
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
    guard status == 0 else { return nil }
    return (String(decoding: output, as: UTF8.self), Int(usage.ru_maxrss))
}

/// An SVG line chart: x = documents (log scale), y = rate relative to the smallest count (log scale, 1 = flat).
func scalePlot(_ series: [(name: String, points: [(Int, Double)])], counts: [Int]) -> String {
    let width = 720.0, height = 420.0, left = 70.0, right = 170.0, top = 30.0, bottom = 50.0
    let plotW = width - left - right, plotH = height - top - bottom
    let xs = counts.map { log10(Double($0)) }
    let (xMin, xMax) = (xs.min()!, max(xs.max()!, xs.min()! + 1))
    let ys = series.flatMap { $0.points.map { log10($0.1) } } + [log10(0.25), log10(2)]
    let (yMin, yMax) = (ys.min()!, ys.max()!)
    func x(_ count: Int) -> Double { left + (log10(Double(count)) - xMin) / (xMax - xMin) * plotW }
    func y(_ ratio: Double) -> Double { top + (yMax - log10(ratio)) / (yMax - yMin) * plotH }
    let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    var svg = """
    <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="12">
    <rect width="100%" height="100%" fill="white"/>
    <text x="\(left)" y="18" font-size="14">Rate relative to \(counts.first!.formatted()) documents (1 = holds)</text>

    """
    for ratio in [0.25, 0.5, 1, 2] where log10(ratio) >= yMin && log10(ratio) <= yMax {
        let yy = y(ratio)
        svg += "<line x1=\"\(left)\" y1=\"\(yy)\" x2=\"\(left + plotW)\" y2=\"\(yy)\" stroke=\"\(ratio == 1 ? "#444" : "#ddd")\"/>"
        svg += "<text x=\"\(left - 8)\" y=\"\(yy + 4)\" text-anchor=\"end\">\(ratio)×</text>\n"
    }
    for count in counts {
        svg += "<text x=\"\(x(count))\" y=\"\(top + plotH + 20)\" text-anchor=\"middle\">\(count.formatted())</text>\n"
    }
    svg += "<text x=\"\(left + plotW / 2)\" y=\"\(height - 12)\" text-anchor=\"middle\">documents</text>\n"
    for (i, s) in series.enumerated() {
        let color = colors[i % colors.count]
        let path = s.points.map { "\(x($0.0)),\(y($0.1))" }.joined(separator: " ")
        svg += "<polyline points=\"\(path)\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\"/>"
        for p in s.points { svg += "<circle cx=\"\(x(p.0))\" cy=\"\(y(p.1))\" r=\"3\" fill=\"\(color)\"/>" }
        let ly = top + 10 + Double(i) * 18
        svg += "<line x1=\"\(left + plotW + 15)\" y1=\"\(ly)\" x2=\"\(left + plotW + 35)\" y2=\"\(ly)\" stroke=\"\(color)\" stroke-width=\"2\"/>"
        let lastRatio = s.points.last.map { String(format: " %.2f×", $0.1) } ?? ""
        svg += "<text x=\"\(left + plotW + 40)\" y=\"\(ly + 4)\">\(s.name)\(lastRatio)</text>\n"
    }
    return svg + "</svg>\n"
}
