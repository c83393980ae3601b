import DialtoneCalls
import DialtoneProtocol
import DialtoneSQLite
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneStorage

/// The journal's cheaper writes (issue 40) keep what they promised: a change it reported is in
/// the files a crashed process leaves behind, an accept replaces the whole call in place, and
/// the other connections to the file still read and write it while the journal works.
struct LeanJournalTests {
  private func temporaryDirectory() -> String { NSTemporaryDirectory() + "dialtone-lean-\(UUID().uuidString)" }

  private func snapshot(_ callId: CallID, phase: LiveCallSnapshot.Phase = .ringing, grace: Int64? = 5000)
    -> LiveCallSnapshot
  {
    LiveCallSnapshot(
      callId: callId, caller: Identity(userId: "alice", deviceId: "phone", name: "Alice"), calleeId: "bob",
      video: true, createdAt: 1000, phase: phase, answeredBy: phase == .accepted ? "laptop" : nil,
      answeredAt: phase == .accepted ? 2000 : nil, ringDeadline: 46_000, callerGraceDeadline: grace,
      answererGraceDeadline: phase == .accepted ? 7000 : nil,
      invite: .invite(
        .init(
          callId: callId, from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), video: true,
          offer: phase == .ringing ? SessionDescription(sdp: String(repeating: "a=offer-line\r\n", count: 100)) : nil,
          createdAt: 1000)),
      accept: phase == .accepted
        ? .accept(
          .init(
            callId: callId, from: Peer(userId: "bob", deviceId: "laptop"),
            answer: .init(sdp: String(repeating: "a=answer-line\r\n", count: 100))))
        : nil,
      blocked: phase == .accepted)
  }

  private func record(_ callId: CallID) -> CallRecord {
    CallRecord(
      callId: callId, callerId: "alice", calleeId: "bob", answeredBy: "laptop", video: true, createdAt: 1000,
      answeredAt: 2000, endedAt: 9000, endReason: .hangup, durationMs: 7000)
  }

  /// The files as a process killed right after the report leaves them (no close, no checkpoint),
  /// opened elsewhere without its shared memory: what was reported is there.
  @Test func whatTheJournalReportedIsInTheFilesAKilledProcessLeaves() async throws {
    let directory = temporaryDirectory()
    let copy = temporaryDirectory()
    defer {
      try? FileManager.default.removeItem(atPath: directory)
      try? FileManager.default.removeItem(atPath: copy)
    }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    let journal = CallJournal(store: store, log: Log(level: .error, subsystem: "test"))
    let reported = Locked<UInt64>(0)
    journal.start { ticket in reported.withLock { $0 = max($0, ticket) } }
    _ = journal.submit([.put(snapshot("ringing")), .put(snapshot("accepted")), .put(snapshot("ended"))])
    _ = journal.submit([.put(snapshot("accepted", phase: .accepted, grace: nil))])
    let last = journal.submit([.ended(record("ended"), callerDevice: "phone", blocked: false)])
    for _ in 0..<5000 where reported.current < last { try await Task.sleep(for: .milliseconds(1)) }
    #expect(reported.current == last)

    try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
    for suffix in ["", "-wal"] {
      try FileManager.default.copyItem(
        atPath: (directory as NSString).appendingPathComponent("dialtone.sqlite") + suffix,
        toPath: (copy as NSString).appendingPathComponent("dialtone.sqlite") + suffix)
    }
    let restarted = try SQLiteLiveCallStore.open(dataDirectory: copy)
    #expect(
      try restarted.liveCalls().map(\.snapshot) == [
        snapshot("accepted", phase: .accepted, grace: nil), snapshot("ringing"),
      ])
    #expect(
      try restarted.callsEnded(since: 0)
        == [RecentlyEndedCall(record: record("ended"), callerDevice: "phone")])
    journal.close()
  }

  /// An accept (or any later put) rewrites every column of the call's row, in place: the row
  /// keeps its rowid, so its key's index entry is not deleted and inserted again.
  @Test func aLaterPutReplacesTheWholeCallInPlace() throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    let file = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("dialtone.sqlite"))
    func rowid(_ callId: CallID) throws -> Int64? {
      try file.query("SELECT rowid FROM live_calls WHERE call_id = ?", [.text(callId)]).first?.first?.int
    }
    try store.write([.put(snapshot("c1")), .put(snapshot("c2"))])
    let before = try rowid("c1")
    try store.write([.put(snapshot("c1", phase: .accepted, grace: nil))])
    #expect(try rowid("c1") == before)
    #expect(
      try store.liveCalls().first { $0.snapshot.callId == "c1" }?.snapshot
        == snapshot("c1", phase: .accepted, grace: nil))
    // And back to fewer columns set: nothing of the accepted state is left over.
    try store.write([.put(snapshot("c1", grace: 8000))])
    #expect(try store.liveCalls().first { $0.snapshot.callId == "c1" }?.snapshot == snapshot("c1", grace: 8000))
    #expect(try file.query("SELECT count(*) FROM live_calls").first?.first?.int == 2)
  }

  /// The journal's connection lets `framesPerCheckpoint` WAL frames gather before it checkpoints
  /// (SQLite's default would have copied them back after 1,000), and readers on other
  /// connections see every commit meanwhile.
  @Test func theJournalCheckpointsLessOftenAndOtherConnectionsStillRead() async throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    let history = try SQLiteStore.open(dataDirectory: directory)
    for n in 0..<600 {
      try store.write([.put(snapshot("c\(n)", phase: n.isMultiple(of: 2) ? .ringing : .accepted))])
    }
    try store.write([.ended(record("c0"), callerDevice: "phone", blocked: false)])
    #expect(try await store.isCallIdUsed("c599"))
    #expect(try await history.history(of: "alice", limit: 10, before: nil) == [record("c0")])
    let file = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("dialtone.sqlite"))
    #expect(try file.query("SELECT count(*) FROM live_calls").first?.first?.int == 599)
    // (busy, frames in the WAL, frames copied): more than SQLite's default lets gather.
    let frames = try file.query("PRAGMA wal_checkpoint(PASSIVE)").first?[1].int ?? 0
    #expect(frames > 1000 && frames <= Int64(SQLiteLiveCallStore.framesPerCheckpoint))
  }

  /// Past `framesPerCheckpoint` frames a checkpoint runs on its own connection, off the
  /// committing thread; the commits after it start the WAL over, and nothing written is lost.
  @Test func aLongWALIsCheckpointedBesideTheJournalAndStartsOver() async throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    let file = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("dialtone.sqlite"))
    var written = 0
    while store.checkpoints == 0 && written < 20_000 {
      try store.write([.put(snapshot("c\(written)"))])
      written += 1
    }
    #expect(store.checkpoints >= 1)
    // Once the checkpoint copied everything, a commit starts the WAL over.
    var frames = Int64.max
    for n in 0..<2000 where frames >= Int64(SQLiteLiveCallStore.framesPerCheckpoint) {
      try store.write([.put(snapshot("after-\(n)"))])
      written += 1
      frames = try file.query("PRAGMA wal_checkpoint(PASSIVE)").first?[1].int ?? .max
      if frames >= Int64(SQLiteLiveCallStore.framesPerCheckpoint) { try await Task.sleep(for: .milliseconds(5)) }
    }
    #expect(frames < Int64(SQLiteLiveCallStore.framesPerCheckpoint))
    #expect(try store.liveCalls().count == written)
  }

  /// The journal's thread has a name the system keeps (at most 15 characters), so that `top -H`
  /// and `perf` tell it from libdispatch's workers.
  @Test func theJournalThreadGoesByItsName() async throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let journal = CallJournal(
      store: try SQLiteLiveCallStore.open(dataDirectory: directory), log: Log(level: .error, subsystem: "test"))
    let name = Locked<String?>(nil)
    journal.start { _ in
      let comm = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
      name.withLock { $0 = comm?.trimmingCharacters(in: .whitespacesAndNewlines) }
    }
    _ = journal.submit([.put(snapshot("c1"))])
    journal.close()
    #expect(name.current == CallJournal.threadName)
  }

  /// The journal's thread is woken only when it sleeps, after the lock is let go: a submit that
  /// finds it asleep (after each report here) must still wake it, every time, or the outcome
  /// behind it would wait forever.
  @Test func everySubmitToASleepingJournalIsWrittenAndReported() async throws {
    let rig = try JournalRig()
    defer { rig.remove() }
    let (store, journal, reported) = (rig.store, rig.journal, rig.reported)
    for n in 0..<300 {
      let ticket = journal.submit([.put(snapshot("c\(n)"))])
      for _ in 0..<10_000 where reported.current < ticket { try await Task.sleep(for: .milliseconds(1)) }
      try #require(reported.current == ticket, "submit \(n) was not reported")
    }
    // Submits from several threads at once: each gets its own ticket, all are written.
    let tickets = Locked<[UInt64]>([])
    DispatchQueue.concurrentPerform(iterations: 4) { thread in
      for n in 0..<50 {
        let ticket = journal.submit([.put(snapshot("t\(thread)-\(n)"))])
        tickets.withLock { $0.append(ticket) }
      }
    }
    journal.close()
    #expect(Set(tickets.current).count == 200)
    #expect(reported.current == 500)
    #expect(try store.liveCalls().count == 500)
  }

  /// A batch submitted once the journal is closed (the server stopping) gets a ticket that is
  /// never reported, and is not written.
  @Test func aBatchSubmittedAfterCloseIsNeitherWrittenNorReported() throws {
    let rig = try JournalRig()
    defer { rig.remove() }
    let (store, journal, reported) = (rig.store, rig.journal, rig.reported)
    let written = journal.submit([.put(snapshot("before"))])
    journal.close()
    let late = journal.submit([.put(snapshot("after"))])
    #expect(late > written)
    #expect(reported.current == written)
    #expect(try store.liveCalls().map(\.snapshot.callId) == ["before"])
  }
}
