/// How the Call Directory extension brings the system's copy up to date: everything again,
/// or only the changes since the version it loaded last, when the system asks incrementally
/// and the app still has every change since then.
public enum DirectoryReloadPlan: Sendable, Equatable {
  /// Every entry again, each list ascending (after removing all when the system asked
  /// incrementally; a complete request starts empty).
  case full(CallDirectoryLists)
  /// Remove, then add, each ascending (a relabel is both).
  case incremental(DirectoryChange)
  /// The system already has this version.
  case upToDate

  /// `loaded`: what the extension last completed (nil: never, or unknown); a load of another
  /// generation (another history, whose version numbers mean nothing here) counts as none.
  public static func plan(
    loaded: CallDirectoryLoadedMarker?, generation: String, directory: PhoneDirectory,
    history: DirectoryChangeHistory, systemIsIncremental: Bool
  ) -> DirectoryReloadPlan {
    plan(
      loaded: loaded, generation: generation, version: directory.version, lists: directory.lists, history: history,
      systemIsIncremental: systemIsIncremental)
  }

  /// The plan for the app's file, from its lists as they are (the extension has little memory).
  public static func plan(
    loaded: CallDirectoryLoadedMarker?, file: CallDirectoryFile, systemIsIncremental: Bool
  ) -> DirectoryReloadPlan {
    plan(
      loaded: loaded, generation: file.generation, version: file.version, lists: file.lists, history: file.history,
      systemIsIncremental: systemIsIncremental)
  }

  private static func plan(
    loaded: CallDirectoryLoadedMarker?, generation: String, version: Int64,
    lists: @autoclosure () -> CallDirectoryLists,
    history: DirectoryChangeHistory, systemIsIncremental: Bool
  ) -> DirectoryReloadPlan {
    guard let loaded, loaded.generation == generation, systemIsIncremental else { return .full(lists()) }
    if loaded.version == version { return .upToDate }
    guard let change = history.change(from: loaded.version, to: version) else { return .full(lists()) }
    return .incremental(change)
  }
}

/// The last directory changes the app applied, so that an extension several updates behind can
/// still load incrementally. Bounded: older changes are dropped, and a plan that needs them is
/// a full reload.
public struct DirectoryChangeHistory: Sendable, Equatable, Codable {
  public static let defaultCapacity = 16

  public private(set) var changes: [DirectoryChange] = []
  public let capacity: Int

  public init(capacity: Int = Self.defaultCapacity) { self.capacity = max(1, capacity) }

  /// Records a step; a step that does not continue the last one (a full snapshot that jumped)
  /// starts the history again.
  public mutating func record(_ change: DirectoryChange) {
    if let last = changes.last, last.toVersion != change.fromVersion { changes.removeAll() }
    changes.append(change)
    if changes.count > capacity { changes.removeFirst(changes.count - capacity) }
  }

  /// The changes from `from` to `to` as one step, or nil when the history does not reach back.
  public func change(from: Int64, to: Int64) -> DirectoryChange? {
    guard let start = changes.firstIndex(where: { $0.fromVersion == from }) else { return nil }
    var combined = changes[start]
    for step in changes[(start + 1)...] {
      guard combined.toVersion != to, let next = combined.then(step) else { break }
      combined = next
    }
    return combined.toVersion == to ? combined : nil
  }
}
