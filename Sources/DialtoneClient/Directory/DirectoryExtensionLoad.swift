import Foundation

/// What the Call Directory extension does for one request of the system, decided from the two
/// files alone so that the extension's handler is a loop over these lists: remove everything
/// (`removeAll`), then the removals, then the additions, each list ascending, then complete
/// the request and, once the system confirmed it, write `markerAfterCompletion`.
public struct DirectoryExtensionLoad: Sendable, Equatable {
  /// `removeAllIdentificationEntries()` and `removeAllBlockingEntries()` first. Only in an
  /// incremental request: a complete one starts empty, and Apple says not to call them there.
  public var removeAll = false
  public var removeIdentification: [Int64] = []
  public var removeBlocking: [Int64] = []
  public var addIdentification: [CallDirectoryLists.Entry] = []
  public var addBlocking: [Int64] = []
  /// What the system has once it confirmed this load; nil: nothing new to record.
  public var markerAfterCompletion: CallDirectoryLoadedMarker?

  /// No entry to add or remove.
  public var isEmpty: Bool {
    !removeAll && removeIdentification.isEmpty && removeBlocking.isEmpty && addIdentification.isEmpty
      && addBlocking.isEmpty
  }

  public init() {}

  /// - Parameters:
  ///   - file: the app's `CallDirectoryFile`; nil when the app has not written one yet (the
  ///     request then completes with nothing, as the app has nothing to give).
  ///   - marker: the extension's `CallDirectoryLoadedMarker` (nil or unreadable: unknown).
  ///   - isIncremental: the request's `isIncremental`.
  /// - Throws: for a corrupt or newer file: the extension cancels the request with it, so the
  ///   system keeps what it had rather than an empty directory; the app writes the file anew.
  public static func plan(file: Data?, marker: Data?, isIncremental: Bool) throws(CallDirectoryFileError)
    -> DirectoryExtensionLoad
  {
    guard let file else { return DirectoryExtensionLoad() }
    let contents = try CallDirectoryFile.decode(file)
    let loaded = CallDirectoryLoadedMarker.decode(marker)
    var load = DirectoryExtensionLoad()
    switch DirectoryReloadPlan.plan(loaded: loaded, file: contents, systemIsIncremental: isIncremental) {
    case .upToDate:
      return load
    case .full(let lists):
      load.removeAll = isIncremental
      load.addIdentification = lists.identification
      load.addBlocking = lists.blocking
    case .incremental(let change):
      load.removeIdentification = change.removedIdentification
      load.removeBlocking = change.removedBlocking
      load.addIdentification = change.addedIdentification
      load.addBlocking = change.addedBlocking
    }
    load.markerAfterCompletion = CallDirectoryLoadedMarker(generation: contents.generation, version: contents.version)
    return load
  }
}
