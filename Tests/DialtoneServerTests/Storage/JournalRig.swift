import DialtoneSupport
import Foundation

@testable import DialtoneStorage

/// A call journal started on a fresh SQLite live-call store in a directory of its own, with the
/// highest ticket it reported. `remove()` deletes the directory (close the journal first).
final class JournalRig {
  let directory: String
  let store: SQLiteLiveCallStore
  let journal: CallJournal
  let reported = Locked<UInt64>(0)

  init() throws {
    directory = NSTemporaryDirectory() + "dialtone-journal-\(UUID().uuidString)"
    store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    journal = CallJournal(store: store, log: Log(level: .error, subsystem: "test"))
    journal.start { [reported] ticket in reported.withLock { $0 = max($0, ticket) } }
  }

  func remove() { try? FileManager.default.removeItem(atPath: directory) }
}
