/// What one step of the directory changed, as the extension applies it incrementally: removals
/// first, then additions, each ascending. A relabel is a removal and an addition.
public struct DirectoryChange: Sendable, Equatable, Codable {
  public var fromVersion: Int64
  public var toVersion: Int64
  public var removedIdentification: [Int64]
  public var addedIdentification: [CallDirectoryLists.Entry]
  public var removedBlocking: [Int64]
  public var addedBlocking: [Int64]

  public var isEmpty: Bool {
    removedIdentification.isEmpty && addedIdentification.isEmpty && removedBlocking.isEmpty && addedBlocking.isEmpty
  }

  init(from old: PhoneDirectory, to new: PhoneDirectory) {
    fromVersion = old.version
    toVersion = new.version
    removedIdentification = old.identify.keys.filter { new.identify[$0] != old.identify[$0] }.sorted()
    addedIdentification = new.identify.keys.filter { old.identify[$0] != new.identify[$0] }.sorted().map {
      CallDirectoryLists.Entry(number: $0, label: new.identify[$0] ?? "")
    }
    removedBlocking = old.block.subtracting(new.block).sorted()
    addedBlocking = new.block.subtracting(old.block).sorted()
  }

  /// This change followed by `next` (which must start where this one ends), as one step.
  func then(_ next: DirectoryChange) -> DirectoryChange? {
    guard next.fromVersion == toVersion else { return nil }
    let addedFirst = Set(addedIdentification.map(\.number))
    let removedFirst = Set(removedIdentification)
    // A number the second step removes was on the device before the first one unless the first
    // step brought it.
    let hadBefore = removedFirst.union(
      next.removedIdentification.filter { removedFirst.contains($0) || !addedFirst.contains($0) })
    var labels: [Int64: String] = [:]
    for entry in addedIdentification { labels[entry.number] = entry.label }
    for number in next.removedIdentification { labels[number] = nil }
    for entry in next.addedIdentification { labels[entry.number] = entry.label }

    let blockedBefore = Set(removedBlocking).union(Set(next.removedBlocking).subtracting(addedBlocking))
    let blockedAfter = Set(addedBlocking).subtracting(next.removedBlocking).union(next.addedBlocking)

    var combined = self
    combined.toVersion = next.toVersion
    combined.removedIdentification = hadBefore.sorted()
    combined.addedIdentification = labels.keys.sorted().map {
      CallDirectoryLists.Entry(number: $0, label: labels[$0] ?? "")
    }
    combined.removedBlocking = blockedBefore.subtracting(blockedAfter).sorted()
    combined.addedBlocking = blockedAfter.subtracting(blockedBefore).sorted()
    return combined
  }
}
