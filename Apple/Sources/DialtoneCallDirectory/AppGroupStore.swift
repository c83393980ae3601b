#if os(iOS)
  import DialtoneClient
  import Foundation

  extension DirectoryFileStore {
    /// The files in an app group's container; nil when this process has no such group (its
    /// `com.apple.security.application-groups` entitlement lacks it).
    public init?(appGroup identifier: String) {
      guard let url = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: identifier) else {
        return nil
      }
      self.init(directory: url)
    }
  }
#endif
