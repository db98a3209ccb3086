import Foundation
import HTTPTypes
import Hummingbird
import SetteeCore

/// The node's status from its Prometheus metrics (`/_metrics`): the at-a-glance figures on the databases and
/// metrics pages, and every series on the metrics page (`/_utils/metrics`).
extension AdminUI {
    /// Prometheus samples from `/_metrics`: (name, labels, value).
    func samples() async -> [(name: String, labels: String, value: Double)]? {
        let result = await api(.get, ["_metrics"])
        guard result.ok else { return nil }
        var out: [(String, String, Double)] = []
        for line in result.text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            let series = line[..<space]
            if let brace = series.firstIndex(of: "{") {
                out.append((String(series[..<brace]), String(series[brace...]), value))
            } else {
                out.append((String(series), "", value))
            }
        }
        return out
    }

    /// The at-a-glance figures: requests, errors, documents written and read, open databases, auth failures, uptime.
    func glance() async -> [GlanceItem] {
        guard let samples = await samples() else { return [] }
        func sum(_ name: String, _ filter: (String) -> Bool = { _ in true }) -> Double {
            samples.filter { $0.name == name && filter($0.labels) }.reduce(0) { $0 + $1.value }
        }
        func n(_ v: Double) -> String { v == v.rounded() ? String(Int64(v)) : String(format: "%.2f", v) }
        let uptime = Date().timeIntervalSince(call.node.startTime)
        return [
            GlanceItem(label: "HTTP requests", value: n(sum("settee_http_requests_total"))),
            GlanceItem(label: "errors (4xx / 5xx)", value: "\(n(sum("settee_http_requests_total") { $0.contains("status=\"4") })) / \(n(sum("settee_http_requests_total") { $0.contains("status=\"5") }))"),
            GlanceItem(label: "documents written", value: n(sum("settee_documents_written_total"))),
            GlanceItem(label: "documents read", value: n(sum("settee_documents_read_total"))),
            GlanceItem(label: "open databases", value: n(sum("settee_open_databases"))),
            GlanceItem(label: "auth failures", value: n(sum("settee_auth_failures_total"))),
            GlanceItem(label: "uptime", value: uptime < 3600 ? "\(Int(uptime / 60)) min" : String(format: "%.1f h", uptime / 3600)),
        ]
    }

    func metrics() async throws -> Response {
        guard let samples = await samples() else { return try errorPage(await api(.get, ["_metrics"]), title: "Metrics") }
        let rows = samples.filter { !$0.name.hasSuffix("_bucket") }.map { s in
            MetricSample(name: s.name, labels: s.labels,
                         value: s.value == s.value.rounded() && abs(s.value) < 1e15 ? String(Int64(s.value)) : String(format: "%.6g", s.value))
        }
        let glance = await glance()
        return try page("metrics", title: "Metrics", MetricsPage(glance: glance, hasGlance: !glance.isEmpty, samples: rows), nav: "metrics")
    }
}
