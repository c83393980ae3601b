import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneClient

/// The app's side of the Call Directory with a scripted server, an in-memory app group, a
/// fake system reloader and virtual time.
struct DirectorySyncTests {
  struct Failure: Error, CustomStringConvertible {
    var description: String
  }

  /// The app-group container: files by name; reads or writes can be made to fail.
  final class MemoryStore: CallDirectoryStore {
    struct Files: Sendable {
      var data: [String: Data] = [:]
      var failReads = false
      var failWrites = false
      var writes = 0
    }
    let files = Locked(Files())

    func read(_ name: String) throws -> Data? {
      try files.withLock {
        if $0.failReads { throw Failure(description: "locked") }
        return $0.data[name]
      }
    }

    func write(_ data: Data, to name: String) throws {
      try files.withLock {
        if $0.failWrites { throw Failure(description: "disk full") }
        $0.data[name] = data
        $0.writes += 1
      }
    }

    func file() throws -> CallDirectoryFile? {
      try files.current.data[CallDirectoryFile.fileName].map { try CallDirectoryFile.decode($0) }
    }
  }

  /// The system: counts reloads; a failing one throws.
  final class FakeReloader: CallDirectoryReloader {
    let state = Locked((reloads: 0, fail: false))

    func reloadExtension() async throws {
      let fail = state.withLock { s -> Bool in
        s.reloads += 1
        return s.fail
      }
      if fail { throw Failure(description: "extension disabled") }
    }

    var reloads: Int { state.current.reloads }
    func setFailing(_ fail: Bool) { state.withLock { $0.fail = fail } }
  }

  /// The server: answers in order, recording each `since`.
  final class ScriptedServer: Sendable {
    let script: Locked<(answers: [Result<DirectoryResponse, Failure>], asked: [Int64?])>

    init(_ answers: [Result<DirectoryResponse, Failure>] = []) { script = Locked((answers, [])) }

    func then(_ answer: DirectoryResponse) { script.withLock { $0.answers.append(.success(answer)) } }
    func thenFail(_ why: String) { script.withLock { $0.answers.append(.failure(Failure(description: why))) } }
    var asked: [Int64?] { script.current.asked }

    func fetch(_ since: Int64?) throws -> DirectoryResponse {
      let answer = script.withLock { s -> Result<DirectoryResponse, Failure> in
        s.asked.append(since)
        return s.answers.isEmpty ? .failure(Failure(description: "unscripted")) : s.answers.removeFirst()
      }
      return try answer.get()
    }
  }

  let store = MemoryStore()
  let reloader = FakeReloader()
  let server = ScriptedServer()
  let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
  let generations = Locked(0)

  func makeSync() -> DirectorySync {
    let server = server
    let generations = generations
    return DirectorySync(
      fetch: { since in try server.fetch(since) }, store: store, reloader: reloader, clock: clock,
      throttle: DirectoryReloadThrottle(interval: 3600, firstBackoff: 60),
      makeGeneration: {
        generations.withLock {
          $0 += 1
          return "gen\($0)"
        }
      })
  }

  private func entry(_ number: Int64, _ label: String) -> DirectoryIdentification {
    DirectoryIdentification(number: number, label: label)
  }

  private var snapshot3: DirectoryResponse {
    DirectoryResponse(version: 3, full: true, identify: [entry(100, "a")], block: [7, 9])
  }

  @Test func theFirstRefreshFetchesEverythingWritesTheFileAndReloads() async throws {
    server.then(snapshot3)
    let outcome = await makeSync().refresh()
    #expect(outcome == .updated(version: 3))
    #expect(server.asked == [nil])
    let file = try #require(try store.file())
    #expect(file.generation == "gen1" && file.version == 3)
    #expect(file.lists.identification == [.init(number: 100, label: "a")] && file.lists.blocking == [7, 9])
    #expect(reloader.reloads == 1)
    // The app never writes the extension's marker.
    #expect(store.files.current.data[CallDirectoryLoadedMarker.fileName] == nil)
  }

  @Test func aContinuationIsAppliedAndRecordedSoTheExtensionLoadsIncrementally() async throws {
    let sync = makeSync()
    server.then(snapshot3)
    _ = await sync.refresh()
    // The extension loaded version 3.
    try store.write(
      try CallDirectoryLoadedMarker(generation: "gen1", version: 3).encoded(), to: CallDirectoryLoadedMarker.fileName)
    server.then(DirectoryResponse(version: 4, full: false, identify: [entry(200, "b")], removedBlock: [9]))
    clock.advance(by: 3600)
    #expect(await sync.refresh() == .updated(version: 4))
    #expect(server.asked == [nil, 3])
    let file = try #require(try store.file())
    #expect(file.generation == "gen1" && file.version == 4 && file.lists.blocking == [7])
    let load = try DirectoryExtensionLoad.plan(
      file: store.files.current.data[CallDirectoryFile.fileName],
      marker: store.files.current.data[CallDirectoryLoadedMarker.fileName], isIncremental: true)
    #expect(!load.removeAll && load.removeBlocking == [9] && load.addIdentification == [.init(number: 200, label: "b")])
    #expect(load.addBlocking.isEmpty && load.removeIdentification.isEmpty)
  }

  @Test func aChangeSetThatDoesNotContinueIsReplacedByTheWholeListsOnce() async throws {
    let sync = makeSync()
    server.then(snapshot3)
    _ = await sync.refresh()
    // Not from version 3 (a change set cannot go back).
    server.then(DirectoryResponse(version: 2, full: false, block: [8]))
    server.then(DirectoryResponse(version: 6, full: true, identify: [entry(100, "a")], block: [8]))
    #expect(await sync.refresh(userInitiated: true) == .updated(version: 6))
    #expect(server.asked == [nil, 3, nil])
    let file = try #require(try store.file())
    #expect(file.version == 6 && file.lists.blocking == [8])
    // The whole lists continue the history: same generation, the step 3 → 6 recorded.
    #expect(file.generation == "gen1")
    #expect(file.history.change(from: 3, to: 6)?.removedBlocking == [7, 9])

    // A server that keeps answering change sets from elsewhere: one retry, then a clear error.
    server.then(DirectoryResponse(version: 1, full: false, block: [1_000_000]))
    server.then(DirectoryResponse(version: 1, full: false, block: [1_000_000]))
    let outcome = await sync.refresh()
    guard case .failed(.response(.notAContinuation)) = outcome else {
      Issue.record("\(outcome)")
      return
    }
    #expect(server.asked == [nil, 3, nil, 6, nil])
    #expect(try store.file()?.version == 6)
  }

  @Test func versionsGoingBackStartANewGenerationWithoutTheOldHistory() async throws {
    let sync = makeSync()
    server.then(snapshot3)
    _ = await sync.refresh()
    server.then(DirectoryResponse(version: 4, full: false, block: [8]))
    _ = await sync.refresh(userInitiated: true)
    // The server was reset: asked since 4, it has version 2 only.
    server.then(DirectoryResponse(version: 2, full: true, block: [5_000_000]))
    #expect(await sync.refresh(userInitiated: true) == .updated(version: 2))
    let file = try #require(try store.file())
    #expect(file.generation == "gen2" && file.version == 2 && file.history.changes.isEmpty)
    // The same version with other lists is a reset too.
    server.then(DirectoryResponse(version: 2, full: true, block: [6_000_000]))
    #expect(await sync.refresh(userInitiated: true) == .updated(version: 2))
    #expect(try store.file()?.generation == "gen3")
  }

  @Test func aFailedFetchKeepsTheLastFile() async throws {
    let sync = makeSync()
    server.then(snapshot3)
    _ = await sync.refresh()
    let before = store.files.current.data[CallDirectoryFile.fileName]
    server.thenFail("HTTP 503")
    #expect(await sync.refresh() == .failed(.fetch("HTTP 503")))
    #expect(store.files.current.data[CallDirectoryFile.fileName] == before)
    #expect(store.files.current.writes == 1)
    // The next refresh still asks from the version the file has.
    server.then(DirectoryResponse(version: 3, full: false))
    #expect(await sync.refresh() == .unchanged(version: 3))
    #expect(server.asked == [nil, 3, 3])
  }

  @Test func aFailedWriteKeepsTheLastFileAndTheVersion() async throws {
    let sync = makeSync()
    server.then(snapshot3)
    _ = await sync.refresh()
    store.files.withLock { $0.failWrites = true }
    server.then(DirectoryResponse(version: 4, full: false, block: [8]))
    guard case .failed(.store) = await sync.refresh() else {
      Issue.record("a failed write was not reported")
      return
    }
    #expect(await sync.version == 3)
    store.files.withLock { $0.failWrites = false }
    server.then(DirectoryResponse(version: 4, full: false, block: [8]))
    _ = await sync.refresh(userInitiated: true)
    #expect(server.asked == [nil, 3, 3])
    #expect(try store.file()?.lists.blocking == [7, 8, 9])
  }

  @Test func aCorruptOrNewerFileIsReplacedAfterAFullFetch() async throws {
    for bytes in [Data("{\"format\":2,\"gen".utf8), Data("{\"format\":7,\"whatever\":true}".utf8)] {
      let store = MemoryStore()
      try store.write(bytes, to: CallDirectoryFile.fileName)
      let server = ScriptedServer([.success(snapshot3)])
      let sync = DirectorySync(
        fetch: { try server.fetch($0) }, store: store, reloader: reloader, clock: clock, makeGeneration: { "fresh" })
      #expect(await sync.refresh() == .updated(version: 3))
      #expect(server.asked == [nil])
      #expect(try store.file()?.generation == "fresh")
    }
  }

  @Test func anUnreadableFileIsKeptAndTriedAgain() async throws {
    let sync = makeSync()
    server.then(snapshot3)
    _ = await sync.refresh()
    let restarted = makeSync()
    store.files.withLock { $0.failReads = true }
    guard case .failed(.store) = await restarted.refresh() else {
      Issue.record("an unreadable file was not reported")
      return
    }
    store.files.withLock { $0.failReads = false }
    server.then(DirectoryResponse(version: 3, full: false))
    _ = await restarted.refresh()
    #expect(server.asked == [nil, 3])
    #expect(try store.file()?.generation == "gen1")
  }

  @Test func aRestartedAppResumesFromTheFileAndReloadsOnlyWhenTheSystemIsBehind() async throws {
    server.then(snapshot3)
    _ = await makeSync().refresh()
    // The extension confirmed version 3: nothing to reload after a restart.
    try store.write(
      try CallDirectoryLoadedMarker(generation: "gen1", version: 3).encoded(), to: CallDirectoryLoadedMarker.fileName)
    server.then(DirectoryResponse(version: 3, full: false))
    #expect(await makeSync().refresh() == .unchanged(version: 3))
    #expect(reloader.reloads == 1)
    // The system never loaded it (the app stopped before reloading): reload.
    try store.write(
      try CallDirectoryLoadedMarker(generation: "gen1", version: 2).encoded(), to: CallDirectoryLoadedMarker.fileName)
    server.then(DirectoryResponse(version: 3, full: false))
    #expect(await makeSync().refresh() == .updated(version: 3))
    #expect(reloader.reloads == 2)
    #expect(server.asked == [nil, 3, 3])
  }

  @Test func reloadsWaitForTheIntervalUnlessTheUserAskedAndAPendingReloadIsNotLost() async throws {
    let sync = makeSync()
    let t0 = clock.now
    server.then(snapshot3)
    #expect(await sync.refresh() == .updated(version: 3))
    clock.advance(by: 10)
    server.then(DirectoryResponse(version: 4, full: false, block: [8]))
    #expect(await sync.refresh() == .reloadDeferred(version: 4, until: t0.addingTimeInterval(3600)))
    #expect(reloader.reloads == 1)
    #expect(try store.file()?.version == 4)
    // Nothing new from the server, but the system is still behind: deferred again, then done.
    clock.advance(by: 10)
    server.then(DirectoryResponse(version: 4, full: false))
    #expect(await sync.refresh() == .reloadDeferred(version: 4, until: t0.addingTimeInterval(3600)))
    clock.advance(by: 3600)
    server.then(DirectoryResponse(version: 4, full: false))
    #expect(await sync.refresh() == .updated(version: 4))
    server.then(DirectoryResponse(version: 4, full: false))
    #expect(await sync.refresh() == .unchanged(version: 4))
    // A block the user just made goes at once.
    clock.advance(by: 1)
    server.then(DirectoryResponse(version: 5, full: false, block: [10]))
    #expect(await sync.refresh(userInitiated: true) == .updated(version: 5))
    #expect(reloader.reloads == 3)
  }

  @Test func aFailedReloadBacksOffAndIsRetried() async throws {
    let sync = makeSync()
    reloader.setFailing(true)
    server.then(snapshot3)
    #expect(await sync.refresh(userInitiated: true) == .failed(.reload("extension disabled")))
    #expect(try store.file()?.version == 3)
    let failedAt = clock.now
    clock.advance(by: 30)
    server.then(DirectoryResponse(version: 3, full: false))
    #expect(
      await sync.refresh(userInitiated: true) == .reloadDeferred(version: 3, until: failedAt.addingTimeInterval(60)))
    #expect(reloader.reloads == 1)
    reloader.setFailing(false)
    clock.advance(by: 30)
    server.then(DirectoryResponse(version: 3, full: false))
    #expect(await sync.refresh(userInitiated: true) == .updated(version: 3))
    #expect(reloader.reloads == 2)
  }

  /// Holds one fetch's answer until opened.
  final class Gate: Sendable {
    let state = Locked<(armed: Bool, waiting: CheckedContinuation<Void, Never>?, open: Bool)>((false, nil, false))

    func arm() { state.withLock { $0.armed = true } }
    var isHolding: Bool { state.withLock { $0.waiting != nil } }

    func passIfArmed() async {
      guard
        state.withLock({ s -> Bool in
          defer { s.armed = false }
          return s.armed
        })
      else { return }
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let goNow = state.withLock { s -> Bool in
          if s.open { return true }
          s.waiting = continuation
          return false
        }
        if goNow { continuation.resume() }
      }
    }

    func open() {
      let waiting = state.withLock { s -> CheckedContinuation<Void, Never>? in
        s.open = true
        defer { s.waiting = nil }
        return s.waiting
      }
      waiting?.resume()
    }
  }

  @Test func anAnswerThatArrivesAfterANewerOneIsAppliedToTheNewerDirectory() async throws {
    let gate = Gate()
    let server = server
    let sync = DirectorySync(
      fetch: { since in
        let answer = try server.fetch(since)
        await gate.passIfArmed()
        return answer
      }, store: store, reloader: reloader, clock: clock, makeGeneration: { "g" })
    server.then(snapshot3)
    _ = await sync.refresh()
    // A slow refresh gets version 4; a quicker one, started later, gets 5 first.
    server.then(DirectoryResponse(version: 4, full: false, block: [8]))
    gate.arm()
    let slow = Task { await sync.refresh() }
    #expect(await eventually { gate.isHolding })
    server.then(DirectoryResponse(version: 5, full: false, identify: [entry(500, "e")], block: [8]))
    _ = await sync.refresh(userInitiated: true)
    #expect(try store.file()?.version == 5)
    // Version 4's change set no longer continues: the whole lists, which are version 5 again.
    server.then(
      DirectoryResponse(version: 5, full: true, identify: [entry(100, "a"), entry(500, "e")], block: [7, 8, 9]))
    gate.open()
    #expect(await slow.value == .unchanged(version: 5))
    #expect(server.asked == [nil, 3, 3, nil])
    let file = try #require(try store.file())
    #expect(file.version == 5 && file.lists.identification.map(\.number) == [100, 500])
  }

  @Test func theHistoryIsBounded() async throws {
    let server = ScriptedServer([.success(snapshot3)])
    let sync = DirectorySync(
      fetch: { try server.fetch($0) }, store: store, reloader: reloader, clock: clock, historyCapacity: 2,
      makeGeneration: { "g" })
    _ = await sync.refresh()
    for version in Int64(4)...7 {
      server.then(DirectoryResponse(version: version, full: false, block: [1_000_000 + version]))
      _ = await sync.refresh(userInitiated: true)
    }
    let file = try #require(try store.file())
    #expect(file.history.changes.map(\.fromVersion) == [5, 6])
  }

  @Test func theFileStoreReplacesFilesWhole() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dialtone-dir-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = DirectoryFileStore(directory: directory.appendingPathComponent("group"))
    #expect(try store.read("a.json") == nil)
    try store.write(Data("one".utf8), to: "a.json")
    try store.write(Data("two".utf8), to: "a.json")
    #expect(try store.read("a.json") == Data("two".utf8))
    // Only the file itself is left: the temporary copy was renamed over it.
    let names = try FileManager.default.contentsOfDirectory(atPath: store.directory.path)
    #expect(names == ["a.json"])
  }
}
