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
      let session = try ClaimedSession()
      defer { session.close() }
      let (redis, ledger, id, holder, producer) = (
        session.redis, session.ledger, session.id, session.holder, session.producer
      )
      #expect(session.claimed == .init(lastSeq: 0))
      #expect(try session.store.claim(id, epoch: session.epoch + 1) == nil)
      #expect(try ledger.append(frame(1), to: id, from: producer, requestID: "r\"1") == .sent(seq: 0))
      let letters = try NodeMailbox(redis, capacity: 100, expiry: .seconds(60)).receive(
        holder, after: "0", limit: 10, timeout: .milliseconds(10))
      let decoded = try letters.map { try UnnumberedLetter.decode($0.payload) }
      #expect(decoded == [UnnumberedLetter(session: id, frame: frame(1), requestID: "r\"1")])
      #expect(try ledger.range(id, after: 0) == .messages([]))
    }

    @Test func aDeadHoldersSessionGetsALetterNotASeqItsHolderMayHaveWritten() throws {
      let session = try ClaimedSession(holderAlive: false)
      defer { session.close() }
      let (ledger, id, producer) = (session.ledger, session.id, session.producer)
      // The holder wrote its client a candidate at seq 1 it had not stored, and died (no
      // heartbeat). Redis numbering the message would give it seq 1 too, which the client
      // resumes past: it goes into the dead holder's inbox unnumbered instead.
      #expect(try ledger.append(frame(1), to: id, from: producer, once: "k1") == .kept(seq: 0))
      let resumed = try ledger.resumeHolding(
        id, userId: "alice", deviceId: "phone", from: 1, node: producer, allowingAhead: 8)
      guard case .resumed(let taken) = resumed else {
        Issue.record("not resumed: \(resumed)")
        return
      }
      #expect(taken.lastSeq == 1 && taken.pending == [])
      // The resuming node numbers it after the client's seq.
      #expect(taken.letters == [UnnumberedLetter(session: id, frame: frame(1), requestID: nil, once: "k1")])
    }

    @Test func aResumeTakesTheLettersALiveHolderHadNotStoredInOrderAndItsLateBatchChangesNothing() throws {
      let opened = LedgerAndStore(try SharedRedis.client())
      defer { opened.close() }
      let (redis, ledger, store) = (opened.redis, opened.ledger, opened.store)
      let (id, other) = ("s_" + UUID().uuidString, "s_" + UUID().uuidString)
      let (holder, producer, successor) = ("n-" + UUID().uuidString, "n-" + UUID().uuidString, "n-" + UUID().uuidString)
      // The holder is alive (its heartbeat fresh): a node killed -9 counts so for `--node-expiry`.
      try ClusterPresence(redis, nodeExpiry: .seconds(60)).heartbeat(holder)
      let epoch = try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      _ = try store.claim(id, epoch: epoch)
      let otherEpoch = try ledger.open(other, userId: "bob", deviceId: "phone", node: holder)
      _ = try store.claim(other, epoch: otherEpoch)
      for n in 1...5 { #expect(try ledger.append(frame(n), to: id, from: producer) == .sent(seq: 0)) }
      #expect(try ledger.append(frame(50), to: other, from: producer) == .sent(seq: 0))
      let inbox = try NodeMailbox(redis, capacity: 100, expiry: .seconds(60)).receive(
        holder, after: "0", limit: 10, timeout: .milliseconds(10))
      #expect(inbox.count == 6)
      // The holder stored the first two letters (its batch recorded the second's position).
      let stored = WriteBehindBatch(
        number: 1,
        sessions: [
          .init(
            id: id, epoch: epoch,
            frames: [.init(seq: 1, bytes: frame(1).bytes(seq: 1)), .init(seq: 2, bytes: frame(2).bytes(seq: 2))],
            letterPosition: inbox[1].id)
        ])
      #expect(try store.store(stored, from: holder) == [:])
      // The device resumes on another node while the holder still counts alive: the three
      // letters it had not stored come with the resume, in order, and no other session's.
      guard let taken = try resumed(ledger, id, from: 2, on: successor, "not resumed") else { return }
      #expect(taken.lastSeq == 2)
      #expect(taken.letters.map(\.frame) == [frame(3), frame(4), frame(5)])
      // Copied, in order, to the successor's inbox (empty before): the last copy is its newest.
      let copies = try NodeMailbox(redis, capacity: 100, expiry: .seconds(60)).receive(
        successor, after: "0", limit: 10, timeout: .milliseconds(10))
      #expect(try copies.map { try UnnumberedLetter.decode($0.payload)?.frame } == [frame(3), frame(4), frame(5)])
      #expect(taken.positions == copies.map(\.id) && taken.lettersAfter == copies.last?.id)
      #expect(taken.origins == inbox[2..<5].map(\.id))
      // The session is numbered by its new holder from now on: a message goes to its inbox.
      try ClusterPresence(redis, nodeExpiry: .seconds(60)).heartbeat(successor)
      #expect(try ledger.append(frame(6), to: id, from: producer) == .sent(seq: 0))
      // The old holder's late batch (the third letter, numbered before it learnt) is refused and
      // does not move the position: a second resume takes the letters the successor never stored
      // (their copies, first) and what came since, in order.
      let late = WriteBehindBatch(
        number: 2,
        sessions: [
          .init(
            id: id, epoch: epoch, frames: [.init(seq: 3, bytes: frame(3).bytes(seq: 3))], letterPosition: inbox[2].id)
        ])
      #expect(try store.store(late, from: holder) == [id: .superseded])
      guard let again = try resumed(ledger, id, from: 2, on: producer, "not resumed again") else { return }
      #expect(again.letters.map(\.frame) == [frame(3), frame(4), frame(5), frame(6)])
    }

    /// A resume whose node then does not hold the session (its lease lapsed during the script)
    /// leaves the letters it read where the next resume reads them first, before one that
    /// arrived meanwhile; and a successor that stores them moves the position past them.
    @Test func lettersAResumeReadComeFirstForTheNextResumeUntilStored() throws {
      let opened = LedgerAndStore(try SharedRedis.client())
      defer { opened.close() }
      let (redis, ledger, store) = (opened.redis, opened.ledger, opened.store)
      let id = "s_" + UUID().uuidString
      let (holder, producer, lapsed, third) = (
        "n-" + UUID().uuidString, "n-" + UUID().uuidString, "n-" + UUID().uuidString, "n-" + UUID().uuidString
      )
      let presence = ClusterPresence(redis, nodeExpiry: .seconds(60))
      for node in [holder, lapsed] { try presence.heartbeat(node) }
      let epoch = try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      _ = try store.claim(id, epoch: epoch)
      for n in 1...3 { #expect(try ledger.append(frame(n), to: id, from: producer) == .sent(seq: 0)) }
      // A resume on `lapsed`, which then finds its lease lapsed and holds nothing.
      guard let first = try resumed(ledger, id, from: 0, on: lapsed, "not resumed") else { return }
      #expect(first.letters.map(\.frame) == [frame(1), frame(2), frame(3)])
      // Meanwhile a message arrives: into `lapsed`'s inbox, which Redis says holds the session.
      #expect(try ledger.append(frame(4), to: id, from: producer) == .sent(seq: 0))
      guard let next = try resumed(ledger, id, from: 0, on: third, "not resumed again") else { return }
      #expect(next.letters.map(\.frame) == [frame(1), frame(2), frame(3), frame(4)])
      // `third` stores the first two (its batch carries the second's position): a resume after
      // it takes the other two only.
      let stored = WriteBehindBatch(
        number: 1,
        sessions: [
          .init(
            id: id, epoch: next.epoch,
            frames: [.init(seq: 1, bytes: frame(1).bytes(seq: 1)), .init(seq: 2, bytes: frame(2).bytes(seq: 2))],
            letterPosition: next.positions[1])
        ])
      #expect(try store.store(stored, from: third) == [:])
      guard let last = try resumed(ledger, id, from: 2, on: holder, "not resumed a third time") else { return }
      #expect(last.lastSeq == 2 && last.letters.map(\.frame) == [frame(3), frame(4)])
    }

    /// The session's letter positions (`dt:session:{id}:lx`).
    private func index(_ redis: any RedisClient, _ session: String) throws -> [String] {
      let reply = try redis.command(["LRANGE", .string("dt:session:{\(session)}:lx"), "0", "-1"])
      return (reply.elements ?? []).compactMap(\.string)
    }

    @Test func aResumeFindsTheSessionsLettersByItsIndexAmongAnyNumberOfOthers() throws {
      let opened = LedgerAndStore(try SharedRedis.client())
      defer { opened.close() }
      let (redis, ledger, store) = (opened.redis, opened.ledger, opened.store)
      let (id, other) = ("s_" + UUID().uuidString, "s_" + UUID().uuidString)
      let (holder, producer, successor) = ("n-" + UUID().uuidString, "n-" + UUID().uuidString, "n-" + UUID().uuidString)
      for session in [id, other] {
        _ = try store.claim(session, epoch: try ledger.open(session, userId: session, deviceId: "phone", node: holder))
      }
      // The holder is dead: its inbox fills with another session's letters around three of this one's.
      for n in 1...600 {
        if n % 200 == 0 { _ = try ledger.append(frame(n), to: id, from: producer) }
        _ = try ledger.append(frame(n), to: other, from: producer)
      }
      let positions = try index(redis, id)
      #expect(positions.count == 3)
      guard let taken = try resumed(ledger, id, user: id, from: 0, on: successor, "not resumed") else { return }
      #expect(taken.letters.map(\.frame) == [frame(200), frame(400), frame(600)])
      #expect(taken.origins == positions)
      // The index lists their copies now, in the successor's inbox.
      #expect(try index(redis, id) == taken.positions)
    }

    @Test func moreLettersWaitingThanTheSessionHoldsMakeItsClientResync() throws {
      let session = try ClaimedSession(limits: .init(capacity: 8, expiry: .seconds(60)), holderAlive: false)
      defer { session.close() }
      let (ledger, id, producer) = (session.ledger, session.id, session.producer)
      // A store-first session would have dropped the oldest of nine unacknowledged messages.
      for n in 1...9 { _ = try ledger.append(frame(n), to: id, from: producer) }
      #expect(
        try ledger.resumeHolding(id, userId: "alice", deviceId: "phone", from: 0, node: producer, allowingAhead: 2)
          == .resync)
    }

    @Test func theIndexLetsGoOfWhatTheHolderStoredAsItGrows() throws {
      let session = try ClaimedSession()
      defer { session.close() }
      let (redis, ledger, store, id, holder, producer, epoch) = (
        session.redis, session.ledger, session.store, session.id, session.holder, session.producer, session.epoch
      )
      for n in 1...64 { #expect(try ledger.append(frame(n), to: id, from: producer) == .sent(seq: 0)) }
      let positions = try index(redis, id)
      #expect(positions.count == 64)
      // The holder stores the first sixty.
      let batch = WriteBehindBatch(
        number: 1,
        sessions: [
          .init(
            id: id, epoch: epoch,
            frames: (1...60).map { .init(seq: UInt64($0), bytes: frame($0).bytes(seq: UInt64($0))) },
            letterPosition: positions[59])
        ])
      #expect(try store.store(batch, from: holder) == [:])
      #expect(try ledger.append(frame(65), to: id, from: producer) == .sent(seq: 0))
      #expect(try index(redis, id).count == 5)
    }

    @Test func aFullInboxHasRedisNumberPastWhatTheHolderMayHaveWritten() throws {
      let session = try ClaimedSession(limits: .init(capacity: 16, expiry: .seconds(60), inboxCapacity: 1))
      defer { session.close() }
      let (ledger, store, id, holder, producer, epoch) = (
        session.ledger, session.store, session.id, session.holder, session.producer, session.epoch
      )
      #expect(try ledger.append(frame(1), to: id, from: producer) == .sent(seq: 0))
      // The inbox is full: Redis numbers it, past the 16 / 4 seqs the holder may have written
      // unstored, under a new epoch (the holder's batches are refused from now on).
      #expect(try ledger.append(frame(2), to: id, from: producer) == .kept(seq: 5))
      let batch = WriteBehindBatch(
        number: 1, sessions: [.init(id: id, epoch: epoch, frames: [.init(seq: 1, bytes: frame(9).bytes(seq: 1))])])
      #expect(try store.store(batch, from: holder) == [id: .superseded])
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
      let session = try ClaimedSession()
      defer { session.close() }
      let (ledger, store, id, holder, producer, epoch) = (
        session.ledger, session.store, session.id, session.holder, session.producer, session.epoch
      )
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
      // number itself if they are still unnumbered: `SessionLedger.resumeHolding`).
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

    @Test func theInboxIsTrimmedOnlyThroughTheLettersRedisStoredOrAResumeRead() async throws {
      let outgoing = WriteBehindHolder.Outgoing(session: "s-not-here", frame: frame(1), kind: .candidate)
      // Nothing handed to the holder: the inbox is trimmed as far as it was read.
      let failing = shell { () throws(RedisError) in throw .connectionFailed(message: "down") }
      #expect(try failing.trimPoint(read: "5-0") == "5-0")
      // A letter for a session not held here stays for that session's resume, and what follows.
      failing.letter(outgoing, position: "3-0")
      #expect(try failing.trimPoint(read: "5-0") == "2-18446744073709551615")
      // Once Redis says the session is gone (or resumed: another owner, or its position past the
      // letter), it may go.
      let redis = try SharedRedis.client()
      defer { redis.close() }
      #expect(try failing.trimPoint(read: "5-0", redis) == "5-0")
    }

    @Test func theInboxIsNotTrimmedFromAResumesScriptToItsHold() throws {
      let failing = shell { () throws(RedisError) in throw .connectionFailed(message: "down") }
      // The copies the script adds (after anything read before it began) are kept only once the
      // holder has them (or retained them): meanwhile the trim goes no further than that.
      #expect(try failing.resuming { () throws(RedisError) in try failing.trimPoint(read: "5-0") } == nil)
      #expect(try failing.trimPoint(read: "5-0") == "5-0")
      #expect(try failing.resuming { () throws(RedisError) in try failing.trimPoint(read: "9-0") } == "5-0")
      #expect(try failing.trimPoint(read: "9-0") == "9-0")
    }

    @Test func aRequestRefusedOverTheNodesBoundThatMovedTheCallOnResyncsItsSessions() {
      final class Hub: ClusterInbox, Sendable {
        let broken = Locked<[String]>([])
        let refused = Locked<[String]>([])
        func receive(_ event: ClusterEvent) {
          switch event {
          case .sessionsBroken(let ids): broken.withLock { $0 += ids }
          case .requestsRefused(let requests): refused.withLock { $0 += requests.map(\.requestID) }
          default: break
          }
        }
      }
      let hub = Hub()
      let poison = Locked(SessionPoison())
      // Redis is away: nothing is stored, so what is numbered stays (53 bytes a frame held).
      let sender = RedisWorker(name: "test-sender", maxQueued: 16) { () throws(RedisError) in
        throw .connectionFailed(message: "down")
      }
      let shell = WriteBehindShell(
        node: "n-" + UUID().uuidString,
        holder: .init(lease: .seconds(60), margin: .seconds(1), maxNodeBytes: 120),
        ledger: .init(expiry: .seconds(60)), sender: sender, inbox: Locked<(any ClusterInbox)?>(hub), poison: poison,
        log: Log(level: .error, subsystem: "t"))
      for (session, user) in [("s-alice", "alice"), ("s-bob", "bob")] {
        #expect(shell.hold(session, of: Identity(userId: user, deviceId: "phone", name: nil), epoch: 1, lastSeq: 0))
      }
      shell.add(.init(session: "s-bob", frame: frame(1), kind: .candidate))
      shell.add(.init(session: "s-alice", frame: frame(2), kind: .candidate))
      shell.flush()
      // A relayed candidate over the bound: answered rate-limited, nothing resyncs.
      shell.add(.init(session: "s-bob", frame: frame(3), kind: .candidate))
      shell.add(.init(session: "s-alice", frame: frame(4), kind: .storeFirst, requestID: "m3"))
      shell.flush()
      #expect(hub.refused.current == ["m3"] && hub.broken.current.isEmpty && poison.current.isEmpty)
      // An accept over the bound: handled already, so both sessions are made unresumable (once
      // Redis answers) and closed; the requester is not asked to send it again.
      shell.add(.init(session: "s-bob", frame: frame(5), kind: .storeFirst))
      shell.add(.init(session: "s-alice", frame: frame(6), kind: .storeFirst, requestID: "a1"))
      shell.flush()
      #expect(hub.refused.current == ["m3"])
      #expect(hub.broken.current == ["s-alice", "s-bob"])
      #expect(poison.current.sessions == ["s-alice", "s-bob"])
      sender.close()
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
