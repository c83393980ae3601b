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
    .executableTarget(name: "dialtone-server", dependencies: ["DialtoneServer"]),
    .executableTarget(name: "dialtone", dependencies: ["DialtoneServer", "DialtoneCrypto", "DialtoneNet", "DialtoneProtocol", "DialtoneHTTPClient"]),

    .testTarget(name: "DialtoneJSONTests", dependencies: ["DialtoneJSON"]),
    .testTarget(name: "DialtoneProtocolTests", dependencies: ["DialtoneProtocol"]),
    .testTarget(name: "DialtoneCryptoTests", dependencies: ["DialtoneCrypto"]),
    .testTarget(name: "DialtoneNetTests", dependencies: ["DialtoneNet"]),
    .testTarget(name: "DialtoneSQLiteTests", dependencies: ["DialtoneSQLite"]),
    .testTarget(name: "DialtoneClientTests",
                dependencies: ["DialtoneClient", "DialtoneClientLinux", "DialtoneServer", "DialtoneNet", "DialtoneProtocol"]),
    .testTarget(name: "DialtoneServerTests",
                dependencies: ["DialtoneServer", "DialtoneNet", "DialtoneProtocol", "DialtoneCrypto"]),
  ],
  swiftLanguageModes: [.v6]
)
