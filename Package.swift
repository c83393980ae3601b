// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "Dialtone",
  platforms: [.macOS(.v14), .iOS(.v17)],
  products: [
    .library(name: "DialtoneProtocol", targets: ["DialtoneProtocol"]),
    .library(name: "DialtoneClient", targets: ["DialtoneClient"]),
    .executable(name: "dialtone-server", targets: ["dialtone-server"]),
    .executable(name: "dialtone", targets: ["dialtone"]),
  ],
  targets: [
    // C libraries from Debian -dev packages, each wrapped by exactly one Swift module.
    .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
    .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
    .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    // No pkgConfig: GStreamer's flags carry -pthread, which SwiftPM refuses with a warning on
    // every build; the include paths are given to DialtoneGStreamer instead.
    .systemLibrary(name: "CGStreamer", providers: [.apt(["libgstreamer1.0-dev", "libgstreamer-plugins-bad1.0-dev"])]),
    .systemLibrary(name: "CLibWebSockets", pkgConfig: "libwebsockets",
                   providers: [.apt(["libwebsockets-dev", "libwebsockets-evlib-uv", "libuv1-dev"])]),

    .target(name: "DialtoneJSON"),
    .target(name: "DialtoneProtocol", dependencies: ["DialtoneJSON"]),
    .target(name: "DialtoneCrypto", dependencies: ["COpenSSL", "DialtoneJSON"]),
    .target(name: "DialtoneNet", dependencies: ["CLibWebSockets"]),
    .target(name: "DialtoneSQLite", dependencies: ["CSQLite"]),
    .target(name: "DialtoneHTTPClient", dependencies: ["CCurl"]),
    .target(name: "DialtoneServer", dependencies: ["DialtoneProtocol", "DialtoneCrypto", "DialtoneNet", "DialtoneSQLite", "DialtoneHTTPClient"]),
    // The client SDK core: no C dependency, builds for iOS unchanged.
    .target(name: "DialtoneClient", dependencies: ["DialtoneProtocol"]),
    .target(name: "DialtoneClientLinux", dependencies: ["DialtoneClient", "DialtoneNet"]),
    .target(name: "DialtoneGStreamer", dependencies: ["CGStreamer", "DialtoneClient", "DialtoneCrypto"],
            swiftSettings: [.unsafeFlags(gstreamerIncludes.flatMap { ["-Xcc", "-I\($0)"] })]),
    .executableTarget(name: "dialtone-server", dependencies: ["DialtoneServer"]),
    .executableTarget(name: "dialtone", dependencies: ["DialtoneServer", "DialtoneCrypto", "DialtoneNet", "DialtoneProtocol", "DialtoneHTTPClient",
                                                       "DialtoneClient", "DialtoneClientLinux", "DialtoneGStreamer", "DialtoneJSON"],
                      swiftSettings: [.unsafeFlags(gstreamerIncludes.flatMap { ["-Xcc", "-I\($0)"] })]),

    .testTarget(name: "DialtoneJSONTests", dependencies: ["DialtoneJSON"]),
    .testTarget(name: "DialtoneProtocolTests", dependencies: ["DialtoneProtocol"]),
    .testTarget(name: "DialtoneCryptoTests", dependencies: ["DialtoneCrypto"]),
    .testTarget(name: "DialtoneNetTests", dependencies: ["DialtoneNet"]),
    .testTarget(name: "DialtoneSQLiteTests", dependencies: ["DialtoneSQLite"]),
    .testTarget(name: "DialtoneClientTests",
                dependencies: ["DialtoneClient", "DialtoneClientLinux", "DialtoneServer", "DialtoneNet", "DialtoneProtocol"]),
    // Targets that import DialtoneGStreamer may have to build the CGStreamer module themselves.
    .testTarget(name: "DialtoneGStreamerTests", dependencies: ["DialtoneGStreamer", "DialtoneClient", "DialtoneProtocol"],
                swiftSettings: [.unsafeFlags(gstreamerIncludes.flatMap { ["-Xcc", "-I\($0)"] })]),
    .testTarget(name: "DialtoneServerTests",
                dependencies: ["DialtoneServer", "DialtoneNet", "DialtoneProtocol", "DialtoneCrypto", "DialtoneSQLite"]),
  ],
  swiftLanguageModes: [.v6]
)

/// GStreamer's and GLib's header directories on Debian (what `pkg-config --cflags
/// gstreamer-webrtc-1.0` prints, minus -pthread).
var gstreamerIncludes: [String] {
  #if arch(arm64)
  let multiarch = "aarch64-linux-gnu"
  #else
  let multiarch = "x86_64-linux-gnu"
  #endif
  return ["/usr/include/gstreamer-1.0", "/usr/include/glib-2.0", "/usr/lib/\(multiarch)/glib-2.0/include",
          "/usr/include/\(multiarch)", "/usr/include/orc-0.4"]
}
