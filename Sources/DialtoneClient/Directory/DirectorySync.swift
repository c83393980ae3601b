import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The app's side of the Call Directory: fetches the user's directory (protocol.md §16.11),
/// keeps the app-group file the extension loads from, and asks the system to reload the
/// extension as often as `DirectoryReloadThrottle` allows.
///
/// The last good file is never lost: a failed fetch, an answer that cannot be applied or a
/// failed write leaves it as it was. A file that cannot be decoded (corrupt, or written by a
/// newer app) is dropped and the directory fetched whole again.
public actor DirectorySync {
  /// `GET /v1/directory?since=` (nil: no `since`, the whole lists).
  public typealias Fetch = @Sendable (_ since: Int64?) async throws -> DirectoryResponse

  public enum Outcome: Sendable, Equatable {
    /// The file has `version` and the system reloaded the extension from it.
    case updated(version: Int64)
    /// The server had nothing new, and the system was already given what the file has.
    case unchanged(version: Int64)
    /// The file has `version`; the system is asked no earlier than `until` (refresh again then).
    case reloadDeferred(version: Int64, until: Date)
    case failed(DirectorySyncError)
  }

  /// The directory as the app has it: the file's contents, kept in memory between refreshes.
  private struct State {
    var generation: String
    var directory: PhoneDirectory
    var history: DirectoryChangeHistory

    var file: CallDirectoryFile { CallDirectoryFile(generation: generation, directory: directory, history: history) }
    var marker: CallDirectoryLoadedMarker {
      CallDirectoryLoadedMarker(generation: generation, version: directory.version)
    }
  }

  private let fetch: Fetch
  private let store: any CallDirectoryStore
  private let reloader: any CallDirectoryReloader
  private let clock: any DialtoneClock
  private let historyCapacity: Int
  private let makeGeneration: @Sendable () -> String
  private var throttle: DirectoryReloadThrottle
  private var state: State?
  private var loadedFromStore = false
  /// The file was written since the system last reloaded successfully.
  private var reloadPending = false

  /// - Parameters:
  ///   - makeGeneration: a new id each call (a history that starts again gets one).
  public init(
    fetch: @escaping Fetch, store: any CallDirectoryStore, reloader: any CallDirectoryReloader,
    clock: any DialtoneClock = SystemClock(), throttle: DirectoryReloadThrottle = DirectoryReloadThrottle(),
    historyCapacity: Int = DirectoryChangeHistory.defaultCapacity,
    makeGeneration: @escaping @Sendable () -> String = { UUID().uuidString }
  ) {
    self.fetch = fetch
    self.store = store
    self.reloader = reloader
    self.clock = clock
    self.throttle = throttle
    self.historyCapacity = historyCapacity
    self.makeGeneration = makeGeneration
  }

  /// The version the file has (nil: none yet).
  public var version: Int64? { state?.directory.version }

  /// Brings the file up to date and reloads the extension when allowed. `userInitiated`: a
  /// block or unblock the user just made, which skips the hourly limit (not a failure's backoff).
  ///
  /// Concurrent calls are safe: each applies its answer to the directory as it is when the
  /// answer arrives, and an answer that no longer continues it is replaced by the whole lists.
  public func refresh(userInitiated: Bool = false) async -> Outcome {
    do {
      try loadFromStoreOnce()
    } catch {
      return .failed(error)
    }
    let since = state?.directory.version
    let next: State?
    do {
      next = try await fetchAndApply(since: since)
    } catch {
      return .failed(error)
    }
    if let next {
      do {
        try store.write(try next.file.encoded(), to: CallDirectoryFile.fileName)
      } catch {
        return .failed(.store("cannot write \(CallDirectoryFile.fileName): \(error)"))
      }
      state = next
      reloadPending = true
    }
    guard let current = state else { return .failed(.store("no directory after a fetch")) }
    guard reloadPending else { return .unchanged(version: current.directory.version) }
    return await reloadIfAllowed(userInitiated: userInitiated, current: current)
  }

  // MARK: Steps

  /// Reads the file once per process: afterwards the app, its only writer, knows what is in it.
  private func loadFromStoreOnce() throws(DirectorySyncError) {
    guard !loadedFromStore else { return }
    let data: Data?
    do {
      data = try store.read(CallDirectoryFile.fileName)
    } catch {
      // Unreadable is not corrupt (a locked device, say): keep the file and try again later.
      throw .store("cannot read \(CallDirectoryFile.fileName): \(error)")
    }
    loadedFromStore = true
    guard let data, let file = try? CallDirectoryFile.decode(data) else { return }
    let loaded = State(generation: file.generation, directory: file.directory, history: file.history)
    state = loaded
    let marker = CallDirectoryLoadedMarker.decode(try? store.read(CallDirectoryLoadedMarker.fileName))
    reloadPending = marker != loaded.marker
  }

  /// The state after the server's answer; nil when nothing changed.
  private func fetchAndApply(since: Int64?) async throws(DirectorySyncError) -> State? {
    let response = try await fetchResponse(since: since)
    do {
      return try apply(response, since: since)
    } catch .response(.notAContinuation) {
      // Not from the version this device has (another refresh moved it, or the server's
      // history was reset): the whole lists, once.
      return try apply(try await fetchResponse(since: nil), since: nil)
    }
  }

  private func fetchResponse(since: Int64?) async throws(DirectorySyncError) -> DirectoryResponse {
    do {
      return try await fetch(since)
    } catch {
      throw .fetch(String(describing: error))
    }
  }

  /// Applies `response` to the directory as it is now (it may have moved during the fetch).
  private func apply(_ response: DirectoryResponse, since: Int64?) throws(DirectorySyncError) -> State? {
    let base = state?.directory ?? PhoneDirectory()
    let next: PhoneDirectory
    let change: DirectoryChange
    do {
      (next, change) = try base.applying(response, since: since)
    } catch {
      throw .response(error)
    }
    guard var current = state else {
      return State(
        generation: makeGeneration(), directory: next, history: DirectoryChangeHistory(capacity: historyCapacity))
    }
    if next.version > current.directory.version {
      current.directory = next
      current.history.record(change)
      return current
    }
    if next.version == current.directory.version && change.isEmpty { return nil }
    // Versions went back, or the same version holds other lists: the server's history was
    // reset, and the numbers the extension may have loaded mean something else now.
    return State(
      generation: makeGeneration(), directory: next, history: DirectoryChangeHistory(capacity: historyCapacity))
  }

  private func reloadIfAllowed(userInitiated: Bool, current: State) async -> Outcome {
    let version = current.directory.version
    switch throttle.request(now: clock.now, userInitiated: userInitiated) {
    case .notBefore(let date):
      return .reloadDeferred(version: version, until: date)
    case .reloadNow:
      do {
        try await reloader.reloadExtension()
      } catch {
        throttle.finished(now: clock.now, succeeded: false)
        return .failed(.reload(String(describing: error)))
      }
      throttle.finished(now: clock.now, succeeded: true)
      // A refresh that wrote a newer file meanwhile still needs its own reload.
      if state?.marker == current.marker { reloadPending = false }
      return .updated(version: version)
    }
  }
}

/// Why a refresh did not bring the system up to date. Every case leaves the last good file.
public enum DirectorySyncError: Error, Equatable, CustomStringConvertible {
  /// The server could not be asked, or refused.
  case fetch(String)
  /// The server's answer cannot be applied, even as the whole lists.
  case response(DirectoryError)
  /// The app-group file could not be read or written.
  case store(String)
  /// The file is written, but the system did not reload the extension (it may be switched off
  /// in Settings); the throttle backs off before the next try.
  case reload(String)

  public var description: String {
    switch self {
    case .fetch(let why): return "the directory could not be fetched: \(why)"
    case .response(let error): return "the directory's answer cannot be applied: \(error)"
    case .store(let why): return "the call directory file: \(why)"
    case .reload(let why): return "the system did not reload the call directory extension: \(why)"
    }
  }
}
