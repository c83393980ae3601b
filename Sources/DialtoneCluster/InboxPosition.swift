/// A letter's position in a node's inbox: the Redis stream entry id ("ms-seq"), compared as the
/// two numbers it is (as text, "9-0" would sort after "10-0").
package struct InboxPosition: Sendable, Hashable, Comparable, CustomStringConvertible {
  package let milliseconds: UInt64
  package let sequence: UInt64

  package init(milliseconds: UInt64, sequence: UInt64) {
    self.milliseconds = milliseconds
    self.sequence = sequence
  }

  /// Nil for anything but "ms-seq".
  package init?(_ text: String) {
    let parts = text.split(separator: "-", omittingEmptySubsequences: false)
    guard parts.count == 2, let ms = UInt64(parts[0]), let seq = UInt64(parts[1]) else { return nil }
    self.init(milliseconds: ms, sequence: seq)
  }

  package var description: String { "\(milliseconds)-\(sequence)" }

  /// The position just before this one (nil before the first): trimming through it keeps this one.
  package var predecessor: InboxPosition? {
    if sequence > 0 { return InboxPosition(milliseconds: milliseconds, sequence: sequence - 1) }
    return milliseconds > 0 ? InboxPosition(milliseconds: milliseconds - 1, sequence: .max) : nil
  }

  package static func < (a: InboxPosition, b: InboxPosition) -> Bool {
    (a.milliseconds, a.sequence) < (b.milliseconds, b.sequence)
  }
}
