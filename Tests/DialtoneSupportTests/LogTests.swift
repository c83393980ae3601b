import DialtoneJSON
import DialtoneSupport
import Foundation
import Testing

struct LogTests {
  @Test func jsonLogLinesAreObjectsWithTheirContext() throws {
    let line = StandardErrorLog.line(
      LogEntry(
        time: Date(timeIntervalSince1970: 1_796_000_000.25), level: .warning, component: "signaling",
        message: "a \"quoted\" thing", callId: "c-1", sessionId: "s_2"),
      format: .json)
    #expect(line.hasSuffix("\n"))
    let json = try #require(JSONValue(parsing: Array(line.utf8)))
    #expect(json["level"]?.stringValue == "warning")
    #expect(json["component"]?.stringValue == "signaling")
    #expect(json["msg"]?.stringValue == "a \"quoted\" thing")
    #expect(json["callId"]?.stringValue == "c-1" && json["sessionId"]?.stringValue == "s_2")
    #expect(json["time"]?.stringValue == "2026-11-30T00:53:20.250Z")
    let text = StandardErrorLog.line(
      LogEntry(time: Date(timeIntervalSince1970: 0), level: .info, component: "calls", message: "ended", callId: "c-1"),
      format: .text)
    #expect(text == "1970-01-01T00:00:00.000Z info    calls: ended [call=c-1]\n")
  }

  /// An app's own sink gets every entry at or above the level, with its component and context,
  /// and nothing below it is even formatted.
  @Test func anAppsSinkGetsWhatItsLevelLetsThrough() {
    final class Memory: LogSink {
      let entries = Locked<[LogEntry]>([])
      func write(_ entry: LogEntry) { entries.withLock { $0.append(entry) } }
    }
    let memory = Memory()
    let log = Log(level: .info, subsystem: "call-engine", sink: memory).scoped("signaling")
    var formatted = false
    log.debug(
      {
        formatted = true
        return "hidden"
      }())
    log.info("connected", sessionId: "s_1")
    log.error("lost", callId: "c-9")
    #expect(!formatted)
    #expect(memory.entries.current.map(\.message) == ["connected", "lost"])
    #expect(memory.entries.current.map(\.component) == ["signaling", "signaling"])
    #expect(memory.entries.current.last?.callId == "c-9" && memory.entries.current.first?.sessionId == "s_1")
  }

  /// The in-memory sink keeps the latest entries, oldest first, and counts what it overwrote.
  @Test func recentEntriesKeepTheLatestInOrder() {
    let recent = RecentLogEntries(capacity: 3)
    let log = Log(level: .debug, subsystem: "call", sink: recent)
    for n in 1...5 { log.info("entry \(n)") }
    #expect(recent.entries.map(\.message) == ["entry 3", "entry 4", "entry 5"])
    #expect(recent.droppedCount == 2)
  }
}
