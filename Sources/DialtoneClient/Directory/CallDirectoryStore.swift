import Foundation

/// Where the app and its Call Directory extension keep their files (the app group's
/// container on iOS). Each file has one writer: the app writes `CallDirectoryFile`, the
/// extension `CallDirectoryLoadedMarker`.
public protocol CallDirectoryStore: Sendable {
  /// The file's bytes; nil when there is no such file.
  func read(_ name: String) throws -> Data?
  /// Replaces the file as a whole: a reader sees the old bytes or the new ones, never a part.
  func write(_ data: Data, to name: String) throws
}

/// Files in one directory, e.g. `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)`.
/// Writes go to a temporary file in the same directory that is then renamed over the old one
/// (Foundation's atomic write), so the other process never reads half a file.
public struct DirectoryFileStore: CallDirectoryStore {
  public let directory: URL

  public init(directory: URL) { self.directory = directory }

  public func read(_ name: String) throws -> Data? {
    let url = directory.appendingPathComponent(name)
    guard FileManager.default.fileExists(atPath: url.path) else { return nil }
    return try Data(contentsOf: url)
  }

  public func write(_ data: Data, to name: String) throws {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    try data.write(to: directory.appendingPathComponent(name), options: .atomic)
  }
}
