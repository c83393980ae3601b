import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneClient

/// The directory logic behind the Call Directory extension, on Linux: merging what the server
/// sends, the two ascending lists, full versus incremental reloads, and the reload throttle.
struct PhoneDirectoryTests {
  private func entry(_ number: Int64, _ label: String) -> DirectoryIdentification {
    DirectoryIdentification(number: number, label: label)
  }

  private let snapshot = DirectoryResponse(
    version: 3, full: true, identify: [DirectoryIdentification(number: 100, label: "a")], block: [7, 9])

  @Test func aSnapshotThenAChangeSetMerge() throws {
    let (first, _) = try PhoneDirectory().applying(snapshot, since: nil)
    #expect(first.version == 3 && first.identify == [100: "a"] && first.block == [7, 9])
    let delta = DirectoryResponse(
      version: 5, full: false, identify: [entry(100, "A"), entry(200, "b")], block: [8], removedIdentify: [],
      removedBlock: [9])
    let (second, change) = try first.applying(delta, since: 3)
    #expect(second.identify == [100: "A", 200: "b"] && second.block == [7, 8])
    #expect(change.removedIdentification == [100])
    #expect(change.addedIdentification == [.init(number: 100, label: "A"), .init(number: 200, label: "b")])
    #expect(change.removedBlocking == [9] && change.addedBlocking == [8])
    #expect(second.lists.identification.map(\.number) == [100, 200])
    #expect(second.lists.blocking == [7, 8])
  }

  @Test func unorderedListsAndChangeSetsFromAnotherVersionAreRefused() throws {
    let unordered = DirectoryResponse(version: 1, full: true, block: [9, 7])
    #expect(throws: DirectoryError.unordered(list: "block")) { try PhoneDirectory().applying(unordered, since: nil) }
    let repeated = DirectoryResponse(version: 1, full: true, identify: [entry(5, "x"), entry(5, "y")])
    #expect(throws: DirectoryError.unordered(list: "identify")) { try PhoneDirectory().applying(repeated, since: nil) }
    let (directory, _) = try PhoneDirectory().applying(snapshot, since: nil)
    let delta = DirectoryResponse(version: 4, full: false, block: [8])
    #expect(throws: DirectoryError.self) { try directory.applying(delta, since: 2) }
    #expect(throws: DirectoryError.self) {
      try directory.applying(DirectoryResponse(version: 2, full: false), since: 3)
    }
  }

  private func loaded(_ version: Int64, _ generation: String = "g") -> CallDirectoryLoadedMarker {
    CallDirectoryLoadedMarker(generation: generation, version: version)
  }

  @Test func reloadsAreIncrementalOnlyWhenTheHistoryReachesBack() throws {
    var history = DirectoryChangeHistory(capacity: 2)
    var (directory, change) = try PhoneDirectory().applying(snapshot, since: nil)
    history.record(change)
    for (version, response) in [
      (4, DirectoryResponse(version: 4, full: false, identify: [entry(300, "c")], removedBlock: [7])),
      (5, DirectoryResponse(version: 5, full: false, block: [7], removedIdentify: [100])),
    ] {
      (directory, change) = try directory.applying(response, since: Int64(version - 1))
      history.record(change)
    }
    #expect(
      DirectoryReloadPlan.plan(
        loaded: loaded(5), generation: "g", directory: directory, history: history, systemIsIncremental: true)
        == .upToDate)
    guard
      case .incremental(let fromThree) = DirectoryReloadPlan.plan(
        loaded: loaded(3), generation: "g", directory: directory, history: history, systemIsIncremental: true)
    else {
      Issue.record("no incremental plan from version 3")
      return
    }
    // Blocked 7 was unblocked and blocked again: no change. 100 went, 300 came.
    #expect(fromThree.removedBlocking.isEmpty && fromThree.addedBlocking.isEmpty)
    #expect(fromThree.removedIdentification == [100])
    #expect(fromThree.addedIdentification == [.init(number: 300, label: "c")])
    // The capacity of 2 dropped the snapshot's step: from 0 it is a full reload, as when the
    // system asks for a complete one.
    #expect(
      DirectoryReloadPlan.plan(
        loaded: loaded(0), generation: "g", directory: directory, history: history, systemIsIncremental: true)
        == .full(directory.lists))
    #expect(
      DirectoryReloadPlan.plan(
        loaded: loaded(3), generation: "g", directory: directory, history: history, systemIsIncremental: false)
        == .full(directory.lists))
    #expect(
      DirectoryReloadPlan.plan(
        loaded: nil, generation: "g", directory: directory, history: history, systemIsIncremental: true)
        == .full(directory.lists))
    // A load of another history: its version 5 is not this one's.
    #expect(
      DirectoryReloadPlan.plan(
        loaded: loaded(5, "old"), generation: "g", directory: directory, history: history, systemIsIncremental: true)
        == .full(directory.lists))
  }

  @Test func aNumberAddedAndRemovedBetweenLoadsIsNoChange() {
    let t0 = PhoneDirectory(version: 1)
    let t1 = PhoneDirectory(version: 2, identify: [5: "x"], block: [6])
    let t2 = PhoneDirectory(version: 3)
    var history = DirectoryChangeHistory()
    history.record(DirectoryChange(from: t0, to: t1))
    history.record(DirectoryChange(from: t1, to: t2))
    let change = history.change(from: 1, to: 3)
    #expect(change?.isEmpty == true)
  }

  @Test func theThrottleAllowsOneReloadPerIntervalUnlessTheUserAskedAndBacksOffFailures() {
    var throttle = DirectoryReloadThrottle(interval: 3600, firstBackoff: 60)
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    #expect(throttle.request(now: t0) == .reloadNow)
    throttle.finished(now: t0, succeeded: true)
    #expect(throttle.request(now: t0.addingTimeInterval(10)) == .notBefore(t0.addingTimeInterval(3600)))
    #expect(throttle.request(now: t0.addingTimeInterval(20), userInitiated: true) == .reloadNow)
    throttle.finished(now: t0.addingTimeInterval(20), succeeded: false)
    #expect(
      throttle.request(now: t0.addingTimeInterval(30), userInitiated: true) == .notBefore(t0.addingTimeInterval(80)))
    #expect(throttle.request(now: t0.addingTimeInterval(80), userInitiated: true) == .reloadNow)
    throttle.finished(now: t0.addingTimeInterval(80), succeeded: false)
    #expect(
      throttle.request(now: t0.addingTimeInterval(81), userInitiated: true) == .notBefore(t0.addingTimeInterval(200)))
    #expect(throttle.request(now: t0.addingTimeInterval(200), userInitiated: true) == .reloadNow)
    throttle.finished(now: t0.addingTimeInterval(200), succeeded: true)
    #expect(throttle.request(now: t0.addingTimeInterval(3799)) == .notBefore(t0.addingTimeInterval(3800)))
    #expect(throttle.request(now: t0.addingTimeInterval(3800)) == .reloadNow)
  }

  @Test func theAppGroupFileRoundTripsAndACorruptOneIsAClearError() throws {
    let directory = PhoneDirectory(version: 4, identify: [10: "x"], block: [3, 1])
    let file = CallDirectoryFile(generation: "g", directory: directory, history: DirectoryChangeHistory())
    #expect(try CallDirectoryFile.decode(try file.encoded()) == file)
    #expect(try CallDirectoryFile.decode(try file.encoded()).directory == directory)
    #expect(throws: CallDirectoryFileError.self) { try CallDirectoryFile.decode(Data("{\"format\":2".utf8)) }
    var newer = file
    newer.format = 3
    #expect(throws: CallDirectoryFileError.unsupportedFormat(3)) { try CallDirectoryFile.decode(try newer.encoded()) }
    // A newer app may have changed the layout too: still reported as a newer format.
    #expect(throws: CallDirectoryFileError.unsupportedFormat(3)) {
      try CallDirectoryFile.decode(Data("{\"format\":3,\"entries\":[]}".utf8))
    }
    let marker = CallDirectoryLoadedMarker(generation: "g", version: 4)
    #expect(CallDirectoryLoadedMarker.decode(try marker.encoded()) == marker)
    #expect(CallDirectoryLoadedMarker.decode(Data("nonsense".utf8)) == nil)
    #expect(CallDirectoryLoadedMarker.decode(nil) == nil)
  }
}
