import DialtoneProtocol

/// The device's copy of the user's phone-number directory (protocol.md §16.11): what
/// `GET /v1/directory` last returned, with every change set applied.
public struct PhoneDirectory: Sendable, Equatable {
  public private(set) var version: Int64
  /// Number → label, for the incoming-call screen.
  public private(set) var identify: [Int64: String]
  public private(set) var block: Set<Int64>

  public init(version: Int64 = 0, identify: [Int64: String] = [:], block: Set<Int64> = []) {
    self.version = version
    self.identify = identify
    self.block = block
  }

  /// The directory after `response`, which answered a request made with `since` (nil: none),
  /// and what changed. A change set must follow from this very version; lists must ascend
  /// without repeats (what the system's extension takes).
  public func applying(_ response: DirectoryResponse, since: Int64?) throws(DirectoryError)
    -> (PhoneDirectory, DirectoryChange)
  {
    for (name, list) in [
      ("identify", response.identify.map(\.number)), ("block", response.block),
      ("removedIdentify", response.removedIdentify), ("removedBlock", response.removedBlock),
    ] where !Self.ascends(list) {
      throw .unordered(list: name)
    }
    if response.full {
      let next = PhoneDirectory(
        version: response.version,
        identify: Dictionary(response.identify.map { ($0.number, $0.label) }, uniquingKeysWith: { _, last in last }),
        block: Set(response.block))
      return (next, DirectoryChange(from: self, to: next))
    }
    guard since == version, response.version >= version else {
      throw .notAContinuation(have: version, asked: since, got: response.version)
    }
    var next = self
    next.version = response.version
    for number in response.removedIdentify { next.identify[number] = nil }
    for entry in response.identify { next.identify[entry.number] = entry.label }
    next.block.subtract(response.removedBlock)
    next.block.formUnion(response.block)
    return (next, DirectoryChange(from: self, to: next))
  }

  /// The two lists as the extension loads them, each ascending. A number may be in both: the
  /// phone blocks it (blocking wins on the phone), and its label shows in the call log.
  public var lists: CallDirectoryLists {
    CallDirectoryLists(
      identification: identify.keys.sorted().map { CallDirectoryLists.Entry(number: $0, label: identify[$0] ?? "") },
      blocking: block.sorted())
  }

  private static func ascends(_ numbers: [Int64]) -> Bool {
    zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }
  }
}

/// What the system's Call Directory is handed: two strictly ascending lists.
public struct CallDirectoryLists: Sendable, Equatable, Codable {
  public struct Entry: Sendable, Equatable, Codable {
    public let number: Int64
    public let label: String

    public init(number: Int64, label: String) {
      self.number = number
      self.label = label
    }
  }

  public let identification: [Entry]
  public let blocking: [Int64]
}

/// A directory response that cannot be applied.
public enum DirectoryError: Error, Equatable, CustomStringConvertible {
  /// A list is not strictly ascending.
  case unordered(list: String)
  /// A change set that does not start from the version this device has.
  case notAContinuation(have: Int64, asked: Int64?, got: Int64)

  public var description: String {
    switch self {
    case .unordered(let list): return "the directory's \(list) list is not strictly ascending"
    case .notAContinuation(let have, let asked, let got):
      return "a change set to version \(got) asked with since=\(asked.map(String.init) ?? "none") for version \(have)"
    }
  }
}
