// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Settee",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "Settee", targets: ["Settee"]),
        .executable(name: "settee", targets: ["settee"]),
        .executable(name: "settee-bench", targets: ["settee-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // System SQLite (libsqlite3-dev). Only SetteeStore imports it.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // Pure: JSON, revision ids and trees, errors. No I/O.
        .target(name: "SetteeCore"),
        // SQLite access, documents, revision trees on disk, change feed.
        .target(name: "SetteeStore", dependencies: ["SetteeCore", "CSQLite"]),
        // Umbrella library for embedders.
        .target(name: "Settee", dependencies: ["SetteeCore", "SetteeStore"]),
        .executableTarget(
            name: "settee",
            dependencies: [
                "Settee",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "settee-bench",
            dependencies: ["SetteeCore", "SetteeStore", "CSQLite"],
            path: "Benchmarks/settee-bench"
        ),
        .testTarget(name: "SetteeCoreTests", dependencies: ["SetteeCore"]),
        .testTarget(name: "SetteeStoreTests", dependencies: ["SetteeStore", "Settee", "settee"]),
        .testTarget(name: "LayeringTests"),
    ],
    swiftLanguageModes: [.v6]
)
