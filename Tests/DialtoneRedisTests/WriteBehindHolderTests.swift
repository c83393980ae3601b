import DialtoneCluster
import Testing

/// The write-behind holder's numbering, write gating, batches and lease, in virtual time.
@Suite struct WriteBehindHolderBehaviour {
  typealias Holder = WriteBehindHolder
  typealias Effect = WriteBehindHolder.Effect

  let t0 = ContinuousClock.now
  func at(_ seconds: Double) -> Holder.Instant { t0 + .milliseconds(Int64(seconds * 1000)) }

  func holder(_ limits: Holder.Limits = .init(lease: .seconds(10), margin: .seconds(2))) -> Holder {
    Holder(limits: limits, renewedAt: t0)
  }

  /// `{"seq":N,"n":<n>}` once numbered.
  func frame(_ n: Int) -> SessionLedger.Frame {
    .init(head: Array(#"{"seq":"#.utf8), tail: Array(#","n":\#(n)}"#.utf8))
  }
  func bytes(_ n: Int, seq: UInt64) -> [UInt8] { frame(n).bytes(seq: seq) }

  func candidate(_ session: String, _ n: Int) -> Holder.Outgoing {
    .init(session: session, frame: frame(n), kind: .candidate)
  }
  func answer(_ session: String, _ n: Int, to request: String) -> Holder.Outgoing {
    .init(session: session, frame: frame(n), kind: .storeFirst, requestID: request)
  }

  func submitted(_ holder: inout Holder, _ event: [Holder.Outgoing], at time: Double = 0) -> [Effect] {
    let submitted = holder.submit(event, now: at(time))
    if let refusal = submitted.refusal { Issue.record("refused: \(refusal)") }
    return submitted.effects
  }

  func writes(_ effects: [Effect]) -> [String] {
    effects.compactMap {
      guard case .write(let session, let seq, _) = $0 else { return nil }
      return "\(session)#\(seq)"
    }
  }

  func batch(_ effects: [Effect]) -> WriteBehindBatch? {
    effects.lazy.compactMap {
      guard case .store(let batch) = $0 else { return nil }
      return batch
    }.first
  }

  /// Alice's candidate to Bob: Bob's copy, and Alice's ack (the answer to her request).
  func relay(_ n: Int, request: String) -> [Holder.Outgoing] {
    [candidate("bob", n), answer("alice", 100 + n, to: request)]
  }

  func holding(_ sessions: [String: UInt64], _ limits: Holder.Limits? = nil) -> Holder {
    var h = limits.map(holder) ?? holder()
    for (session, last) in sessions.sorted(by: { $0.key < $1.key }) {
      #expect(h.hold(session, epoch: 7, lastSeq: last, now: t0) == [])
      #expect(h.announced(session, epoch: 7) == [])
    }
    return h
  }

  @Test func aCandidateIsWrittenAtOnceAndStoredAfter() {
    var h = holding(["alice": 0, "bob": 4])
    let effects = submitted(&h, relay(1, request: "m1"))
    // Bob's candidate reaches his socket now, numbered after what Redis had; Alice's ack waits.
    #expect(effects.first == .write(session: "bob", seq: 5, bytes: bytes(1, seq: 5)))
    #expect(writes(effects) == ["bob#5"])
    #expect(
      batch(effects)
        == WriteBehindBatch(
          number: 1,
          sessions: [
            .init(id: "bob", epoch: 7, frames: [.init(seq: 5, bytes: bytes(1, seq: 5))]),
            .init(id: "alice", epoch: 7, frames: [.init(seq: 1, bytes: bytes(101, seq: 1), requestID: "m1")]),
          ]))
    // Stored: the ack is written, and nothing again.
    #expect(
      h.batchStored(1, refused: [:], now: at(0.01)) == [.write(session: "alice", seq: 1, bytes: bytes(101, seq: 1))])
    #expect(h.sessions["bob"]?.stored == 5)
    #expect(h.sessions["alice"]?.unstored == [])
  }

  @Test func aStoreFirstFrameHoldsBackTheCandidatesAfterItInSeqOrder() {
    var h = holding(["alice": 0, "bob": 0])
    // Bob's own request is answered (store-first) in his session, then Alice's candidate arrives.
    #expect(writes(submitted(&h, [answer("bob", 1, to: "b1")])) == [])
    let second = submitted(&h, relay(2, request: "m2"))
    #expect(writes(second) == [], "behind Bob's unstored answer: held")
    #expect(batch(second) == nil, "the first batch is still in flight")
    // The first batch lands: Bob's answer, then the candidate held behind it, in seq order.
    let first = h.batchStored(1, refused: [:], now: at(0.01))
    #expect(
      first.prefix(2) == [
        .write(session: "bob", seq: 1, bytes: bytes(1, seq: 1)),
        .write(session: "bob", seq: 2, bytes: bytes(2, seq: 2)),
      ])
    // The second batch carries the candidate (written already) and Alice's ack.
    let next = batch(first)
    #expect(next?.number == 2)
    #expect(next?.sessions.map(\.id) == ["bob", "alice"])
    #expect(
      h.batchStored(2, refused: [:], now: at(0.02)) == [.write(session: "alice", seq: 1, bytes: bytes(102, seq: 1))])
  }

  @Test func aRequestIsAnsweredOnlyWithEverythingItCausedStored() {
    var h = holding(
      ["alice": 0, "bob": 0, "carol": 0], .init(lease: .seconds(10), margin: .seconds(2), maxBatchFrames: 2))
    _ = submitted(&h, [candidate("carol", 1)])  // batch 1 in flight
    // A request that causes frames in two other sessions and its answer: one event, three frames.
    let event = [candidate("bob", 2), candidate("carol", 3), answer("alice", 4, to: "m4")]
    #expect(writes(submitted(&h, event)) == ["bob#1", "carol#2"])
    // The next batch takes the event whole, though it is over the batch's two frames.
    let next = batch(h.batchStored(1, refused: [:], now: at(0.01)))
    #expect(next?.frameCount == 3)
    #expect(
      h.batchStored(2, refused: [:], now: at(0.02)) == [.write(session: "alice", seq: 1, bytes: bytes(4, seq: 1))])
  }

  @Test func batchesTakeWholeEventsUpToTheirBound() {
    var h = holding(["alice": 0, "bob": 0], .init(lease: .seconds(10), margin: .seconds(2), maxBatchFrames: 4))
    _ = submitted(&h, [candidate("bob", 0)])
    for n in 1...3 { _ = submitted(&h, relay(n, request: "m\(n)")) }
    // Two events (four frames) fit; the third waits for the next batch.
    let second = batch(h.batchStored(1, refused: [:], now: at(0.01)))
    #expect(second?.frameCount == 4)
    let third = batch(h.batchStored(2, refused: [:], now: at(0.02)))
    #expect(third?.frameCount == 2)
    #expect(third?.sessions.first { $0.id == "alice" }?.frames.map(\.seq) == [3])
  }

  @Test func aSessionRefusedByRedisClosesHereAndTheOthersAreConfirmed() {
    var h = holding(["alice": 0, "bob": 0])
    _ = submitted(&h, relay(1, request: "m1"))
    // Another node took Bob: his unstored candidate goes to it, before Alice's ack is written.
    #expect(
      h.batchStored(1, refused: ["bob": .superseded], now: at(0.01)) == [
        .close(session: "bob", .refused(.superseded)), .unheld(candidate("bob", 1)),
        .write(session: "alice", seq: 1, bytes: bytes(101, seq: 1)),
      ])
    #expect(h.sessions["bob"] == nil)
    // A frame for Bob now is for whichever node holds him: the shell stores it as other nodes do.
    let later = submitted(&h, relay(2, request: "m2"))
    #expect(later.first == .unheld(candidate("bob", 2)))
    #expect(batch(later)?.sessions.map(\.id) == ["alice"])
  }

  @Test func aGoneSessionsFramesAreDroppedNotSentElsewhere() {
    var h = holding(["alice": 0, "bob": 0])
    _ = submitted(&h, relay(1, request: "m1"))
    #expect(
      h.batchStored(1, refused: ["bob": .gone], now: at(0.01)) == [
        .close(session: "bob", .refused(.gone)), .write(session: "alice", seq: 1, bytes: bytes(101, seq: 1)),
      ])
  }

  @Test func aFailedBatchIsSentAgainAtTheNextTickWithTheSameSeqs() {
    var h = holding(["alice": 0, "bob": 0])
    let first = batch(submitted(&h, relay(1, request: "m1")))
    #expect(h.batchFailed(1, now: at(0.01)) == [])
    // Events meanwhile wait: a Redis that is down is not asked once per event.
    #expect(batch(submitted(&h, relay(2, request: "m2"), at: 0.02)) == nil)
    let again = batch(h.tick(now: at(1)))
    #expect(again?.number == 2)
    #expect(again?.sessions.map { $0.frames.map(\.seq) } == [[1, 2], [1, 2]])
    #expect(again?.sessions.first?.frames.first == first?.sessions.first?.frames.first)
    // The late answer of the failed batch changes nothing.
    #expect(h.batchStored(1, refused: [:], now: at(1.01)) == [])
    #expect(writes(h.batchStored(2, refused: [:], now: at(1.02))) == ["alice#1", "alice#2"])
  }

  @Test func lettersAreNumberedInInboxOrderAndTheBatchRecordsEachSessionsLastLetter() {
    var h = holding(["alice": 3])
    #expect(
      h.letter(answer("alice", 1, to: "x"), position: "10-0", now: at(0))
        == [
          .store(
            WriteBehindBatch(
              number: 1,
              sessions: [
                .init(
                  id: "alice", epoch: 7, frames: [.init(seq: 4, bytes: bytes(1, seq: 4), requestID: "x")],
                  letterPosition: "10-0")
              ]))
        ])
    #expect(h.keepsFrom == InboxPosition("10-0"))
    // A candidate behind the unstored answer waits for it.
    #expect(h.letter(candidate("alice", 2), position: "11-0", now: at(0)) == [])
    // A letter for a session that is not held here is not sent on: it stays in the inbox for
    // whoever resumes that session.
    #expect(h.letter(candidate("dave", 3), position: "12-0", now: at(0)) == [])
    #expect(h.retained.map(\.position) == [InboxPosition("12-0")])
    let next = batch(h.batchStored(1, refused: [:], now: at(0.01)))
    #expect(next?.sessions.map { $0.frames.map(\.seq) } == [[5]])
    #expect(next?.sessions.first?.letterPosition == "11-0")
    #expect(h.keepsFrom == InboxPosition("11-0"))
    _ = h.batchStored(2, refused: [:], now: at(0.02))
    #expect(h.keepsFrom == InboxPosition("12-0"))
    h.forget(retained: [InboxPosition(milliseconds: 12, sequence: 0)])
    #expect(h.keepsFrom == nil)
  }

  @Test func aSupersededSessionsLettersStayForItsResumeWhileItsOwnFramesGoWhereItIsNow() {
    var h = holding(["alice": 0, "bob": 0])
    _ = h.letter(answer("bob", 1, to: "x"), position: "5-0", now: at(0))
    _ = submitted(&h, relay(2, request: "m2"))
    // Another node resumed Bob (it reads the letter from this node's inbox itself).
    let effects = h.batchStored(1, refused: ["bob": .superseded], now: at(0.01))
    #expect(effects.contains(.close(session: "bob", .refused(.superseded))))
    let unheld = effects.compactMap { effect -> Holder.Outgoing? in
      guard case .unheld(let outgoing) = effect else { return nil }
      return outgoing
    }
    #expect(unheld == [candidate("bob", 2)])
    #expect(h.retained.map(\.position) == [InboxPosition("5-0")])
    // Later letters for him stay too, never sent on.
    #expect(h.letter(candidate("bob", 3), position: "6-0", now: at(0.02)).isEmpty)
    #expect(h.retained.map(\.position) == [InboxPosition("5-0"), InboxPosition("6-0")])
  }

  @Test func aResumeNumbersItsLettersFirstThenThoseThatArrivedSinceAndSkipsTheReadersCopies() {
    var h = holder()
    // A letter for Bob arrives before this node holds him (after the resume in Redis).
    _ = h.letter(candidate("bob", 9), position: "20-0", now: at(0))
    #expect(h.retained.count == 1)
    let effects = h.hold(
      "bob", epoch: 3, lastSeq: 4, lettersAfter: "15-0", letters: [candidate("bob", 1), candidate("bob", 2)],
      now: at(0))
    // Written once stored (the hub hears of the resume after this), in that order.
    #expect(writes(effects) == [])
    #expect(batch(effects)?.sessions.map { $0.frames.map(\.seq) } == [[5, 6, 7]])
    #expect(batch(effects)?.sessions.first?.frames.last?.bytes == bytes(9, seq: 7))
    #expect(h.retained.isEmpty)
    #expect(h.announced("bob", epoch: 3) == [])
    // The reader's copy of a letter the resume applied is not numbered again; a new one is.
    #expect(h.letter(candidate("bob", 1), position: "14-0", now: at(0.01)).isEmpty)
    _ = h.letter(candidate("bob", 10), position: "21-0", now: at(0.01))
    #expect(writes(h.batchStored(1, refused: [:], now: at(0.02))) == ["bob#5", "bob#6", "bob#7", "bob#8"])
  }

  @Test func aSameNodeResumeNumbersAgainOnlyItsOwnFramesNotItsLetters() {
    var h = holding(["alice": 0, "bob": 0])
    _ = submitted(&h, [answer("bob", 1, to: "b1")])
    _ = h.letter(answer("bob", 2, to: "y"), position: "7-0", now: at(0))
    // Bob resumes on this node before the batch lands: the resume read the letter from the inbox.
    let effects = h.hold(
      "bob", epoch: 8, lastSeq: 0, lettersAfter: "7-0", letters: [answer("bob", 2, to: "y")], now: at(0.01))
    #expect(effects.isEmpty)  // a batch is in flight
    let next = batch(h.batchStored(1, refused: ["bob": .superseded], now: at(0.02)))
    #expect(next?.sessions.map { $0.frames.map(\.seq) } == [[1, 2]])
    #expect(next?.sessions.first?.frames.map(\.bytes) == [bytes(1, seq: 1), bytes(2, seq: 2)])
  }

  @Test func aSameNodeResumeNumbersAgainTheLettersItsClientHadNotProcessedWhateverTheirKeys() {
    var h = holding(["bob": 0])
    func keyed(_ n: Int, at position: String) -> Holder.Outgoing {
      .init(session: "bob", frame: frame(n), kind: .candidate, once: "k\(n)", letter: position)
    }
    // Two candidates in letters, written at once as 1 and 2; the first batch is in flight.
    #expect(writes(h.letter(keyed(1, at: "5-0"), position: "5-0", now: at(0))) == ["bob#1"])
    #expect(writes(h.letter(keyed(2, at: "6-0"), position: "6-0", now: at(0))) == ["bob#2"])
    // Bob resumes here having processed seq 1 only: the resume copied both letters (to 20-0 and
    // 21-0). The first is his already; the second, whose key this node had numbered, is not.
    let effects = h.hold(
      "bob", epoch: 8, lastSeq: 1, lettersAfter: "21-0", letters: [keyed(1, at: "20-0"), keyed(2, at: "21-0")],
      letterOrigins: ["5-0", "6-0"], now: at(0.01))
    #expect(effects.isEmpty)  // a batch is in flight
    let next = batch(h.batchStored(1, refused: ["bob": .superseded], now: at(0.02)))
    #expect(next?.sessions.map { $0.frames.map(\.seq) } == [[2]])
    #expect(next?.sessions.first?.frames.map(\.bytes) == [bytes(2, seq: 2)])
    #expect(next?.sessions.first?.letterPosition == "21-0")
    // A repeat of the first (its key) is still a repeat.
    #expect(h.letter(keyed(1, at: "22-0"), position: "22-0", now: at(0.03)).isEmpty)
  }

  @Test func aResumeHeldWithAStaleLeaseRetainsItsLetters() {
    var h = holder()
    let letter = Holder.Outgoing(session: "bob", frame: frame(1), kind: .candidate, letter: "20-0")
    let effects = h.hold("bob", epoch: 3, lastSeq: 0, lettersAfter: "20-0", letters: [letter], now: at(9))
    #expect(effects == [.close(session: "bob", .stale)])
    // Their copies stay in the inbox for the session's next resume.
    #expect(h.retained.map(\.position) == [InboxPosition("20-0")] && h.keepsFrom == InboxPosition("20-0"))
  }

  @Test func aStaleNodeKeepsTheLettersItHadNotStored() {
    var h = holding(["bob": 0])
    _ = h.letter(answer("bob", 1, to: "y"), position: "3-0", now: at(0))
    _ = h.tick(now: at(9))
    #expect(h.lease == .stale)
    #expect(h.retained.map(\.position) == [InboxPosition("3-0")])
    // And what it reads while stale.
    _ = h.letter(candidate("bob", 2), position: "4-0", now: at(9.5))
    #expect(h.keepsFrom == InboxPosition("3-0") && h.retained.count == 2)
  }

  @Test func aLetterCandidateAfterStoredFramesIsWrittenAtOnce() {
    var h = holding(["alice": 3])
    #expect(writes(h.letter(candidate("alice", 1), position: "1-0", now: at(0))) == ["alice#4"])
  }

  @Test func aNodeWhoseRenewalsStopStopsWritingBeforeItsLeaseRunsOut() {
    var h = holding(["alice": 0, "bob": 0])
    // Renewals fail from t0 on: at lease − margin (8 s) the node closes every session.
    #expect(writes(submitted(&h, relay(1, request: "m1"), at: 7.9)) == ["bob#1"])
    #expect(h.tick(now: at(7.99)) == [])
    #expect(h.tick(now: at(8)) == [.close(session: "alice", .stale), .close(session: "bob", .stale)])
    #expect(h.lease == .stale)
    #expect(h.submit(relay(2, request: "m2"), now: at(8.1)) == .init(effects: [], refusal: .stale))
    #expect(h.hold("carol", epoch: 1, lastSeq: 0, now: at(8.1)) == [.close(session: "carol", .stale)])
    #expect(h.letter(candidate("alice", 3), position: "1-0", now: at(8.1)) == [])
    #expect(!h.acceptsLetters)
    // The batch in flight when it went stale is no longer its concern.
    #expect(h.batchStored(1, refused: [:], now: at(8.2)) == [])
    // Renewed again: live with no session; new ones are held.
    #expect(h.leaseRenewed(sentAt: at(9), now: at(9.1)) == [])
    #expect(h.hold("carol", epoch: 1, lastSeq: 0, now: at(9.1)) == [])
    _ = h.announced("carol", epoch: 1)
    #expect(writes(submitted(&h, [candidate("carol", 4)], at: 9.2)) == ["carol#1"])
  }

  @Test func staleIsCheckedOnEveryEventNotOnlyOnTicks() {
    var h = holding(["bob": 0])
    // No tick ran since t0: the candidate at 8 s finds the lease stale and is not written.
    // It closes the sessions on the way.
    #expect(
      h.submit([candidate("bob", 1)], now: at(8)) == .init(effects: [.close(session: "bob", .stale)], refusal: .stale))
  }

  /// Frozen from 1 s to 30 s (SIGSTOP), the node's first act on waking is a renewal sent then:
  /// no tick or event saw the lapse, but it happened (other nodes counted the node dead), so
  /// its sessions close before the renewal makes it live again, with none.
  @Test func aRenewalAfterTheLeaseLapsedClosesTheSessionsFirst() {
    var h = holding(["alice": 0, "bob": 0])
    #expect(writes(submitted(&h, relay(1, request: "m1"), at: 1)) == ["bob#1"])
    #expect(
      h.leaseRenewed(sentAt: at(30), now: at(30.01)) == [
        .close(session: "alice", .stale), .close(session: "bob", .stale),
      ])
    #expect(h.lease == .live(renewedAt: at(30)))
    // Live again already, so the lapse is known by its count (the shell logs it by that).
    #expect(h.lapses == 1)
    #expect(h.sessions.isEmpty)
    // The batch in flight before the freeze is no longer its concern.
    #expect(h.batchStored(1, refused: [:], now: at(30.02)) == [])
    // A renewal within the lease closes nothing.
    #expect(h.hold("carol", epoch: 1, lastSeq: 0, now: at(31)) == [])
    #expect(h.leaseRenewed(sentAt: at(37), now: at(37.5)) == [])
    #expect(h.sessions.keys.sorted() == ["carol"])
    #expect(h.lapses == 1)
  }

  /// Frozen from 1 s to 30 s with a renewal in flight (sent at 0.5 s, answered at 30 s): the
  /// lapse closes the sessions once and is counted once; that old renewal does not make the
  /// lease live (it would lapse again at once), the next one does.
  @Test func aRenewalSentBeforeAFreezeAndAnsweredAfterItIsOneLapseAndNoRenewal() {
    var h = holding(["alice": 0, "bob": 0])
    #expect(
      h.leaseRenewed(sentAt: at(0.5), now: at(30)) == [
        .close(session: "alice", .stale), .close(session: "bob", .stale),
      ])
    #expect(h.lapses == 1)
    #expect(h.lease == .stale)
    #expect(h.leaseRenewed(sentAt: at(30.01), now: at(30.02)) == [])
    #expect(h.lease == .live(renewedAt: at(30.01)))
    #expect(h.lapses == 1)
  }

  @Test func batchesCutForDifferentReasonsAreNotTheSame() {
    let sessions = [WriteBehindBatch.Session(id: "bob", epoch: 7, frames: [.init(seq: 1, bytes: bytes(1, seq: 1))])]
    #expect(
      WriteBehindBatch(number: 1, sessions: sessions, cut: .urgent)
        != WriteBehindBatch(number: 1, sessions: sessions, cut: .window))
    #expect(
      WriteBehindBatch(number: 1, sessions: sessions, cut: .full)
        == WriteBehindBatch(number: 1, sessions: sessions, cut: .full))
  }

  /// A node made at t0 joins the cluster 9 s later (its database slow to open): its lease counts
  /// from its first heartbeat, so a session it holds then stays (counted from t0, the lease had
  /// lapsed at 8 s and the session closed at once).
  @Test func theLeaseCountsFromTheNodesFirstHeartbeatNotFromWhenItWasMade() {
    var h = holder()
    h.joined(sentAt: at(9))
    #expect(h.hold("bob", epoch: 1, lastSeq: 0, now: at(9.5)) == [])
    #expect(h.tick(now: at(16.99)) == [])
    #expect(h.lapses == 0)
    #expect(h.tick(now: at(17)) == [.close(session: "bob", .stale)])
  }

  @Test func theLeaseCountsFromWhenARenewalWasSent() {
    var h = holding(["bob": 0])
    // Sent at 5 s, answered at 6 s: stale at 13 s, not 14 s.
    #expect(h.leaseRenewed(sentAt: at(5), now: at(6)) == [])
    // An older renewal answered late does not move it back.
    #expect(h.leaseRenewed(sentAt: at(4), now: at(6.5)) == [])
    #expect(h.tick(now: at(12.99)) == [])
    #expect(h.tick(now: at(13)) == [.close(session: "bob", .stale)])
  }

  @Test func aClientsEventOverTheSessionsBoundIsRefusedWholeNothingNumbered() {
    var h = holding(["alice": 0, "bob": 0], .init(lease: .seconds(10), margin: .seconds(2), maxSessionFrames: 2))
    _ = submitted(&h, relay(1, request: "m1"))
    _ = submitted(&h, relay(2, request: "m2"))
    // Bob and Alice each have two frames waiting for Redis: a third is refused, Bob's copy too.
    #expect(h.submit(relay(3, request: "m3"), now: at(0)) == .init(effects: [], refusal: .backlog))
    #expect(h.sessions["bob"]?.next == 3)
    // Letters are numbered all the same (their sender was answered), but past the session's bound
    // a candidate waits for its store before it is written.
    #expect(writes(h.letter(candidate("bob", 4), position: "1-0", now: at(0))) == [])
    #expect(h.sessions["bob"]?.next == 4)
    // Once stored there is room again.
    _ = h.batchStored(1, refused: [:], now: at(0.01))
    _ = h.batchStored(2, refused: [:], now: at(0.02))
    #expect(h.submit(relay(5, request: "m5"), now: at(0.03)).refusal == nil)
  }

  @Test func anEventWithoutARelayedCandidateIsNumberedPastTheSessionsBoundWithinTheNodes() {
    var h = holding(["alice": 0, "bob": 0], .init(lease: .seconds(10), margin: .seconds(2), maxSessionFrames: 2))
    _ = submitted(&h, relay(1, request: "m1"))
    _ = submitted(&h, relay(2, request: "m2"))
    #expect(h.submit(relay(3, request: "m3"), now: at(0)).refusal == .backlog)
    // An invite for Bob and its ack to Carol: the call's state moved on with it, so it is
    // numbered all the same (written once stored).
    let invite = h.submit(
      [.init(session: "bob", frame: frame(7), kind: .storeFirst), answer("alice", 8, to: "i1")], now: at(0))
    #expect(invite.refusal == nil)
    #expect(h.sessions["bob"]?.next == 4 && h.sessions["alice"]?.next == 4)
  }

  @Test func aSessionsByteBoundRefusesWhatWouldPassItOthersGoOn() {
    // Two frames of 29 bytes fit in 60, a third does not.
    var h = holding(["alice": 0, "bob": 0], .init(lease: .seconds(10), margin: .seconds(2), maxSessionBytes: 60))
    _ = submitted(&h, [candidate("bob", 1)])
    _ = submitted(&h, [candidate("bob", 2)])
    #expect(h.submit([candidate("bob", 3)], now: at(0)) == .init(effects: [], refusal: .backlog))
    #expect(writes(submitted(&h, [candidate("alice", 4)])) == ["alice#1"])
  }

  @Test func theNodesBoundRefusesClientsAndStopsReadingTheInbox() {
    // Each frame costs 29 bytes held: its 15 bytes and the 14 of its unnumbered form.
    let limits = Holder.Limits(lease: .seconds(10), margin: .seconds(2), maxNodeBytes: 70)
    var h = holding(["alice": 0, "bob": 0], limits)
    #expect(h.acceptsLetters)
    _ = submitted(&h, [candidate("bob", 1), candidate("alice", 2)])
    #expect(h.submit([candidate("bob", 3)], now: at(0)) == .init(effects: [], refusal: .backlog))
    _ = h.letter(candidate("bob", 4), position: "1-0", now: at(0))
    #expect(!h.acceptsLetters)
    _ = h.batchStored(1, refused: [:], now: at(0.01))
    _ = h.batchStored(2, refused: [:], now: at(0.02))
    #expect(h.acceptsLetters)
  }

  @Test func anEventOverTheNodesBoundWhoseRequestMovedTheCallOnHasItsSessionsResync() {
    let limits = Holder.Limits(lease: .seconds(10), margin: .seconds(2), maxNodeBytes: 70)
    var h = holding(["alice": 0, "bob": 0], limits)
    _ = submitted(&h, [candidate("bob", 1), candidate("alice", 2)])
    // A relayed candidate refused: sent again, it is relayed again; nothing resyncs.
    #expect(h.submit(relay(3, request: "m3"), now: at(0)) == .init(effects: [], refusal: .backlog))
    // An accept for Bob and its ack to Alice, refused: the call's state moved on already, so
    // both sessions resync (their clients learn the call as it is now).
    let accept = h.submit(
      [.init(session: "bob", frame: frame(7), kind: .storeFirst), answer("alice", 8, to: "a1")], now: at(0))
    #expect(accept == .init(effects: [], refusal: .backlog, resyncing: ["alice", "bob"]))
  }

  @Test func aSessionHeldAgainNumbersAgainWhatTheOldEpochsBatchCarriedAndIgnoresItsRefusal() {
    var h = holding(["alice": 0, "bob": 0])
    _ = submitted(&h, relay(1, request: "m1"))
    // Bob's client resumed on this node meanwhile from seq 0 (it had not processed the candidate):
    // a new epoch, from what Redis had. The candidate in the batch in flight (whose sender Alice
    // is answered when it lands) is numbered again under the new epoch, written once stored (the
    // hub hears of the resume after this).
    #expect(h.hold("bob", epoch: 8, lastSeq: 0, now: at(0.005)) == [])
    // Redis refuses the old epoch's frame: the new holding stays, and stores it under its epoch.
    let effects = h.batchStored(1, refused: ["bob": .superseded], now: at(0.01))
    #expect(!effects.contains { if case .close = $0 { return true } else { return false } })
    #expect(writes(effects) == ["alice#1"])
    #expect(batch(effects)?.sessions == [.init(id: "bob", epoch: 8, frames: [.init(seq: 1, bytes: bytes(1, seq: 1))])])
    #expect(h.sessions["bob"]?.epoch == 8)
    #expect(writes(h.batchStored(2, refused: [:], now: at(0.015))) == ["bob#1"])
    _ = h.announced("bob", epoch: 8)
    #expect(writes(submitted(&h, [candidate("bob", 2)], at: 0.02)) == ["bob#2"])
  }

  @Test func aCandidateForASessionHeldAgainWaitsUntilTheHubHasTheResume() {
    var h = holding(["bob": 0])
    // Bob resumed on this node; the hub still has his old socket: a candidate written now would
    // go there.
    #expect(h.hold("bob", epoch: 8, lastSeq: 0, now: at(0.001)) == [])
    #expect(writes(h.letter(candidate("bob", 1), position: "1-0", now: at(0.002))) == [])
    // The hub has the resume now: it goes, before it is stored, and so do the next ones.
    #expect(writes(h.announced("bob", epoch: 8)) == ["bob#1"])
    #expect(writes(submitted(&h, [candidate("bob", 2)], at: 0.003)) == ["bob#2"])
    // An old epoch's word changes nothing.
    #expect(h.announced("bob", epoch: 7) == [])
  }

  @Test func aSessionHeldAgainFromBeyondTheOldEpochsFramesNumbersNothingAgain() {
    var h = holding(["alice": 0, "bob": 0])
    _ = submitted(&h, relay(1, request: "m1"))
    // The client had processed the candidate (the resume went on from its seq, or the batch
    // landed before the resume): nothing to number again.
    #expect(h.hold("bob", epoch: 8, lastSeq: 1, now: at(0.005)) == [])
    #expect(batch(h.batchStored(1, refused: ["bob": .superseded], now: at(0.01))) == nil)
    _ = h.announced("bob", epoch: 8)
    #expect(writes(submitted(&h, [candidate("bob", 2)], at: 0.02)) == ["bob#2"])
  }

  /// Bob's frames of the batch's part for him.
  func bobs(_ effects: [Effect]) -> WriteBehindBatch.Session? { batch(effects)?.sessions.first { $0.id == "bob" } }

  @Test func aSessionBackHereAfterAnotherNodeNumberedItNumbersAgainWhatRedisRefused() {
    var h = holding(["alice": 0, "bob": 0])
    _ = submitted(&h, relay(1, request: "m1"))  // bob#1 in the batch in flight
    _ = submitted(&h, relay(2, request: "m2"))  // bob#2 queued behind it
    // Bob resumed on another node (epoch 8), which numbered his session through seq 5, and came
    // back here (epoch 9) before this node heard of it: seqs 1 and 2 of Redis are not this
    // node's. What the batch in flight carries waits for its answer.
    #expect(h.hold("bob", epoch: 9, lastSeq: 5, now: at(0.005)) == [])
    // Refused (it landed after the other node's resume): both are numbered again after seq 5,
    // in their order, under epoch 9 (without this, both were lost, their senders answered).
    let effects = h.batchStored(1, refused: ["bob": .superseded], now: at(0.01))
    #expect(!effects.contains { if case .close = $0 { return true } else { return false } })
    #expect(
      bobs(effects)
        == .init(
          id: "bob", epoch: 9,
          frames: [.init(seq: 6, bytes: bytes(1, seq: 6)), .init(seq: 7, bytes: bytes(2, seq: 7))]))
  }

  @Test func aSessionBackHereAfterAnotherNodeNumberedItNumbersAgainOnlyWhatItsLandedBatchDidNotCarry() {
    var h = holding(["alice": 0, "bob": 0])
    _ = submitted(&h, relay(1, request: "m1"))
    _ = submitted(&h, relay(2, request: "m2"))
    #expect(h.hold("bob", epoch: 9, lastSeq: 5, now: at(0.005)) == [])
    // The batch landed before the other node's resume (Redis's seq 1 is this node's candidate):
    // only bob#2, never sent, is numbered again.
    let effects = h.batchStored(1, refused: [:], now: at(0.01))
    #expect(bobs(effects) == .init(id: "bob", epoch: 9, frames: [.init(seq: 6, bytes: bytes(2, seq: 6))]))
  }

  @Test func aSessionBackHereAfterAnotherNodeNumberedItWithNothingInFlightNumbersAgainAtOnce() {
    var h = holding(["alice": 0, "bob": 0])
    _ = submitted(&h, relay(1, request: "m1"))
    _ = h.batchFailed(1, now: at(0.001))  // back in the queue, nothing in flight
    #expect(h.store == .failed)
    #expect(h.hold("bob", epoch: 9, lastSeq: 5, now: at(0.005)) == [])
    let effects = h.tick(now: at(0.01))
    #expect(bobs(effects) == .init(id: "bob", epoch: 9, frames: [.init(seq: 6, bytes: bytes(1, seq: 6))]))
  }

  @Test func aSessionBackHereAfterAFailedBatchLandedNumbersAgainOnlyWhatRedisDoesNotShowStored() {
    var h = holding(["alice": 0, "bob": 0])
    let unkeyed = Holder.Outgoing(session: "bob", frame: frame(4), kind: .storeFirst)
    _ = submitted(&h, [ring("bob", 1, once: "invite-c1"), answer("bob", 2, to: "b2")])
    _ = h.batchFailed(1, now: at(0.001))  // it landed, but its answer was lost
    _ = submitted(&h, [unkeyed], at: 0.002)
    // Bob resumed on another node after batch 1 landed (Redis has its key and its answer), and
    // came back: seqs 1 and 2 are stored; seq 3, never sent, is numbered again.
    #expect(
      h.hold("bob", epoch: 9, lastSeq: 5, onces: ["invite-c1"], storedRequests: ["b2"], now: at(0.005)) == [])
    let effects = h.tick(now: at(0.01))
    #expect(bobs(effects) == .init(id: "bob", epoch: 9, frames: [.init(seq: 6, bytes: bytes(4, seq: 6))]))
  }

  func ring(_ session: String, _ n: Int, once: String) -> Holder.Outgoing {
    .init(session: session, frame: frame(n), kind: .storeFirst, once: once)
  }

  @Test func aMessageWhoseOnceKeyTheSessionHadIsNotNumberedAgain() {
    var h = holder()
    _ = h.hold("bob", epoch: 7, lastSeq: 0, onces: ["stored-before"], now: t0)
    // The same invite twice (two paths), a copy of what Redis stored before: numbered once.
    let first = batch(submitted(&h, [ring("bob", 1, once: "invite-c1")]))
    // The batch carries the key, for Redis to refuse later copies and the next holder to load.
    #expect(first?.sessions.first?.frames.map(\.once) == ["invite-c1"])
    _ = submitted(&h, [ring("bob", 2, once: "invite-c1"), ring("bob", 3, once: "stored-before")])
    // A letter with the key: a copy another node left before this node's was stored.
    _ = h.letter(ring("bob", 4, once: "invite-c1"), position: "1-0", now: t0)
    #expect(h.sessions["bob"]?.unstored.map(\.seq) == [1])
    #expect(h.sessions["bob"]?.next == 2)
  }

  @Test func aCandidateIsWrittenBeforeItIsStoredOnlyWithinTheSessionsBound() {
    var h = holding(["bob": 0], .init(lease: .seconds(10), margin: .seconds(2), maxSessionFrames: 2))
    #expect(writes(submitted(&h, [candidate("bob", 1)])) == ["bob#1"])
    #expect(writes(submitted(&h, [candidate("bob", 2)])) == ["bob#2"])
    // Letters pass the bound (their senders were answered): the third waits for its store,
    // since whoever numbers the session after this node goes on past seq 2 (2 after the last
    // stored).
    #expect(writes(h.letter(candidate("bob", 3), position: "1-0", now: t0)) == [])
    #expect(writes(h.batchStored(1, refused: [:], now: at(0.01))) == ["bob#3"])
  }

  /// Alice's candidate to Bob with a batch window: Bob's copy, and Alice's ack, which may wait.
  func relayWaiting(_ n: Int) -> [Holder.Outgoing] {
    [
      candidate("bob", n),
      .init(session: "alice", frame: frame(100 + n), kind: .storeFirst, requestID: "m\(n)", mayWait: true),
    ]
  }

  func windowed(maxBatchFrames: Int = 512) -> Holder {
    holding(
      ["alice": 0, "bob": 0, "carol": 0],
      .init(lease: .seconds(10), margin: .seconds(2), maxBatchFrames: maxBatchFrames, batchWindow: .milliseconds(5)))
  }

  @Test func framesThatMayWaitShareABatchWithinTheWindowAndCandidatesAreWrittenAtOnce() {
    var h = windowed()
    let first = submitted(&h, relayWaiting(1), at: 0)
    #expect(first == [.write(session: "bob", seq: 1, bytes: bytes(1, seq: 1)), .wake(at: at(0.005))])
    // The next event within the window: written, queued, no second wake.
    #expect(submitted(&h, relayWaiting(2), at: 0.001) == [.write(session: "bob", seq: 2, bytes: bytes(2, seq: 2))])
    #expect(h.tick(now: at(0.004)) == [])
    let due = batch(h.tick(now: at(0.005)))
    #expect(due?.sessions.map { $0.frames.map(\.seq) } == [[1, 2], [1, 2]])
    // The next queue gets a wake of its own.
    _ = h.batchStored(1, refused: [:], now: at(0.006))
    #expect(submitted(&h, relayWaiting(3), at: 0.007).last == .wake(at: at(0.012)))
  }

  @Test func aFrameThatMayNotWaitSendsTheQueueAtOnce() {
    var h = windowed()
    _ = submitted(&h, relayWaiting(1), at: 0)
    // An invite for Carol and its answer to Alice: sent now, with the waiting event before it.
    let invite = submitted(
      &h, [.init(session: "carol", frame: frame(7), kind: .storeFirst), answer("alice", 8, to: "i1")], at: 0.001)
    #expect(batch(invite)?.frameCount == 4)
  }

  @Test func waitingFramesThatFillABatchAreSentAtOnce() {
    var h = windowed(maxBatchFrames: 4)
    _ = submitted(&h, relayWaiting(1), at: 0)
    #expect(batch(submitted(&h, relayWaiting(2), at: 0.001))?.frameCount == 4)
  }

  @Test func aBatchSaysWhatSentIt() {
    var h = windowed(maxBatchFrames: 4)
    _ = submitted(&h, relayWaiting(1), at: 0)
    #expect(batch(h.tick(now: at(0.005)))?.cut == .window)
    _ = h.batchStored(1, refused: [:], now: at(0.006))
    let invite = submitted(&h, [.init(session: "carol", frame: frame(7), kind: .storeFirst)], at: 0.007)
    #expect(batch(invite)?.cut == .urgent)
    _ = h.batchStored(2, refused: [:], now: at(0.008))
    _ = submitted(&h, relayWaiting(2), at: 0.01)
    #expect(batch(submitted(&h, relayWaiting(3), at: 0.011))?.cut == .full)
  }

  @Test func aReleasedSessionsQueuedFramesAreNotStoredHereButSentOnAndItsLettersKept() {
    var h = holding(["alice": 0, "bob": 0])
    _ = submitted(&h, [candidate("alice", 0)])
    _ = submitted(&h, relay(1, request: "m1"))
    _ = h.letter(candidate("bob", 2), position: "9-0", now: at(0))
    // Alice's ack is stored with the next batch: Bob's copy goes where his session is now.
    #expect(h.release("bob") == [.unheld(candidate("bob", 1))])
    #expect(h.retained.map(\.position) == [InboxPosition("9-0")])
    #expect(batch(h.batchStored(1, refused: [:], now: at(0.01)))?.sessions.map(\.id) == ["alice"])
  }

  // MARK: Events awaited (a forwarded request's answer: `WriteBehindShell.flush(replies:)`)

  /// `{lease 10 s, margin 2 s}` with a batch window: an event waits for it.
  func awaitingLimits() -> Holder.Limits {
    .init(lease: .seconds(10), margin: .seconds(2), batchWindow: .milliseconds(50))
  }

  func reports(_ effects: [Effect]) -> [Effect] {
    effects.filter {
      switch $0 {
      case .eventsStored, .eventsDropped: true
      default: false
      }
    }
  }

  @Test func anAwaitedEventIsReportedStoredOnlyOnceItsBatchIsAfterTheWindow() {
    var h = holding(["alice": 0], awaitingLimits())
    // The copy of a relayed candidate another node forwarded here: written at once, stored later.
    let first = h.submit([candidate("alice", 1)], now: at(0))
    #expect(first.event == 1 && writes(first.effects) == ["alice#1"] && batch(first.effects) == nil)
    h.awaitStored(through: 1)
    #expect(h.storedThrough == 0)
    // A second event, not awaited, joins the first's batch.
    #expect(h.submit([candidate("alice", 2)], now: at(0.01)).event == 2)
    let cut = h.tick(now: at(0.06))
    #expect(batch(cut)?.frameCount == 2 && reports(cut) == [])
    // Failed: nothing stored, nothing reported; sent again, then stored.
    #expect(reports(h.batchFailed(1, now: at(0.07))) == [])
    let again = h.tick(now: at(0.08))
    #expect(batch(again)?.number == 2 && reports(again) == [])
    #expect(reports(h.batchStored(2, refused: [:], now: at(0.09))) == [.eventsStored(through: 2)])
    #expect(h.storedThrough == 2)
    // An event stored without anything awaiting it is not reported.
    _ = h.submit([candidate("alice", 3)], now: at(0.1))
    _ = h.tick(now: at(0.2))
    #expect(reports(h.batchStored(3, refused: [:], now: at(0.21))) == [] && h.storedThrough == 3)
  }

  @Test func anAwaitedEventWhoseSessionWasLostHereIsReportedWhenCutWithNothingToStore() {
    var h = holding(["alice": 0], awaitingLimits())
    #expect(h.submit([candidate("alice", 1)], now: at(0)).event == 1)
    h.awaitStored(through: 1)
    // Alice's session goes (another node resumed it): her frame goes where she is now, first.
    #expect(h.release("alice") == [.unheld(candidate("alice", 1))])
    let cut = h.tick(now: at(0.06))
    #expect(batch(cut) == nil && cut == [.eventsStored(through: 1)])
  }

  @Test func theLapseReportsTheAwaitedEventsDropped() {
    var h = holding(["alice": 0], awaitingLimits())
    #expect(h.submit([candidate("alice", 1)], now: at(0)).event == 1)
    h.awaitStored(through: 1)
    _ = h.tick(now: at(0.06))
    // Renewals fail: at lease − margin the queue and the batch in flight are dropped.
    let lapse = h.tick(now: at(8))
    #expect(lapse == [.close(session: "alice", .stale), .eventsDropped(through: 1)])
    // Its batch landing late reports nothing more.
    #expect(reports(h.batchStored(1, refused: [:], now: at(8.1))) == [])
  }

  @Test func anAwaitedEventWhoseFramesAreNumberedAgainWaitsForTheirNewBatch() {
    var h = holding(["alice": 0], awaitingLimits())
    #expect(h.submit([candidate("alice", 1)], now: at(0)).event == 1)
    h.awaitStored(through: 1)
    #expect(batch(h.tick(now: at(0.06)))?.number == 1)
    // Alice resumes on this node while the batch flies: her frame is numbered again (event 2),
    // and Redis refuses the old epoch's.
    _ = h.hold("alice", epoch: 8, lastSeq: 0, now: at(0.07))
    let landed = h.batchStored(1, refused: ["alice": .superseded], now: at(0.08))
    #expect(reports(landed) == [], "event 1's frame is stored only as event 2's")
    #expect(batch(landed)?.number == 2)
    #expect(reports(h.batchStored(2, refused: [:], now: at(0.09))) == [.eventsStored(through: 2)])
  }
}
