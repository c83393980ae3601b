import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneClient

/// What the Call Directory extension does for each request, from the app's file and its own
/// marker alone (the Apple handler only loops over the result).
struct DirectoryExtensionLoadTests {
  private let v3 = PhoneDirectory(version: 3, identify: [100: "a", 300: "c"], block: [7, 9])
  private let v5 = PhoneDirectory(version: 5, identify: [100: "A", 300: "c", 400: "d"], block: [9, 11])

  /// The app's file at version 5 of generation "g", with the step from 3.
  private func file(generation: String = "g") throws -> Data {
    var history = DirectoryChangeHistory()
    history.record(DirectoryChange(from: v3, to: v5))
    return try CallDirectoryFile(generation: generation, directory: v5, history: history).encoded()
  }

  private func marker(_ generation: String, _ version: Int64) throws -> Data {
    try CallDirectoryLoadedMarker(generation: generation, version: version).encoded()
  }

  @Test func aCompleteRequestAddsEverythingWithoutRemovingAndRecordsTheVersion() throws {
    let load = try DirectoryExtensionLoad.plan(file: try file(), marker: try marker("g", 3), isIncremental: false)
    #expect(!load.removeAll && load.removeIdentification.isEmpty && load.removeBlocking.isEmpty)
    #expect(load.addIdentification.map(\.number) == [100, 300, 400])
    #expect(load.addIdentification.map(\.label) == ["A", "c", "d"])
    #expect(load.addBlocking == [9, 11])
    #expect(load.markerAfterCompletion == CallDirectoryLoadedMarker(generation: "g", version: 5))
  }

  @Test func anIncrementalRequestGetsOnlyTheChangesSinceTheLoadedVersion() throws {
    let load = try DirectoryExtensionLoad.plan(file: try file(), marker: try marker("g", 3), isIncremental: true)
    #expect(!load.removeAll)
    // 100 relabelled: removed and added again.
    #expect(load.removeIdentification == [100])
    #expect(load.addIdentification == [.init(number: 100, label: "A"), .init(number: 400, label: "d")])
    #expect(load.removeBlocking == [7] && load.addBlocking == [11])
    #expect(load.markerAfterCompletion == CallDirectoryLoadedMarker(generation: "g", version: 5))
  }

  @Test func anotherGenerationOrNoMarkerIsAFullLoadThatRemovesAllFirst() throws {
    for stored in [try marker("old", 3), Data("garbage".utf8), nil] {
      let load = try DirectoryExtensionLoad.plan(file: try file(), marker: stored, isIncremental: true)
      #expect(load.removeAll)
      #expect(load.removeIdentification.isEmpty && load.removeBlocking.isEmpty)
      #expect(load.addIdentification.map(\.number) == [100, 300, 400] && load.addBlocking == [9, 11])
      #expect(load.markerAfterCompletion == CallDirectoryLoadedMarker(generation: "g", version: 5))
    }
  }

  @Test func aMarkerBeyondTheHistoryIsAFullLoad() throws {
    let load = try DirectoryExtensionLoad.plan(file: try file(), marker: try marker("g", 1), isIncremental: true)
    #expect(load.removeAll && load.addBlocking == [9, 11])
  }

  @Test func anUpToDateSystemGetsNoOperationsAndNoNewMarker() throws {
    let load = try DirectoryExtensionLoad.plan(file: try file(), marker: try marker("g", 5), isIncremental: true)
    #expect(load == DirectoryExtensionLoad())
    #expect(load.isEmpty && load.markerAfterCompletion == nil)
  }

  @Test func noFileYetCompletesWithNothing() throws {
    let load = try DirectoryExtensionLoad.plan(file: nil, marker: nil, isIncremental: false)
    #expect(load.isEmpty && load.markerAfterCompletion == nil)
  }

  @Test func aCorruptOrNewerFileIsAClearErrorAndNoOperations() throws {
    #expect(throws: CallDirectoryFileError.self) {
      try DirectoryExtensionLoad.plan(file: Data("{\"format\":2,".utf8), marker: nil, isIncremental: false)
    }
    do {
      _ = try DirectoryExtensionLoad.plan(file: Data("{\"format\":9}".utf8), marker: nil, isIncremental: true)
      Issue.record("a newer file was loaded")
    } catch {
      #expect(error == .unsupportedFormat(9))
      #expect(error.localizedDescription.contains("format 9"))
    }
  }
}
