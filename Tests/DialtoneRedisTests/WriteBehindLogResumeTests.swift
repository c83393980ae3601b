import DialtoneCluster
import Testing

/// What a resume with the node log decides from the takes (`WriteBehindLogResume`, docs/
/// architecture.md write-behind point 7, "What a resume reads"), without Redis.
@Suite struct WriteBehindLogResumeTests {
  typealias Frame = WriteBehindLogEntry.Frame
  let session = "s1"
  let holder = "n-x"
  let other = "n-r1"

  private func frame(_ seq: UInt64, epoch: UInt64 = 1, once: String? = nil, request: String? = nil) -> Frame {
    Frame(
      session: session, epoch: epoch, seq: seq, bytes: Array("f\(seq)e\(epoch)".utf8), once: once, requestID: request)
  }

  private func taken(_ frames: [Frame], checkpoint: String = "", onces: [String] = [], letter: String? = nil)
    throws -> WriteBehindLogTaken
  {
    var frames = frames
    if let letter, let last = frames.popLast() {
      frames.append(
        Frame(
          session: last.session, epoch: last.epoch, seq: last.seq, bytes: last.bytes, once: last.once,
          requestID: last.requestID, letterPosition: letter))
    }
    let blob = WriteBehindLogTrimmed.Onces(onces.map { .init(session: session, once: $0) }).encoded()
    return try WriteBehindLogTaken(
      session: session, checkpoint: checkpoint, onceBlobs: onces.isEmpty ? [] : [blob],
      entries: [WriteBehindLogEntry(frames: frames).encoded()])
  }

  private func letter(_ n: Int) -> UnnumberedLetter {
    UnnumberedLetter(session: session, frame: .init(head: Array("l\(n)".utf8), tail: []), requestID: nil)
  }

  /// The script's answer: Redis's `last` 2 (the claim's), epoch 3, the letters at these origins.
  private func script(
    last: UInt64 = 2, pending: [SessionLedger.Stored] = [], origins: [String] = [], dropped: UInt64 = 0,
    letterCut: String? = nil, onces: [String] = []
  ) -> SessionLedger.HeldResumption {
    SessionLedger.HeldResumption(
      lastSeq: last, epoch: 3, pending: pending, replies: [:], letters: origins.indices.map(letter),
      positions: origins.indices.map { "90-\($0)" }, origins: origins, lettersAfter: "89-0", onces: onces,
      logged: .init(dropped: dropped, from: (holder, 2), previousOwner: holder, letterCut: letterCut))
  }

  private func resumed(_ outcome: WriteBehindLogResume.Outcome) -> (
    SessionLedger.HeldResumption, [Frame], WriteBehindLogResume.Settle
  )? {
    if case .resumed(let held, let restore, let settle) = outcome { return (held, restore, settle) }
    Issue.record("resynced")
    return nil
  }

  @Test func theTakesFramesAfterTheClientsSeqAreReplayedOncePerSeqTheLaterEpochsAndReStoredUnderTheNewOne()
    throws
  {
    // The holder stored 3...6 (5 twice: under epoch 1, then again under 2 after it got the session back).
    let fromX = try taken([frame(3), frame(4, once: "o4"), frame(5), frame(5, epoch: 2), frame(6, request: "m6")])
    let outcome = WriteBehindLogResume.decide(
      session, script(onces: ["o1"]), takes: [holder: fromX], client: 4, ahead: 8, capacity: 64)
    let (held, restore, settle) = try #require(resumed(outcome))
    #expect(held.lastSeq == 6)
    #expect(held.pending.map(\.seq) == [5, 6])
    #expect(held.pending.map(\.bytes) == [frame(5, epoch: 2).bytes, frame(6).bytes])
    #expect(restore.map(\.seq) == [5, 6] && restore.allSatisfy { $0.epoch == 3 })
    #expect(restore.last?.requestID == "m6")
    #expect(held.replies == ["m6": frame(6).bytes])
    #expect(held.onces == ["o1", "o4"])
    #expect(settle.last == 6 && settle.dropped == nil && settle.from == "\(holder) 2" && settle.onces == ["o4"])
  }

  @Test func aClientAheadOfEveryStoreGoesOnFromItsSeqWithinTheBoundAndResyncsBeyondIt() throws {
    let fromX = try taken([frame(3), frame(4)])
    let (held, restore, settle) = try #require(
      resumed(WriteBehindLogResume.decide(session, script(), takes: [holder: fromX], client: 7, ahead: 4, capacity: 64))
    )
    #expect(held.lastSeq == 7 && held.pending.isEmpty && restore.isEmpty)
    #expect(settle.last == 7 && settle.dropped == 7)
    #expect(
      WriteBehindLogResume.decide(session, script(), takes: [holder: fromX], client: 9, ahead: 4, capacity: 64)
        == .resync)
  }

  @Test func aHoleOrAClientBehindWhatWasDroppedResyncs() throws {
    let holed = try taken([frame(3), frame(5)])
    #expect(
      WriteBehindLogResume.decide(session, script(), takes: [holder: holed], client: 2, ahead: 8, capacity: 64)
        == .resync)
    // The checkpoint says 6 was stored, the frames after 4 are gone (trimmed): nothing replays them.
    let trimmed = try taken([frame(4)], checkpoint: "6")
    #expect(
      WriteBehindLogResume.decide(session, script(), takes: [holder: trimmed], client: 3, ahead: 8, capacity: 64)
        == .resync)
    #expect(
      WriteBehindLogResume.decide(session, script(dropped: 5), takes: [:], client: 4, ahead: 8, capacity: 64)
        == .resync)
  }

  @Test func framesFromTwoLogsAreJoinedAndTheStoreFirstOnesKept() throws {
    // R1 re-stored 3 and 4 under epoch 3 before dying; the first holder's log still has 3...5.
    let fromX = try taken([frame(3), frame(4), frame(5)])
    let fromR1 = try taken([frame(3, epoch: 3), frame(4, epoch: 3)])
    let stored = [SessionLedger.Stored(sessionID: session, seq: 2, bytes: Array("redis2".utf8))]
    let (held, restore, _) = try #require(
      resumed(
        WriteBehindLogResume.decide(
          session, script(pending: stored), takes: [holder: fromX, other: fromR1], client: 1, ahead: 8, capacity: 64)))
    #expect(held.pending.map(\.seq) == [2, 3, 4, 5])
    #expect(
      held.pending.map(\.bytes) == [
        Array("redis2".utf8), frame(3, epoch: 3).bytes, frame(4, epoch: 3).bytes, frame(5).bytes,
      ])
    // Redis's own frame stays in the session's keys: only the logs' are re-stored.
    #expect(restore.map(\.seq) == [3, 4, 5])
    // Redis numbered 4 itself (past a full inbox) while the log holds another frame at 4: a
    // seq would mean two frames.
    let clash = [SessionLedger.Stored(sessionID: session, seq: 4, bytes: Array("redis4".utf8))]
    #expect(
      WriteBehindLogResume.decide(
        session, script(pending: clash), takes: [holder: fromX], client: 2, ahead: 8, capacity: 64) == .resync)
  }

  @Test func lettersTheHolderStoredAreDroppedAndLettersLostByCountResyncUnlessStored() throws {
    let fromX = try taken([frame(3)], letter: "50-1")
    let (held, _, _) = try #require(
      resumed(
        WriteBehindLogResume.decide(
          session, script(origins: ["49-0", "50-1", "51-0"]), takes: [holder: fromX], client: 3, ahead: 8,
          capacity: 64)))
    #expect(held.origins == ["51-0"] && held.letters == [letter(2)] && held.positions == ["90-2"])
    // The session's letter index dropped letters through 50-5 by count: stored through 50-1 only.
    #expect(
      WriteBehindLogResume.decide(
        session, script(origins: ["51-0"], letterCut: "50-5"), takes: [holder: fromX], client: 3, ahead: 8,
        capacity: 64) == .resync)
    // Stored past the cut: nothing lost.
    let past = try taken([frame(3)], letter: "50-9")
    #expect(
      resumed(
        WriteBehindLogResume.decide(
          session, script(origins: ["51-0"], letterCut: "50-5"), takes: [holder: past], client: 3, ahead: 8,
          capacity: 64)) != nil)
    // More letters and frames than the session holds: resync.
    #expect(
      WriteBehindLogResume.decide(
        session, script(origins: ["51-0", "52-0"]), takes: [holder: fromX], client: 2, ahead: 8, capacity: 2)
        == .resync)
  }
}
