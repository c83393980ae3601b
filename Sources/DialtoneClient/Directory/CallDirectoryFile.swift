import Foundation

/// What the app leaves in the app-group container for its Call Directory extension: the
/// directory's lists and the recent changes. Only the app writes it; what the system loaded is
/// the extension's own file (`CallDirectoryLoadedMarker`), so the two never write one file.
public struct CallDirectoryFile: Sendable, Equatable, Codable {
  public static let formatVersion = 2
  public static let fileName = "dialtone-call-directory.json"

  public var format = Self.formatVersion
  /// Changes whenever the history starts again (a device with nothing, or a server whose
  /// versions went back), so that a version the extension loaded is never mistaken for the
  /// same number in another history.
  public var generation: String
  public var version: Int64
  public var lists: CallDirectoryLists
  public var history: DirectoryChangeHistory

  public init(generation: String, directory: PhoneDirectory, history: DirectoryChangeHistory) {
    self.generation = generation
    version = directory.version
    lists = directory.lists
    self.history = history
  }

  /// The directory the lists describe (the app resumes from it).
  public var directory: PhoneDirectory {
    PhoneDirectory(
      version: version,
      identify: Dictionary(lists.identification.map { ($0.number, $0.label) }, uniquingKeysWith: { _, last in last }),
      block: Set(lists.blocking))
  }

  public func encoded() throws -> Data { try JSONEncoder().encode(self) }

  /// The file's contents, or a clear error for a corrupt or newer file (the extension then
  /// cancels the request, keeping what the system has, and the app starts over).
  public static func decode(_ data: Data) throws(CallDirectoryFileError) -> CallDirectoryFile {
    let file: CallDirectoryFile
    do {
      file = try JSONDecoder().decode(CallDirectoryFile.self, from: data)
    } catch {
      // A newer app may have changed more than the format number: report the format first.
      if let format = try? JSONDecoder().decode(FormatOnly.self, from: data).format, format != formatVersion {
        throw .unsupportedFormat(format)
      }
      throw .corrupt(String(describing: error))
    }
    guard file.format == formatVersion else { throw .unsupportedFormat(file.format) }
    let numbers = file.lists.identification.map(\.number)
    guard zip(numbers, numbers.dropFirst()).allSatisfy({ $0 < $1 }),
      zip(file.lists.blocking, file.lists.blocking.dropFirst()).allSatisfy({ $0 < $1 })
    else { throw .corrupt("the lists are not strictly ascending") }
    return file
  }

  private struct FormatOnly: Decodable { var format: Int }
}

/// What the extension writes once the system confirmed a load (`completeRequest` not
/// expired): which history and which version of it the system has. Only the extension writes it.
public struct CallDirectoryLoadedMarker: Sendable, Equatable, Codable {
  public static let fileName = "dialtone-call-directory-loaded.json"

  public var generation: String
  public var version: Int64

  public init(generation: String, version: Int64) {
    self.generation = generation
    self.version = version
  }

  public func encoded() throws -> Data { try JSONEncoder().encode(self) }

  /// nil for a missing or unreadable marker: the system's copy is then unknown, and the next
  /// load is a full one.
  public static func decode(_ data: Data?) -> CallDirectoryLoadedMarker? {
    guard let data else { return nil }
    return try? JSONDecoder().decode(CallDirectoryLoadedMarker.self, from: data)
  }
}

public enum CallDirectoryFileError: Error, Equatable, CustomStringConvertible, LocalizedError {
  case corrupt(String)
  case unsupportedFormat(Int)

  public var description: String {
    switch self {
    case .corrupt(let why): return "the call directory file is corrupt: \(why)"
    case .unsupportedFormat(let format):
      return "the call directory file has format \(format), not \(CallDirectoryFile.formatVersion)"
    }
  }

  /// What the system shows of a cancelled extension request.
  public var errorDescription: String? { description }
}
