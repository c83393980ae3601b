// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "Dialtone",
  platforms: [.macOS(.v14), .iOS(.v17)],
  products: [
    .library(name: "DialtoneProtocol", targets: ["DialtoneProtocol"]),
    .library(name: "DialtoneClient", targets: ["DialtoneClient"]),
    // The SDK's logging (`Log`, `LogSink`) and small shared types, for apps that give it a sink.
    .library(name: "DialtoneSupport", targets: ["DialtoneSupport"]),
    // For the fuzzing package (FuzzTesting/), which builds it with sanitizers.
    .library(name: "DialtoneFuzzTargets", targets: ["DialtoneFuzzTargets"]),
    .executable(name: "dialtone-server", targets: ["dialtone-server"]),
    .executable(name: "dialtone", targets: ["dialtone"]),
    .executable(name: "dialtone-bench", targets: ["dialtone-bench"]),
  ],
  targets: [
    // C libraries from Debian -dev packages, each wrapped by exactly one Swift module.
    .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
    .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
    .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
    .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
    // No pkgConfig: hiredis.pc's -D_FILE_OFFSET_BITS=64 makes SwiftPM warn on every build (off_t
    // is 64-bit anyway on the 64-bit targets); shim.h includes <hiredis/hiredis.h> from /usr/include.
    .systemLibrary(name: "CRedis", providers: [.apt(["libhiredis-dev"])]),
    // No pkgConfig: GStreamer's flags carry -pthread, which SwiftPM refuses with a warning on
    // every build; the include paths are given to DialtoneGStreamer instead.
    .systemLibrary(
      name: "CGStreamer", providers: [.apt(["libgstreamer1.0-dev", "libgstreamer-plugins-bad1.0-dev", "libnice-dev"])]),
    .systemLibrary(
      name: "CLibWebSockets", pkgConfig: "libwebsockets",
      providers: [.apt(["libwebsockets-dev", "libwebsockets-evlib-uv", "libuv1-dev"])]),
    // The server's allocator, for dialtone-server only (not the SDK, the CLI or the tests' runner):
    // Swift on Linux allocates on every message, and jemalloc costs less per message than glibc's
    // malloc (docs/benchmarks.md, "The allocator").
    .systemLibrary(name: "CJemalloc", providers: [.apt(["libjemalloc-dev"])]),

    .target(name: "DialtoneJSON"),
    // Small portable helpers every module may use (a lock-protected box).
    .target(name: "DialtoneSupport", dependencies: ["DialtoneJSON"]),
    .target(name: "DialtoneProtocol", dependencies: ["DialtoneJSON"]),
    .target(name: "DialtoneCrypto", dependencies: ["COpenSSL", "DialtoneJSON"]),
    // A blocking TLS client stream over OpenSSL's libssl (the cluster's Redis over rediss://).
    .target(name: "DialtoneTLS", dependencies: ["COpenSSL", "DialtoneSupport"]),
    .target(
      name: "DialtoneNet", dependencies: ["CLibWebSockets", "DialtoneCrypto", "DialtoneJSON", "DialtoneSupport"]),
    .target(name: "DialtoneSQLite", dependencies: ["CSQLite"]),
    // The cluster store's PostgreSQL client: libpq behind a pointer-free API, and a bounded pool.
    .target(name: "DialtonePostgres", dependencies: ["CPostgres", "DialtoneSupport"]),
    // The cluster's Redis client (presence, routing, resume): hiredis behind a pointer-free API.
    .target(name: "DialtoneRedis", dependencies: ["CRedis", "DialtoneCrypto", "DialtoneSupport", "DialtoneTLS"]),

    // Counters, gauges and histograms, and their Prometheus text exposition.
    .target(name: "DialtoneMetrics", dependencies: ["DialtoneSupport"]),
    .target(name: "DialtoneHTTPClient", dependencies: ["CCurl", "DialtoneSupport"]),
    // The APNs client's transport: HTTP/2 over TLS on one engine thread (nghttp2 + OpenSSL).
    .target(name: "DialtoneHTTP2", dependencies: ["CNGHTTP2", "DialtoneTLS", "DialtoneSupport"]),
    // Argument parsing shared by the executables (and the server's configuration).
    .target(name: "DialtoneCommandLine"),
    // Client tokens and the shared secret, for the server and the CLI alike.
    .target(name: "DialtoneAuth", dependencies: ["DialtoneCrypto", "DialtoneJSON"]),
    // Push delivery: APNs and FCM behind one PushProvider protocol.
    .target(
      name: "DialtonePush",
      dependencies: [
        "DialtoneProtocol", "DialtoneJSON", "DialtoneCrypto", "DialtoneHTTPClient", "DialtoneHTTP2", "DialtoneSupport",
      ]),
    // The call desk: both routers, blocks, the rules spanning 1:1 and group calls. Pure values
    // (inputs in, effects out, virtual time); no I/O, no threads.
    .target(name: "DialtoneCalls", dependencies: ["DialtoneProtocol", "DialtoneSupport"]),
    // Device sessions: seq/ack/resume delivery, answers remembered per request, outcomes held for
    // the journal, forwarded answers; the seam where sessions are stored (local or shared).
    .target(
      name: "DialtoneSessions",
      dependencies: ["DialtoneCalls", "DialtoneProtocol", "DialtoneSupport", "DialtoneMetrics"]),
    // What the server keeps: history, devices, blocks, directory, quality, the live-call journal;
    // SQLite and PostgreSQL behind the store protocols.
    .target(
      name: "DialtoneStorage",
      dependencies: [
        "DialtoneCalls", "DialtoneProtocol", "DialtoneSupport", "DialtoneSQLite", "DialtonePostgres", "DialtonePush",
        "DialtoneJSON",
      ]),
    // A node's part of a cluster: presence, call ownership, inboxes and sessions in Redis, calls
    // taken over from the shared journal; what it learns goes into the hub's ClusterInbox.
    .target(
      name: "DialtoneCluster",
      dependencies: [
        "DialtoneRedis", "DialtoneSupport", "DialtoneCalls", "DialtoneSessions", "DialtoneStorage", "DialtoneProtocol",
        "DialtoneMetrics", "DialtoneJSON",
      ]),
    // The media servers of group calls: Janus (proxied) and LiveKit (tokens and webhooks).
    .target(
      name: "DialtoneSFU",
      dependencies: [
        "DialtoneCalls", "DialtoneProtocol", "DialtoneSupport", "DialtoneHTTPClient", "DialtoneCrypto", "DialtoneJSON",
      ]),
    .target(
      name: "DialtoneServer",
      dependencies: [
        "DialtoneProtocol", "DialtoneJSON", "DialtoneCrypto", "DialtoneAuth", "DialtoneNet",
        "DialtoneSQLite", "DialtoneHTTPClient", "DialtoneHTTP2", "DialtonePush", "DialtoneCommandLine",
        "DialtoneSupport", "DialtoneMetrics", "DialtonePostgres", "DialtoneRedis", "DialtoneCluster", "DialtoneCalls",
        "DialtoneSessions", "DialtoneStorage", "DialtoneSFU",
      ],
      // The browser client and the admin dashboard, edited as HTML/JS and compiled into the
      // binary (no files to deploy).
      resources: [.embedInCode("Resources/softphone.html"), .embedInCode("Resources/admin.html")]),

    // The client SDK core: no C dependency, builds for iOS unchanged.
    .target(name: "DialtoneClient", dependencies: ["DialtoneProtocol", "DialtoneJSON", "DialtoneSupport"]),
    .target(name: "DialtoneClientLinux", dependencies: ["DialtoneClient", "DialtoneNet"]),
    .target(
      name: "DialtoneGStreamer", dependencies: ["CGStreamer", "DialtoneClient", "DialtoneCrypto", "DialtoneSupport"],
      swiftSettings: [.unsafeFlags(gstreamerIncludes.flatMap { ["-Xcc", "-I\($0)"] })]),
    // jemalloc wrapped once (its version, asked through mallctl); linked on Linux only.
    .target(
      name: "DialtoneAllocator", dependencies: [.target(name: "CJemalloc", condition: .when(platforms: [.linux]))]),
    .executableTarget(
      name: "dialtone-server",
      dependencies: [
        "DialtoneServer", "DialtoneSupport", "DialtoneAllocator",
      ]),
    // The CLI softphone and tokens: a client, so it does not link the server.
    .executableTarget(
      name: "dialtone",
      dependencies: [
        "DialtoneAuth", "DialtoneNet", "DialtoneProtocol", "DialtoneHTTPClient",
        "DialtoneClient", "DialtoneClientLinux", "DialtoneGStreamer", "DialtoneJSON",
        "DialtoneCommandLine", "DialtoneSupport",
      ],
      swiftSettings: [.unsafeFlags(gstreamerIncludes.flatMap { ["-Xcc", "-I\($0)"] })]),
    // The interleaved signaling benchmark's slice order and accounting: pure values, tested.
    .target(name: "DialtoneBenchSlices", dependencies: ["DialtoneSupport"]),
    .executableTarget(
      name: "dialtone-bench",
      dependencies: [
        "DialtoneAuth", "DialtoneBenchSlices", "DialtonePush", "DialtoneNet",
        "DialtoneProtocol", "DialtoneJSON", "DialtoneHTTPClient", "DialtoneHTTP2",
        "DialtoneCrypto", "DialtoneCommandLine", "DialtoneSupport",
      ]),

    // What each fuzz harness does with an input; `make test` replays the corpus through it.
    .target(
      name: "DialtoneFuzzTargets",
      dependencies: ["DialtoneProtocol", "DialtoneClient", "DialtoneCrypto", "DialtoneJSON", "DialtoneNet"]),

    // Shared by the test targets: test doubles (virtual time), loopback helpers, scratch PostgreSQL and Redis.
    .target(
      name: "DialtoneTestSupport", dependencies: ["DialtoneSupport", "DialtonePostgres", "DialtoneRedis"],
      path: "Tests/DialtoneTestSupport"),
    .testTarget(name: "DialtoneJSONTests", dependencies: ["DialtoneJSON"]),
    .testTarget(
      name: "DialtoneSupportTests", dependencies: ["DialtoneSupport", "DialtoneJSON", "DialtoneTestSupport"]),
    .testTarget(name: "DialtoneCommandLineTests", dependencies: ["DialtoneCommandLine"]),
    .testTarget(name: "DialtoneProtocolTests", dependencies: ["DialtoneProtocol", "DialtoneJSON"]),
    .testTarget(name: "DialtoneCryptoTests", dependencies: ["DialtoneCrypto", "DialtoneJSON", "DialtoneTestSupport"]),
    .testTarget(
      name: "DialtoneNetTests", dependencies: ["DialtoneJSON", "DialtoneNet", "DialtoneSupport", "DialtoneTestSupport"]),
    .testTarget(name: "DialtoneSQLiteTests", dependencies: ["DialtoneSQLite"]),
    // Runs a scratch PostgreSQL server of its own (Debian's postgresql package).
    .testTarget(name: "DialtonePostgresTests", dependencies: ["DialtonePostgres", "DialtoneTestSupport"]),
    // Runs a scratch redis-server of its own (Debian's redis-server package).
    .testTarget(
      name: "DialtoneRedisTests",
      dependencies: ["DialtoneRedis", "DialtoneCluster", "DialtoneMetrics", "DialtoneTestSupport", "DialtoneTLS"]),
    .testTarget(name: "DialtoneMetricsTests", dependencies: ["DialtoneMetrics"]),
    .testTarget(name: "DialtoneBenchSlicesTests", dependencies: ["DialtoneBenchSlices"]),
    .testTarget(
      name: "DialtoneCallsTests",
      dependencies: ["DialtoneCalls", "DialtoneProtocol", "DialtoneSupport", "DialtoneTestSupport"]),
    .testTarget(
      name: "DialtoneSessionsTests",
      dependencies: ["DialtoneSessions", "DialtoneProtocol", "DialtoneSupport", "DialtoneTestSupport"]),
    .testTarget(name: "DialtoneFuzzTargetsTests", dependencies: ["DialtoneFuzzTargets"]),
    .testTarget(
      name: "DialtoneClientTests",
      dependencies: [
        "DialtoneClient", "DialtoneClientLinux", "DialtoneServer", "DialtoneAuth", "DialtoneNet",
        "DialtoneProtocol", "DialtoneJSON", "DialtoneSupport", "DialtoneTestSupport",
      ]),
    // Targets that import DialtoneGStreamer may have to build the CGStreamer module themselves.
    .testTarget(
      name: "DialtoneGStreamerTests",
      dependencies: ["DialtoneGStreamer", "DialtoneClient", "DialtoneProtocol", "DialtoneSupport"],
      swiftSettings: [.unsafeFlags(gstreamerIncludes.flatMap { ["-Xcc", "-I\($0)"] })]),
    .testTarget(
      name: "DialtoneServerTests",
      dependencies: [
        "DialtoneServer", "DialtoneAuth", "DialtonePush", "DialtoneNet", "DialtoneProtocol", "DialtoneCrypto",
        "DialtoneSQLite", "DialtoneJSON", "DialtoneHTTPClient", "DialtoneHTTP2", "DialtoneSupport",
        "DialtoneTestSupport", "DialtonePostgres", "DialtoneRedis", "DialtoneCluster", "DialtoneCalls",
        "DialtoneSessions", "DialtoneStorage", "DialtoneSFU", "DialtoneMetrics",
      ]),
  ],
  swiftLanguageModes: [.v6]
)

// Every target names the modules it uses: members of a module reached only through another
// one's imports are not visible (SE-0444).
for target in package.targets where target.type != .system {
  target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("MemberImportVisibility")]
}

/// GStreamer's and GLib's header directories on Debian (what `pkg-config --cflags
/// gstreamer-webrtc-1.0` prints, minus -pthread).
var gstreamerIncludes: [String] {
  #if arch(arm64)
    let multiarch = "aarch64-linux-gnu"
  #else
    let multiarch = "x86_64-linux-gnu"
  #endif
  return [
    "/usr/include/gstreamer-1.0", "/usr/include/glib-2.0", "/usr/lib/\(multiarch)/glib-2.0/include",
    "/usr/include/\(multiarch)", "/usr/include/orc-0.4",
  ]
}
