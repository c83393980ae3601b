import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  /// Messages other nodes produce for a write-behind holder's sessions (`SessionLedger`'s append
  /// step on a session `WriteBehindStore.claim` marked).
  @Suite struct WriteBehindLetters {
    private func frame(_ n: Int) -> SessionLedger.Frame {
      .init(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"ice","n":\#(n)}"#.utf8))
    }

    @Test func aLiveHolderGetsTheMessageUnnumberedAndNothingIsAppended() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let limits = SessionLedger.Limits(expiry: .seconds(60))
      let ledger = SessionLedger(redis, limits: limits)
      let (id, holder, producer) = ("s_" + UUID().uuidString, "n-" + UUID().uuidString, "n-" + UUID().uuidString)
      try ClusterPresence(redis, nodeExpiry: .seconds(60)).heartbeat(holder)
      let epoch = try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      #expect(try WriteBehindStore(redis, limits: limits).claim(id, epoch: epoch) == .init(lastSeq: 0))
      #expect(try WriteBehindStore(redis, limits: limits).claim(id, epoch: epoch + 1) == nil)
      #expect(try ledger.append(frame(1), to: id, from: producer, requestID: "r\"1") == .sent(seq: 0))
      let letters = try NodeMailbox(redis, capacity: 100, expiry: .seconds(60)).receive(
        holder, after: "0", limit: 10, timeout: .milliseconds(10))
      let decoded = try letters.map { try UnnumberedLetter.decode($0.payload) }
      #expect(decoded == [UnnumberedLetter(session: id, frame: frame(1), requestID: "r\"1")])
      #expect(try ledger.range(id, after: 0) == .messages([]))
    }

    @Test func aDeadHoldersSessionGetsALetterNotASeqItsHolderMayHaveWritten() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let limits = SessionLedger.Limits(expiry: .seconds(60))
      let ledger = SessionLedger(redis, limits: limits)
      let (id, holder, producer) = ("s_" + UUID().uuidString, "n-" + UUID().uuidString, "n-" + UUID().uuidString)
      let epoch = try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      _ = try WriteBehindStore(redis, limits: limits).claim(id, epoch: epoch)
      // The holder wrote its client a candidate at seq 1 it had not stored, and died (no
      // heartbeat). Redis numbering the message would give it seq 1 too, which the client
      // resumes past: it goes into the dead holder's inbox unnumbered instead.
      #expect(try ledger.append(frame(1), to: id, from: producer, once: "k1") == .kept(seq: 0))
      let resumed = try ledger.resume(id, userId: "alice", deviceId: "phone", from: 1, node: producer, allowingAhead: 8)
      guard case .resumed(let last, _, let pending, _) = resumed else {
        Issue.record("not resumed: \(resumed)")
        return
      }
      #expect(last == 1 && pending == [])
      // The resuming node numbers it after the client's seq.
      #expect(
        try DeadHolderLetters.letters(for: id, of: holder, redis)
          == [UnnumberedLetter(session: id, frame: frame(1), requestID: nil, once: "k1")])
    }

    @Test func aFullInboxHasRedisNumberPastWhatTheHolderMayHaveWritten() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let limits = SessionLedger.Limits(capacity: 16, expiry: .seconds(60), inboxCapacity: 1)
      let ledger = SessionLedger(redis, limits: limits)
      let (id, holder, producer) = ("s_" + UUID().uuidString, "n-" + UUID().uuidString, "n-" + UUID().uuidString)
      try ClusterPresence(redis, nodeExpiry: .seconds(60)).heartbeat(holder)
      let epoch = try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      _ = try WriteBehindStore(redis, limits: limits).claim(id, epoch: epoch)
      #expect(try ledger.append(frame(1), to: id, from: producer) == .sent(seq: 0))
      // The inbox is full: Redis numbers it, past the 16 / 4 seqs the holder may have written
      // unstored, under a new epoch (the holder's batches are refused from now on).
      #expect(try ledger.append(frame(2), to: id, from: producer) == .kept(seq: 5))
      let batch = WriteBehindBatch(
        number: 1, sessions: [.init(id: id, epoch: epoch, frames: [.init(seq: 1, bytes: frame(9).bytes(seq: 1))])])
      #expect(try WriteBehindStore(redis, limits: limits).store(batch, from: holder) == [id: .superseded])
      // A client behind the skip resyncs (it may lack candidates nobody can replay); one at its
      // end goes on with the message.
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 1, node: producer) == .resync)
      guard
        case .resumed(5, _, let pending, _) = try ledger.resume(
          id, userId: "alice", deviceId: "phone", from: 4, node: producer)
      else {
        Issue.record("not resumed at 5")
        return
      }
      #expect(pending == [.init(sessionID: id, seq: 5, bytes: frame(2).bytes(seq: 5))])
    }

    @Test func aFrameAHolderStoredWithItsOnceKeyRefusesLaterCopiesAndIsLoadedByTheNextHolder() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let limits = SessionLedger.Limits(expiry: .seconds(60))
      let (ledger, store) = (SessionLedger(redis, limits: limits), WriteBehindStore(redis, limits: limits))
      let (id, holder, producer) = ("s_" + UUID().uuidString, "n-" + UUID().uuidString, "n-" + UUID().uuidString)
      try ClusterPresence(redis, nodeExpiry: .seconds(60)).heartbeat(holder)
      let epoch = try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      _ = try store.claim(id, epoch: epoch)
      // A letter's key is not remembered while it is unstored: a second letter is left too (the
      // holder drops it itself), and so is the first sent on by a holder whose batch was refused.
      #expect(try ledger.append(frame(1), to: id, from: producer, once: "letter-key") == .sent(seq: 0))
      #expect(try ledger.append(frame(1), to: id, from: producer, once: "letter-key") == .sent(seq: 0))
      // The holder numbered an invite itself: once stored, another node's copy is refused.
      let batch = WriteBehindBatch(
        number: 1,
        sessions: [
          .init(id: id, epoch: epoch, frames: [.init(seq: 1, bytes: frame(2).bytes(seq: 1), once: "stored-key")])
        ])
      #expect(try store.store(batch, from: holder) == [:])
      #expect(try ledger.append(frame(3), to: id, from: producer, once: "stored-key") == .duplicate)
      // The session's next holder loads the stored frame's key, not the letters' (which it is to
      // number itself if they are still unnumbered: `DeadHolderLetters`).
      guard
        case .resumed(_, let next, _, _) = try ledger.resume(
          id, userId: "alice", deviceId: "phone", from: 1, node: producer)
      else {
        Issue.record("not resumed")
        return
      }
      #expect(try store.claim(id, epoch: next) == .init(lastSeq: 1, onces: ["stored-key"]))
    }

    @Test func aRelayedCandidateInALetterIsWrittenAtOnceAndAnAnswerIsStoredFirst() {
      let message = ServerMessage.candidate(
        .init(callId: "c1", from: Peer(userId: "alice", deviceId: "phone"), candidate: IceCandidate(candidate: "x")))
      let relayed = UnnumberedLetter(session: "s1", frame: ClusterLink.frame(message), requestID: nil)
      #expect(ClusterLink.outgoing(relayed).kind == .candidate)
      let answer = UnnumberedLetter(
        session: "s1", frame: ClusterLink.frame(.ack(.init(replyTo: "r1", callId: "c1"))), requestID: "r1")
      #expect(ClusterLink.outgoing(answer).kind == .storeFirst)
    }

    /// A shell whose batches go to `connect`'s Redis.
    private func shell(_ connect: @escaping @Sendable () throws(RedisError) -> any RedisClient) -> WriteBehindShell {
      let sender = RedisWorker(name: "test-sender", maxQueued: 16, connect: connect)
      return WriteBehindShell(
        node: "n-" + UUID().uuidString, holder: .init(lease: .seconds(60), margin: .seconds(1)),
        ledger: .init(expiry: .seconds(60)), sender: sender, inbox: Locked(nil), log: Log(level: .error, subsystem: "t")
      )
    }

    @Test func theInboxIsTrimmedOnlyThroughTheLettersRedisStored() async throws {
      let outgoing = WriteBehindHolder.Outgoing(session: "s-not-here", frame: frame(1), kind: .candidate)
      // Nothing handed to the holder: the inbox is trimmed as far as it was read.
      let failing = shell { () throws(RedisError) in throw .connectionFailed(message: "down") }
      #expect(failing.trimPoint(read: "5-0") == "5-0")
      // A letter whose batch was not stored keeps itself and what follows in the inbox.
      failing.letter(outgoing, position: "3-0")
      #expect(failing.trimPoint(read: "5-0") == nil)
      // Once Redis has it (with the position), the inbox goes as far as it was read again.
      let redis = try SharedRedis.server()  // (found here: the worker's thread has no test context)
      let stored = shell { () throws(RedisError) in
        let client: any RedisClient
        do { client = try redis.connect() } catch { throw .connectionFailed(message: "\(error)") }
        try client.load(SessionLedger.scripts + WriteBehindStore.scripts)
        return client
      }
      stored.letter(outgoing, position: "3-0")
      #expect(await eventually(within: 10) { stored.trimPoint(read: "5-0") == "5-0" })
    }

    @Test func anUnnumberedLetterDecodesAsEncodedAndOthersAreNotIt() throws {
      let letter = UnnumberedLetter(session: "s1", frame: frame(3), requestID: nil)
      #expect(try UnnumberedLetter.decode(letter.encoded) == letter)
      #expect(try UnnumberedLetter.decode(ClusterLetterCodec.encode(.broken(sessionID: "s1"))) == nil)
      #expect(throws: ClusterLetterCodec.Malformed.self) {
        try UnnumberedLetter.decode(Array(#"{"k":"unnumbered","s":"s1","r":5,"h":9}"#.utf8) + [10, 65])
      }
    }
  }
}
