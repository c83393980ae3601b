// swift-tools-version:6.0
import PackageDescription

// libFuzzer harnesses, one executable per parser, built only with
//   swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
// (`make fuzz` does it). A separate package, so the main build never needs the sanitizers.
let harnesses = [
  "FuzzClientMessage", "FuzzServerMessage", "FuzzHTTPBodies", "FuzzPushPayload", "FuzzSDP", "FuzzJWT",
  "FuzzHTTPRequest", "FuzzWebSocketFrames", "FuzzHTTPHead",
]

let package = Package(
  name: "DialtoneFuzzTesting",
  dependencies: [.package(name: "Dialtone", path: "..")],
  targets: [.target(name: "FuzzDriver")]
    + harnesses.map {
      .executableTarget(
        name: $0, dependencies: [.product(name: "DialtoneFuzzTargets", package: "Dialtone"), "FuzzDriver"])
    },
  swiftLanguageModes: [.v6]
)
