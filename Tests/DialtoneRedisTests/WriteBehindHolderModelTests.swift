import DialtoneCluster
import DialtoneTestSupport
import Testing

/// The write-behind holder against a model of Redis, under generated sequences of events,
/// batches stored, lost and refused, ticks and windows: what must hold whatever the order.
@Suite struct WriteBehindHolderModel {
  typealias Holder = WriteBehindHolder

  /// What the test knows of one run: Redis's last stored seq per session, the socket's last
  /// written seq, each frame's kind and event, and the sessions closed here.
  struct World {
    var redisLast: [String: UInt64] = [:]
    var socketLast: [String: UInt64] = [:]
    var kinds: [String: [UInt64: Holder.Kind]] = [:]
    var eventOf: [String: [UInt64: Int]] = [:]
    var eventFrames: [Int: [(String, UInt64)]] = [:]
    var answers: [String: Set<UInt64>] = [:]
    var closed: Set<String> = []
    var inFlight: WriteBehindBatch?
    /// Relayed candidates' acks (not numbered): the event each answers, and those written.
    var unstoredEvent: [String: Int] = [:]
    var unstoredWritten: Set<String> = []
  }

  let sessions = ["a", "b", "c", "d"]
  let t0 = ContinuousClock.now

  func frame(_ n: Int) -> SessionLedger.Frame {
    .init(head: Array(#"{"seq":"#.utf8), tail: Array(#","n":\#(n)}"#.utf8))
  }

  /// Applies effects the way a shell would, checking each against the world.
  func apply(_ effects: [Holder.Effect], _ world: inout World, seed: UInt64) {
    for effect in effects {
      switch effect {
      case .write(let session, let seq, _):
        #expect(!world.closed.contains(session), "seed \(seed): a write to a closed session")
        // Seqs reach the socket one by one, in order.
        #expect(seq == (world.socketLast[session] ?? 0) + 1, "seed \(seed): \(session) wrote \(seq)")
        world.socketLast[session] = seq
        // Only a candidate reaches the socket before Redis has it.
        if seq > (world.redisLast[session] ?? 0) {
          #expect(world.kinds[session]?[seq] == .candidate, "seed \(seed): \(session)#\(seq) written unstored")
        }
        // An answer only once everything its request caused is stored.
        if world.answers[session]?.contains(seq) == true, let event = world.eventOf[session]?[seq] {
          for (other, otherSeq) in world.eventFrames[event] ?? [] where !world.closed.contains(other) {
            #expect(otherSeq <= (world.redisLast[other] ?? 0), "seed \(seed): answered before \(other)#\(otherSeq)")
          }
        }
      case .store(let batch):
        #expect(world.inFlight == nil, "seed \(seed): two batches in flight")
        world.inFlight = batch
      case .close(let session, _):
        world.closed.insert(session)
      case .answer(let answer):
        #expect(world.unstoredWritten.insert(answer.requestID).inserted, "seed \(seed): \(answer.requestID) twice")
        // Only once the copies its request caused are stored.
        let event = world.unstoredEvent[answer.requestID]
        #expect(event != nil, "seed \(seed): an ack nobody asked for")
        for (other, otherSeq) in event.flatMap({ world.eventFrames[$0] }) ?? [] where !world.closed.contains(other) {
          #expect(otherSeq <= (world.redisLast[other] ?? 0), "seed \(seed): acked before \(other)#\(otherSeq)")
        }
      case .wake, .unheld, .eventsStored, .eventsDropped:
        break
      }
    }
  }

  /// Redis runs the batch in flight as `WriteBehindStore` would (skipping seqs it has, refusing a
  /// gap), unless `refuse` names a session taken by another node.
  func runInFlight(_ world: inout World, refuse: String?) -> [String: WriteBehindBatch.Refusal] {
    guard let batch = world.inFlight else { return [:] }
    var refused: [String: WriteBehindBatch.Refusal] = [:]
    for part in batch.sessions {
      if part.id == refuse {
        refused[part.id] = .superseded
        continue
      }
      var last = world.redisLast[part.id] ?? 0
      let fresh = part.frames.filter { $0.seq > last }
      guard fresh.first.map({ $0.seq == last + 1 }) ?? true else {
        refused[part.id] = .gap
        continue
      }
      for (offset, frame) in fresh.enumerated() { #expect(frame.seq == last + 1 + UInt64(offset)) }
      last = fresh.last?.seq ?? last
      world.redisLast[part.id] = last
    }
    return refused
  }

  @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
  func whateverTheOrderSeqsAreWrittenInOrderAndNothingUnstoredButCandidates(seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let window: Duration = random.chance(50) ? .zero : .milliseconds(3)
    var holder = Holder(
      limits: .init(
        lease: .seconds(10), margin: .seconds(2), maxSessionFrames: 12, maxBatchFrames: 1 + random.below(6),
        batchWindow: window),
      renewedAt: t0)
    var world = World()
    for session in sessions {
      apply(holder.hold(session, epoch: 1, lastSeq: 0, now: t0), &world, seed: seed)
      apply(holder.announced(session, epoch: 1), &world, seed: seed)
    }
    var clock = t0
    var nextEvent = 0
    var refusedOnce = false
    for step in 0..<3000 {
      clock += .microseconds(100 + random.below(900))
      apply(holder.leaseRenewed(sentAt: clock, now: clock), &world, seed: seed)
      switch random.below(10) {
      case 0...4:
        // A client's request: frames for one to three sessions, its answer last (store-first).
        var event: [Holder.Outgoing] = []
        for _ in 0..<random.below(3) {
          let kind: Holder.Kind = random.chance(75) ? .candidate : .storeFirst
          event.append(.init(session: random.pick(sessions), frame: frame(step), kind: kind))
        }
        // A relayed candidate's ack is written without a seq, unstored; any other answer is stored.
        let relayed = event.allSatisfy { $0.kind == .candidate } && random.chance(50)
        var answers: [Holder.UnstoredAnswer] = []
        if relayed {
          answers.append(.init(session: random.pick(sessions), requestID: "r\(step)", bytes: Array("ack".utf8)))
        } else {
          event.append(
            .init(
              session: random.pick(sessions), frame: frame(step), kind: .storeFirst, requestID: "r\(step)",
              mayWait: random.chance(70)))
        }
        let before = holder.sessions.mapValues(\.next)
        let submitted = holder.submit(event, answers: answers, now: clock)
        guard submitted.refusal == nil else {
          apply(submitted.effects, &world, seed: seed)
          continue
        }
        let effects = submitted.effects
        nextEvent += 1
        if relayed { world.unstoredEvent["r\(step)"] = nextEvent }
        var counts: [String: UInt64] = [:]
        for outgoing in event {
          guard let next = before[outgoing.session] else { continue }
          let seq = next + counts[outgoing.session, default: 0]
          counts[outgoing.session, default: 0] += 1
          world.kinds[outgoing.session, default: [:]][seq] = outgoing.kind
          world.eventOf[outgoing.session, default: [:]][seq] = nextEvent
          world.eventFrames[nextEvent, default: []].append((outgoing.session, seq))
          if outgoing.requestID != nil { world.answers[outgoing.session, default: []].insert(seq) }
        }
        apply(effects, &world, seed: seed)
      case 5:
        let session = random.pick(sessions)
        if let next = holder.sessions[session]?.next {
          let kind: Holder.Kind = random.chance(60) ? .candidate : .storeFirst
          world.kinds[session, default: [:]][next] = kind
          let letter = Holder.Outgoing(session: session, frame: frame(step), kind: kind)
          apply(holder.letter(letter, position: "\(step)-0", now: clock), &world, seed: seed)
        }
      case 6...8:
        guard let batch = world.inFlight else {
          apply(holder.tick(now: clock), &world, seed: seed)
          continue
        }
        if random.chance(10) {
          // Lost: stored or not, the holder cannot tell.
          if random.chance(50) { #expect(runInFlight(&world, refuse: nil).isEmpty, "seed \(seed): a gap") }
          world.inFlight = nil
          apply(holder.batchFailed(batch.number, now: clock), &world, seed: seed)
        } else {
          // Once a run, another node takes a session.
          let refuse = !refusedOnce && random.chance(2) ? batch.sessions.first?.id : nil
          refusedOnce = refusedOnce || refuse != nil
          let refused = runInFlight(&world, refuse: refuse)
          #expect(refused.values.allSatisfy { $0 == .superseded }, "seed \(seed): a gap")
          world.inFlight = nil
          apply(holder.batchStored(batch.number, refused: refused, now: clock), &world, seed: seed)
        }
      default:
        apply(holder.tick(now: clock), &world, seed: seed)
      }
    }
    // Redis answers everything from now on: every frame numbered is stored and written.
    for _ in 0..<1000 {
      clock += .milliseconds(5)
      apply(holder.leaseRenewed(sentAt: clock, now: clock), &world, seed: seed)
      if let batch = world.inFlight {
        let refused = runInFlight(&world, refuse: nil)
        #expect(refused.isEmpty, "seed \(seed): a gap")
        world.inFlight = nil
        apply(holder.batchStored(batch.number, refused: refused, now: clock), &world, seed: seed)
      } else {
        apply(holder.tick(now: clock), &world, seed: seed)
      }
    }
    #expect(world.inFlight == nil)
    #expect(holder.answersWaiting == 0, "seed \(seed): acks still waiting")
    #expect(world.unstoredWritten.count == world.unstoredEvent.count, "seed \(seed): acks never written")
    for (session, held) in holder.sessions {
      #expect(held.unstored.isEmpty, "seed \(seed): \(session) has frames unstored")
      #expect(world.redisLast[session] ?? 0 == held.next - 1, "seed \(seed): \(session) not all stored")
      #expect(world.socketLast[session] ?? 0 == held.next - 1, "seed \(seed): \(session) not all written")
    }
  }
}
