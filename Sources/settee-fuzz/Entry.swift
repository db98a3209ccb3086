// Two builds of one target:
//
// - Normal (`swift build`): the `settee-fuzz` command, a replay tool that runs saved inputs (the seed corpora in
//   Fuzz/corpus, crash reproducers) through a target: `settee-fuzz replay <target|all> <file or directory>…`.
// - Fuzzing (`-Xswiftc -DSETTEE_FUZZING -Xswiftc -sanitize=fuzzer`, see scripts/fuzz.sh): `main` starts
//   libFuzzer's driver, which calls `LLVMFuzzerTestOneInput` for every input; the target is chosen by the
//   environment variable SETTEE_FUZZ_TARGET.

#if SETTEE_FUZZING

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The target named by SETTEE_FUZZ_TARGET, read once.
let selectedTarget: FuzzTarget = {
    guard let raw = getenv("SETTEE_FUZZ_TARGET"), let target = FuzzTarget(rawValue: String(cString: raw)) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        let message = Array("settee-fuzz: set SETTEE_FUZZ_TARGET to one of: \(names)\n".utf8)
        _ = message.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        exit(2)
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let buffer = UnsafeRawBufferPointer(start: size > 0 ? data : nil, count: size)
    selectedTarget.run(buffer)
    return 0
}

/// libFuzzer's driver (`int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*cb)(const uint8_t *, size_t))`).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// SwiftPM links an executable target's entry point under its own name (it renames `main` so tests can link the
/// module), so the target keeps a `@main` in both builds; in the fuzzing build it hands over to libFuzzer's driver,
/// which parses libFuzzer's usual command line.
@main
struct SetteeFuzzDriver {
    static func main() {
        _ = selectedTarget  // fail early on a missing or unknown SETTEE_FUZZ_TARGET
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzTestOneInput))
    }
}

#else

import Foundation

@main
struct SetteeFuzz {
    static let usage = """
        usage: settee-fuzz replay <target|all> <file or directory>…
               settee-fuzz list

        Runs every input file through a fuzz target (\(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))).
        With `all`, each directory argument must contain one subdirectory per target (like Fuzz/corpus).
        A crash or a failed invariant traps; otherwise prints how many inputs ran. Set SETTEE_FUZZ_VERBOSE=1 to name
        each input on stderr before running it (to see which one trapped).
        To fuzz, build with scripts/fuzz.sh.
        """

    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        switch arguments.first {
        case "list":
            for target in FuzzTarget.allCases { print(target.rawValue) }
        case "replay" where arguments.count >= 3:
            let paths = Array(arguments.dropFirst(2))
            if arguments[1] == "all" {
                var total = 0
                for target in FuzzTarget.allCases {
                    total += replay(target, paths.map { ($0 as NSString).appendingPathComponent(target.rawValue) })
                }
                print("settee-fuzz: \(total) inputs replayed, no failures")
            } else if let target = FuzzTarget(rawValue: arguments[1]) {
                let count = replay(target, paths)
                print("settee-fuzz: \(count) inputs replayed, no failures")
            } else {
                fail("unknown target \(arguments[1])")
            }
        default:
            fail(usage)
        }
    }

    /// Runs every file under `paths` through `target`; returns how many ran.
    static func replay(_ target: FuzzTarget, _ paths: [String]) -> Int {
        var count = 0
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { fail("no such file: \(path)") }
            let files: [String]
            if isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                files = names.filter { !$0.hasPrefix(".") }.sorted().map { (path as NSString).appendingPathComponent($0) }
            } else {
                files = [path]
            }
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { fail("cannot read \(file)") }
                // With SETTEE_FUZZ_VERBOSE set, named on stderr first, so a trap points at its input.
                if verbose { FileHandle.standardError.write(Data("\(target.rawValue): \(file)\n".utf8)) }
                data.withUnsafeBytes { target.run($0) }
                count += 1
            }
        }
        print("\(target.rawValue): \(count) inputs")
        return count
    }

    static let verbose = ProcessInfo.processInfo.environment["SETTEE_FUZZ_VERBOSE"] != nil

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("settee-fuzz: \(message)\n".utf8))
        exit(2)
    }
}

#endif
