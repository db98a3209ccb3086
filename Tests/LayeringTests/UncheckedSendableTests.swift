import Foundation
import Testing

/// Concurrency the compiler can't check is explained where it is declared (as GRDB does): every
/// `@unchecked Sendable` in Settee's sources carries a `// @unchecked:` comment, in the four lines before it, saying
/// what guards the state or why the type is safe to share. docs/architecture.md ("What owns which state") lists them.
@Suite struct UncheckedSendableTests {
    @Test func everyUncheckedSendableSaysWhy() throws {
        let sources = LayeringTests.root.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        var unexplained: [String] = []
        var count = 0
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift" else { continue }
            let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
            for (i, line) in lines.enumerated() where line.contains("@unchecked Sendable") {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                guard !trimmed.hasPrefix("//") else { continue }
                count += 1
                let before = lines[max(0, i - 4)..<i]
                if !before.contains(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix("// @unchecked:") }) {
                    unexplained.append("\(file.lastPathComponent):\(i + 1): \(trimmed)")
                }
            }
        }
        #expect(count > 0, "found no @unchecked Sendable at all: is the sources path right?")
        #expect(unexplained.isEmpty, "an @unchecked Sendable without a `// @unchecked:` reason:\n\(unexplained.joined(separator: "\n"))")
    }
}
