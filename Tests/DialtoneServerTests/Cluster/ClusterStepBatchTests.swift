import DialtoneCluster
import DialtoneMetrics
import DialtoneProtocol
import DialtoneRedis
import DialtoneSessions
import DialtoneStorage
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// What a link reports, for a test to read.
private final class RecordingInbox: ClusterInbox, Sendable {
  private let events = Locked<[ClusterEvent]>([])

  func receive(_ event: ClusterEvent) { events.withLock { $0.append(event) } }

  var stored: [StoredFrame] {
    events.current.flatMap { event -> [StoredFrame] in
      if case .framesStored(let frames) = event { frames } else { [] }
    }
  }

  var broken: [String] {
    events.current.flatMap { event -> [String] in
      if case .sessionsBroken(let ids) = event { ids } else { [] }
    }
  }

  /// The batches of frames as they came, one per hand-back.
  var handBacks: Int {
    events.current.count { if case .framesStored = $0 { true } else { false } }
  }
}

/// A cluster link of its own (no heartbeat, no inbox reader: only its sender) on a fresh Redis
/// database, with sessions opened for it in the ledger.
private struct LinkRig {
  let link: ClusterLink
  let inbox = RecordingInbox()
  let registry = MetricsRegistry()
  let redis: RedisConnection
  let directory: String

  init(database: Int) throws {
    let server = try SharedRedis.server()
    redis = try server.connect(database: database, emptied: true)
    directory = NSTemporaryDirectory() + "dialtone-step-batch-\(UUID().uuidString)"
    let settings = ClusterLink.Settings(
      redis: try RedisConfiguration(url: server.url + "/\(database)"), node: "n1-test")
    link = ClusterLink(
      settings: settings, liveCalls: try SQLiteLiveCallStore.open(dataDirectory: directory),
      metrics: ClusterMetrics(registry: registry), log: Log(level: .error, subsystem: "test"))
    link.inbox.withLock { $0 = inbox }
  }

  func open(_ sessions: String...) throws {
    let ledger = SessionLedger(redis, limits: .init(capacity: 64, maxBytes: 1 << 20, expiry: .seconds(60)))
    for session in sessions { try ledger.open(session, userId: "u-\(session)", deviceId: "phone", node: link.thisNode) }
  }

  func candidate(_ text: String) -> ServerMessage {
    .candidate(
      .init(callId: "c1", from: Peer(userId: "alice", deviceId: "phone"), candidate: IceCandidate(candidate: text)))
  }

  /// How many transactions stored session steps, and how many steps they carried.
  var transactions: (count: Int, steps: Int) {
    let text = PrometheusTextFormat.render(registry)
    func value(_ name: String) -> Int {
      let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
      return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) } ?? 0
    }
    return (value("dialtone_cluster_store_transactions_total"), value("dialtone_cluster_store_steps_total"))
  }

  func stop() {
    link.sender.close(waitingUpTo: .seconds(5))
    redis.close()
    try? FileManager.default.removeItem(atPath: directory)
  }
}

/// The steps the hub asks for before one flush are stored as one transaction, each with its own
/// result: a step that fails breaks its own session only.
@Suite(.scratchRedis, .serialized) struct ClusterStepBatchTests {
  /// One message's step fails (its session's keys hold something else): only that session
  /// breaks; the others of the transaction are stored and handed back together, in order.
  @Test func aFailingStepInASharedTransactionBreaksOnlyItsOwnSession() throws {
    let rig = try LinkRig(database: 12)
    defer { rig.stop() }
    try rig.open("s1", "s3")
    try rig.redis.command(["SET", "dt:session:{s2}:meta", "not a hash"])
    for (index, session) in ["s1", "s2", "s3"].enumerated() {
      rig.link.append(rig.candidate("candidate:\(index)"), to: session, answering: nil, coalesced: false)
    }
    rig.link.flush()
    #expect(waitFor { rig.inbox.stored.count == 2 && rig.inbox.broken == ["s2"] })
    #expect(rig.inbox.stored.map(\.sessionID) == ["s1", "s3"])
    #expect(rig.inbox.handBacks == 1)
    #expect(rig.transactions.count == 1 && rig.transactions.steps == 3)
  }

  /// An event that asked the link for nothing it flushes (an acknowledgement held for
  /// housekeeping) is flushed without a lock; the next one that asks for a step is stored.
  @Test func aFlushAfterAnEventThatAskedForNothingTakesNothing() throws {
    let rig = try LinkRig(database: 12)
    defer { rig.stop() }
    try rig.open("s1")
    rig.link.acknowledge("s1", through: 0)
    #expect(!rig.link.asksPending)
    rig.link.flush()
    #expect(rig.transactions.count == 0)
    rig.link.append(rig.candidate("candidate:1"), to: "s1", answering: nil, coalesced: false)
    #expect(rig.link.asksPending)
    rig.link.flush()
    #expect(!rig.link.asksPending)
    #expect(waitFor { rig.inbox.stored.map(\.sessionID) == ["s1"] })
    #expect(rig.transactions.count == 1 && rig.transactions.steps == 1)
  }

  /// Polls the condition on this thread (the link's sender reports from its own).
  private func waitFor(_ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline {
      if condition() { return true }
      usleep(2000)
    }
    return condition()
  }
}
