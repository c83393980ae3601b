// swift-tools-version:6.0
//
// Dialtone for Apple platforms: thin adapters from the platform frameworks to the rules in
// `DialtoneClient` (root package). Nothing here decides anything; every call rule lives in
// DialtoneClient, where it is compiled and tested on Linux. This package cannot be built on
// Linux (CallKit, PushKit, AVFoundation, the WebRTC xcframework and LiveKit are Apple-only).
import PackageDescription

let package = Package(
  name: "DialtoneApple",
  platforms: [.iOS(.v17), .macOS(.v14)],
  products: [
    .library(name: "DialtoneCallKit", targets: ["DialtoneCallKit"]),
    .library(name: "DialtoneWebRTC", targets: ["DialtoneWebRTC"]),
    .library(name: "DialtoneURLSession", targets: ["DialtoneURLSession"]),
    .library(name: "DialtoneLiveKit", targets: ["DialtoneLiveKit"]),
    .library(name: "DialtoneCallDirectory", targets: ["DialtoneCallDirectory"]),
  ],
  dependencies: [
    // The root package. It must export a `DialtoneClient` library product (see docs/ios.md).
    .package(name: "Dialtone", path: ".."),
    // Google's WebRTC, prebuilt: a *binary* dependency (WebRTC.xcframework, dynamic framework
    // for iOS device/simulator, macOS and Catalyst), compiled from upstream sources without
    // modification. Its major version is the Chromium milestone (M125 here): bumping the
    // milestone means changing the major below.
    .package(url: "https://github.com/stasel/WebRTC.git", .upToNextMajor(from: "125.0.0")),
    // LiveKit's Swift SDK, for group calls on a LiveKit SFU (only DialtoneLiveKit uses it). A
    // source dependency that brings its own prebuilt WebRTC (`LiveKitWebRTC`, `LKRTC`-prefixed
    // symbols, so it links next to the WebRTC above). 2.8.0 is the first release with
    // `AudioManager.setEngineAvailability(_:)` (2.6.1 added
    // `audioSession.isAutomaticConfigurationEnabled`).
    .package(url: "https://github.com/livekit/client-sdk-swift.git", .upToNextMajor(from: "2.8.0")),
  ],
  targets: [
    // WebSocket transport for SignalingClient over URLSessionWebSocketTask.
    .target(
      name: "DialtoneURLSession",
      dependencies: [
        .product(name: "DialtoneClient", package: "Dialtone"),
        .product(name: "DialtoneProtocol", package: "Dialtone"),
      ],
      // What the SDK sends the app's server (docs/ios.md, "Privacy manifest").
      resources: [.process("PrivacyInfo.xcprivacy")]
    ),
    // PeerConnection over RTCPeerConnection (one factory, one shared camera source), and
    // CallMediaControl over RTCAudioSession in manual-audio mode and the camera (iOS).
    .target(
      name: "DialtoneWebRTC",
      dependencies: [
        .product(name: "DialtoneClient", package: "Dialtone"),
        .product(name: "DialtoneProtocol", package: "Dialtone"),
        .product(name: "WebRTC", package: "WebRTC"),
      ]
    ),
    // SystemCallUI over CXProvider/CXCallController, the CXProviderDelegate that forwards to
    // SystemCallSession, and PushKit (incoming pushes to SystemCallSession, tokens to
    // DeviceRegistrations). iOS only: its sources are empty on macOS.
    .target(
      name: "DialtoneCallKit",
      dependencies: [
        .product(name: "DialtoneClient", package: "Dialtone"),
        .product(name: "DialtoneProtocol", package: "Dialtone"),
        .product(name: "DialtoneSupport", package: "Dialtone"),
        "DialtoneWebRTC",
        "DialtoneURLSession",
      ],
      // The required-reason APIs it uses (user defaults: InstallationID's migration).
      resources: [.process("PrivacyInfo.xcprivacy")]
    ),
    // GroupMediaControl over LiveKit's Room for group calls whose media are on LiveKit, with
    // LiveKit's audio under CallKit's control (iOS only: its sources are empty on macOS).
    .target(
      name: "DialtoneLiveKit",
      dependencies: [
        .product(name: "DialtoneClient", package: "Dialtone"),
        .product(name: "DialtoneProtocol", package: "Dialtone"),
        .product(name: "LiveKit", package: "client-sdk-swift"),
      ]
    ),
    // The Call Directory extension's principal class (CXCallDirectoryProvider over
    // DirectoryExtensionLoad) and the app's CallDirectoryReloader over CXCallDirectoryManager.
    // Nothing else: an app extension links it alone (iOS only: its sources are empty on macOS).
    .target(
      name: "DialtoneCallDirectory",
      dependencies: [.product(name: "DialtoneClient", package: "Dialtone")]
    ),
    // The example app (Example/DialtoneExample) is a plain source folder for an Xcode iOS
    // App target: a SwiftPM executable cannot carry the entitlements, Info.plist and
    // background modes that CallKit and PushKit need. See Example/README.md.
  ],
  // Swift 5 mode with complete concurrency checking as warnings: WebRTC's, PushKit's and
  // CallKit's Objective-C types are not Sendable-annotated, and this glue hops between their
  // delegate queues and DialtoneClient's actors. The code is written to build in Swift 6 mode
  // too (`@unchecked Sendable` only where a comment gives the reason); switch to `.v6` once an
  // Xcode build is clean.
  swiftLanguageModes: [.v5]
)

for target in package.targets {
  target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("StrictConcurrency")]
}

// PushKit's iOS 26.4 delegate method (`PKVoIPPushMetadata`) exists only in the iOS 26.4 SDK and
// later, and no compile-time test tells which SDK a build uses (`#if compiler` names the Swift
// version, not the SDK). It is compiled only when the environment that resolves this package says
// so: `DIALTONE_IOS26_4_SDK=1` (an Xcode 26.4 or later build; docs/ios.md, section 3).
if Context.environment["DIALTONE_IOS26_4_SDK"] == "1" {
  for target in package.targets where target.name == "DialtoneCallKit" {
    target.swiftSettings = (target.swiftSettings ?? []) + [.define("DIALTONE_IOS26_4_SDK")]
  }
}
