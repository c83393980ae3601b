/// Asks the system to load the extension again (on iOS `CXCallDirectoryManager.reloadExtension`);
/// the system runs the extension before it answers.
public protocol CallDirectoryReloader: Sendable {
  func reloadExtension() async throws
}
