import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneSessions
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  /// One inbox read's letters for write-behind sessions reach the shell together
  /// (`WriteBehindShell.letters`): the frames they write go to the hub in one hand-off.
  @Suite struct WriteBehindLetterRuns {
    /// Counts the hub's hand-offs of written frames.
    final class Hub: ClusterInbox, Sendable {
      let handOffs = Locked<[[UInt64]]>([])
      func receive(_ event: ClusterEvent) {
        guard case .framesStored(let frames) = event else { return }
        handOffs.withLock { $0.append(frames.map(\.seq)) }
      }
    }

    private func candidate(_ session: String, _ n: Int) -> WriteBehindHolder.Outgoing {
      let frame = SessionLedger.Frame(
        head: Array(#"{"seq":"#.utf8), tail: Array(#","n":\#(n),"type":"candidate"}"#.utf8))
      return .init(session: session, frame: frame, kind: .candidate)
    }

    @Test func aReadsLettersAreNumberedInOrderAndWrittenInOneHandOff() throws {
      let session = try ClaimedSession()
      defer { session.close() }
      let claimed = try #require(session.claimed)
      let sender = try writeBehindSender()
      let hub = Hub()
      let clock = Locked(ContinuousClock.now)
      let shell = WriteBehindShell(
        node: session.holder, holder: .init(lease: .seconds(600), margin: .seconds(1), batchWindow: .seconds(60)),
        ledger: session.limits, sender: sender, inbox: Locked<(any ClusterInbox)?>(hub),
        log: Log(level: .error, subsystem: "t"), now: { clock.current })
      defer {
        shell.stop()
        sender.close()
      }
      #expect(
        shell.hold(
          session.id, of: Identity(userId: "alice", deviceId: "phone", name: nil), epoch: session.epoch,
          lastSeq: claimed.lastSeq))
      // The hub has the session once the sender ran the hold's announcement: candidates are
      // written at once from then on.
      let announced = DispatchSemaphore(value: 0)
      #expect(sender.submit { _ in announced.signal() })
      #expect(announced.wait(timeout: .now() + 10) == .success)
      shell.letters((1...3).map { (candidate(session.id, $0), position: "\($0)-0") })
      #expect(hub.handOffs.current == [[1, 2, 3]])
      // One letter alone: a hand-off of its own, as before.
      shell.letter(candidate(session.id, 4), position: "4-0")
      #expect(hub.handOffs.current == [[1, 2, 3], [4]])
      // A read with nothing: nothing happens.
      shell.letters([])
      #expect(hub.handOffs.current.count == 2)
    }
  }
}

extension RedisTests.WriteBehindLetterRuns {
  /// The reader hands on each run of letters of one kind whole, the runs in inbox order: three
  /// unnumbered letters, another node's letter, two more unnumbered ones come as three hand-offs.
  @Test func theReaderHandsOnEachRunOfUnnumberedLettersWholeInInboxOrder() throws {
    let session = try ClaimedSession()
    defer { session.close() }
    func frame(_ n: Int) -> SessionLedger.Frame {
      .init(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"ice","n":\#(n)}"#.utf8))
    }
    let mailbox = NodeMailbox(session.redis, capacity: 100, expiry: .seconds(60))
    for n in 1...3 {
      #expect(try session.ledger.append(frame(n), to: session.id, from: session.producer) == .sent(seq: 0))
    }
    _ = try mailbox.send(ClusterLetterCodec.encode(.broken(sessionID: "s-other")), to: session.holder)
    for n in 4...5 {
      #expect(try session.ledger.append(frame(n), to: session.id, from: session.producer) == .sent(seq: 0))
    }
    let reader = ClusterInboxReader(
      settings: .init(redis: try RedisConfiguration(url: try SharedRedis.server().url), node: session.holder),
      log: Log(level: .error, subsystem: "t"))
    let handOffs = Locked<[String]>([])
    let done = DispatchSemaphore(value: 0)
    @Sendable func seen(_ what: String) {
      handOffs.withLock { $0.append(what) }
      if handOffs.current.count == 3 { done.signal() }
    }
    reader.start(
      { letters in seen("hub \(letters.count)") },
      unnumbered: { letters in
        let ns = letters.map { String(decoding: $0.0.frame.tail, as: UTF8.self).filter(\.isNumber) }
        seen("holder \(ns.joined(separator: ","))")
      })
    defer { reader.stop() }
    #expect(done.wait(timeout: .now() + 10) == .success)
    #expect(handOffs.current == ["holder 1,2,3", "hub 1", "holder 4,5"])
  }
}
