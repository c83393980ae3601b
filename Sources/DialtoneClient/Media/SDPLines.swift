/// A description as lines, split into its session part and m-sections, written back with its
/// own line ends: for code that edits a description (`SDPMediaSection` only reads one).
/// Public rather than `package`: the iOS type-check compiles each module without a package name.
public struct SDPLines: Sendable {
  public var session: [String]
  public var sections: [Section]
  let newline: String
  let trailingNewline: Bool

  public init(_ sdp: String) {
    newline = sdp.contains("\r\n") ? "\r\n" : "\n"
    var lines = sdp.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\r\n" || $0 == "\n" })
      .map(String.init)
    trailingNewline = lines.last == ""
    if trailingNewline { lines.removeLast() }
    session = []
    sections = []
    for line in lines {
      if line.hasPrefix("m=") {
        sections.append(Section(mLine: line))
      } else if sections.isEmpty {
        session.append(line)
      } else {
        sections[sections.count - 1].lines.append(line)
      }
    }
  }

  public var text: String {
    let lines = session + sections.flatMap { [$0.mLine] + $0.lines }
    return lines.joined(separator: newline) + (trailingNewline ? newline : "")
  }

  public struct Section: Sendable {
    public var mLine: String
    public var lines: [String] = []

    /// `m=<media> <port> <proto> <formats...>`
    var fields: [String] { mLine.dropFirst(2).split(separator: " ").map(String.init) }

    /// A media-level attribute's value (`a=<name>:<value>`), the first one.
    public func attribute(_ name: String) -> String? {
      let prefix = "a=\(name):"
      return lines.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)).trimmed }
    }

    /// Turns the section's `a=<from>` direction into `a=<to>`; whether it had one.
    public mutating func replaceDirection(_ from: MediaDirection, with to: MediaDirection) -> Bool {
      guard let index = lines.firstIndex(of: "a=" + from.rawValue) else { return false }
      lines[index] = "a=" + to.rawValue
      return true
    }
  }
}

extension String {
  var trimmed: String {
    var s = Substring(self)
    while s.first == " " || s.first == "\t" { s = s.dropFirst() }
    while s.last == " " || s.last == "\t" { s = s.dropLast() }
    return String(s)
  }
}
