// swift-tools-version:6.2
import PackageDescription

let package = Package(
    name: "Settee",
    // The releases with the standard library's Mutex and Atomic (the store uses them). Only Linux is built and
    // tested here; docs/coming-from-couchbase-lite.md says what remains to verify on Apple platforms.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "Settee", targets: ["Settee"]),
        // Couchbase Lite's URLEndpointListener: the CouchDB-compatible server, started in an app's process.
        .library(name: "SetteeListener", targets: ["SetteeListener"]),
        .executable(name: "settee", targets: ["settee"]),
        .executable(name: "settee-bench", targets: ["settee-bench"]),
        .executable(name: "settee-js", targets: ["settee-js"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
    ],
    targets: [
        // System SQLite (libsqlite3-dev). Only SetteeStore imports it.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // System zlib (zlib1g-dev): gzip-stored attachments and gzip request bodies. Only SetteeStore imports it.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]),
        // ICU's Unicode Collation Algorithm, for CouchDB's view-key collation. Only SetteeIndex imports it. On Linux
        // the ICU Swift's Foundation bundles (the toolchain's lib_FoundationICU; no system ICU needed).
        .target(
            name: "CICU",
            linkerSettings: [.linkedLibrary("_FoundationICU", .when(platforms: [.linux])),
                             // Apple's system ICU (no public headers: collator.c declares what it calls).
                             .linkedLibrary("icucore", .when(platforms: [.macOS, .iOS, .tvOS, .watchOS, .visionOS]))]
        ),
        // Pure: JSON, revision ids and trees, errors. No I/O.
        .target(name: "SetteeCore"),
        // SQLite access, documents, revision trees on disk, change feed.
        .target(name: "SetteeStore", dependencies: ["SetteeCore", "CSQLite", "CZlib",
                                                    .product(name: "NIOPosix", package: "swift-nio")]),
        // The JavaScript query server: SpiderMonkey 102 (libmozjs-102-dev) speaking CouchDB's query-server protocol.
        .executableTarget(
            name: "settee-js",
            path: "Sources/settee-js",
            cxxSettings: [.unsafeFlags(["-isystem", "/usr/include/mozjs-102", "-std=c++17", "-UDEBUG"])],
            linkerSettings: [.linkedLibrary("mozjs-102")]
        ),
        // Pure: BLIP 3 (Couchbase's message protocol over WebSocket): frames, properties, per-direction deflate,
        // checksums, flow control. Bytes in, messages and actions out; no I/O.
        .target(name: "SetteeBLIP", dependencies: ["SetteeCore", "CZlib"]),
        // Pure: SQL++ lexer/parser → AST, the QueryBuilder expression API, the expression evaluator over JSON.
        .target(name: "SetteeSQLPP", dependencies: ["SetteeCore"]),
        // Pure numerics: distance kernels (SIMD), k-means, scalar and product quantizers, IVF lists.
        .target(name: "SetteeVector"),
        // The index manager (indexes follow the change feed) and the index kinds.
        .target(
            name: "SetteeIndex",
            dependencies: ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "CICU",
                           .product(name: "Logging", package: "swift-log")]
        ),
        // Planner (access paths over the document and index tables), executor, result sets, live queries.
        .target(name: "SetteeQuery", dependencies: ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "SetteeIndex"]),
        // The CouchDB replication protocol over an Endpoint protocol: local databases and HTTP peers.
        .target(
            name: "SetteeReplication",
            dependencies: [
                "SetteeCore", "SetteeStore",
                // `ws://`/`wss://` URL endpoints: Couchbase Lite's replication protocol (BLIP over a WebSocket).
                "SetteeBLIP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // SHA-1, for Couchbase Lite's `sha1-` attachment digests and `proveAttachment`.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // CouchDB-compatible HTTP API (Hummingbird 2).
        .target(
            name: "SetteeServer",
            dependencies: [
                "SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeIndex", "SetteeQuery", "SetteeReplication", "SetteeBLIP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                // `--http2`: ALPN between HTTP/2 and Settee's own HTTP/1.1 (HTTP/HTTP2UpgradeChannel.swift).
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                // `/{db}/_blipsync`: Couchbase Lite's replication protocol over WebSocket frames (BLIP/WebSocketSession.swift).
                .product(name: "NIOWebSocket", package: "swift-nio"),
                // Settee's own HTTP/1.1 connection handling (HTTP/HTTP1Connection.swift).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // Password hashing (PBKDF2), cookie signatures (HMAC) and JWT bearer tokens.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                // The admin UI's server-rendered pages (`/_utils`).
                .product(name: "Mustache", package: "swift-mustache"),
            ]
        ),
        // Umbrella library for embedders.
        .target(name: "Settee", dependencies: ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "SetteeIndex", "SetteeQuery",
                                              "SetteeReplication"]),
        // The in-process listener (Couchbase Lite's URLEndpointListener) over SetteeServer, with self-signed TLS
        // identities (swift-certificates, already in the graph through jwt-kit).
        .target(
            name: "SetteeListener",
            dependencies: [
                "Settee", "SetteeCore", "SetteeServer",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .executableTarget(
            name: "settee",
            dependencies: [
                "Settee", "SetteeServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `settee healthcheck` (the Docker image's health check, without curl).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                // `settee replicate` stops on SIGINT/SIGTERM (`settee serve` through ServiceLifecycle's group).
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "settee-bench",
            dependencies: ["SetteeCore", "SetteeStore", "SetteeSQLPP", "SetteeVector", "SetteeIndex", "SetteeQuery", "SetteeReplication", "CSQLite",
                           .product(name: "Crypto", package: "swift-crypto")],
            path: "Benchmarks/settee-bench"
        ),
        // Fuzz targets for the parsers (JSON, SQL++, revision ids, `_revisions`, multipart, `since`). A normal build is
        // a replay tool for Fuzz/corpus; scripts/fuzz.sh builds it with -DSETTEE_FUZZING -sanitize=fuzzer for libFuzzer.
        .executableTarget(name: "settee-fuzz", dependencies: ["SetteeCore", "SetteeSQLPP", "SetteeBLIP"]),
        // Shared by the test targets: temp directories, locating built products, server child processes.
        .target(name: "SetteeTestSupport", path: "Tests/SetteeTestSupport"),
        // The multi-node scenarios and the clusters they run on (local processes, or the Docker compose cluster).
        .target(
            name: "SetteeClusterHarness",
            dependencies: [
                "SetteeCore", "SetteeTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/SetteeClusterHarness"
        ),
        // `settee-cluster-check --local | --urls …`: the scenarios from the command line (against the compose cluster).
        .executableTarget(name: "settee-cluster-check", dependencies: ["SetteeClusterHarness"], path: "Tests/ClusterCheck"),
        .testTarget(name: "SetteeCoreTests", dependencies: ["SetteeCore"]),
        .testTarget(name: "SetteeSQLPPTests", dependencies: ["SetteeSQLPP", "SetteeCore"]),
        .testTarget(name: "SetteeVectorTests", dependencies: ["SetteeVector"]),
        .testTarget(name: "SetteeBLIPTests", dependencies: ["SetteeBLIP", "SetteeCore"]),
        .testTarget(name: "SetteeQueryTests", dependencies: ["Settee", "SetteeQuery", "SetteeIndex", "SetteeSQLPP", "SetteeStore", "SetteeCore", "SetteeTestSupport"]),
        .testTarget(name: "SetteeStoreTests", dependencies: ["SetteeStore", "SetteeCore", "CSQLite", "Settee", "settee", "SetteeTestSupport"]),
        .testTarget(
            name: "SetteeServerTests",
            dependencies: [
                "SetteeServer", "SetteeStore", "SetteeCore", "Settee", "settee", "SetteeTestSupport", "SetteeBLIP", "SetteeReplication",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "SetteeReplicationTests",
            dependencies: [
                "SetteeReplication", "SetteeStore", "SetteeCore", "settee", "SetteeTestSupport", "SetteeClusterHarness",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .testTarget(name: "LayeringTests"),
        // Couchbase Lite's documented Swift snippets, as written there (only the import differs).
        .testTarget(name: "CouchbaseLiteAPITests", dependencies: ["Settee", "SetteeListener", "SetteeTestSupport"]),
        // Browser tests: headless Chromium driven over WebDriver (chromedriver) against `settee serve` children.
        // They skip when chromium / chromedriver aren't installed (scripts/install-deps.sh installs them).
        .testTarget(name: "SetteeBrowserTests", dependencies: ["SetteeTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

// Every warning in Settee's own Swift code is an error (dependencies' warnings are not ours: SwiftPM applies this to
// the root package only).
// An `import` is internal unless it says `public import`, so a module's public API names every module it exposes.
for target in package.targets where target.type != .system && target.type != .binary {
    target.swiftSettings = (target.swiftSettings ?? []) + [.treatAllWarnings(as: .error),
                                                           .enableUpcomingFeature("InternalImportsByDefault")]
}
