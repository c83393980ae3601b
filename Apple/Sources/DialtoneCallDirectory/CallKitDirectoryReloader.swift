#if os(iOS)
  import CallKit
  import DialtoneClient
  import Foundation

  /// `CallDirectoryReloader` over `CXCallDirectoryManager`, for the app's `DirectorySync`; also
  /// whether the user switched the extension on (Settings › Phone › Call Blocking &
  /// Identification), which no reload can do for them.
  public struct CallKitDirectoryReloader: CallDirectoryReloader {
    /// The extension's bundle identifier, e.g. `com.example.phone.CallDirectory`.
    public let extensionIdentifier: String

    public init(extensionIdentifier: String) { self.extensionIdentifier = extensionIdentifier }

    /// Runs the extension; fails when it is switched off, or when the extension failed.
    public func reloadExtension() async throws {
      let identifier = extensionIdentifier
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        CXCallDirectoryManager.sharedInstance.reloadExtension(withIdentifier: identifier) { error in
          if let error { continuation.resume(throwing: error) } else { continuation.resume() }
        }
      }
    }

    public func enabledStatus() async throws -> CXCallDirectoryManager.EnabledStatus {
      let identifier = extensionIdentifier
      return try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<CXCallDirectoryManager.EnabledStatus, any Error>) in
        CXCallDirectoryManager.sharedInstance.getEnabledStatusForExtension(withIdentifier: identifier) {
          status, error in
          if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: status) }
        }
      }
    }
  }
#endif
