import DialtoneCluster
import Testing

/// Admission before a request is handled (`WriteBehindHolder.admit`), in virtual time: past the
/// node's bound a request of this node's own client is refused up front, and one admitted is
/// numbered whatever was numbered meanwhile.
@Suite struct WriteBehindAdmission {
  typealias Holder = WriteBehindHolder

  let t0 = ContinuousClock.now
  func at(_ seconds: Double) -> Holder.Instant { t0 + .milliseconds(Int64(seconds * 1000)) }

  /// A frame of about `size` bytes once numbered; it costs about twice that held.
  func frame(_ n: Int, size: Int = 0) -> SessionLedger.Frame {
    .init(
      head: Array(#"{"seq":"#.utf8),
      tail: Array(#","n":\#(n),"pad":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: size) + Array(#""}"#.utf8))
  }

  func candidate(_ session: String, _ n: Int, size: Int = 0) -> Holder.Outgoing {
    .init(session: session, frame: frame(n, size: size), kind: .candidate)
  }

  /// Bob's accept for Alice (a store-first frame) and Bob's ack (the answer to his request).
  func accept(_ request: String) -> [Holder.Outgoing] {
    [
      .init(session: "alice", frame: frame(1), kind: .storeFirst),
      .init(session: "bob", frame: frame(2), kind: .storeFirst, requestID: request),
    ]
  }

  /// 10,000 bytes for the node, 2 × (100 + 1,024) = 2,248 kept for a request of 100 bytes.
  func holding(maxNodeBytes: Int = 10_000) -> Holder {
    var h = Holder(
      limits: .init(
        lease: .seconds(100), margin: .seconds(2), maxNodeBytes: maxNodeBytes, batchWindow: .seconds(60),
        admissionCopies: 1, admissionHold: .seconds(5)),
      renewedAt: t0)
    for session in ["alice", "bob"] {
      _ = h.hold(session, epoch: 7, lastSeq: 0, now: t0)
      _ = h.announced(session, epoch: 7)
    }
    return h
  }

  /// Letters for Alice (never refused) of about 3,000 bytes held each, at inbox positions from `from`.
  func letters(_ h: inout Holder, _ count: Int, from: Int = 1) {
    for n in from..<(from + count) {
      _ = h.letter(candidate("alice", 100 + n, size: 1_500), position: "\(n)-0", now: at(0))
    }
  }

  @Test func anAdmittedRequestsEventIsNumberedThoughLettersFilledTheNodeMeanwhile() {
    var h = holding()
    #expect(h.admit("a1", of: "bob", bytes: 100, now: at(0)) == true)
    #expect(h.reservedBytes == 2_248 && h.admittedWaiting == 1)
    // While the request waits for the journal, other nodes' letters come: numbered whatever the
    // bounds, until the reader stops (the room kept counts against the bound too).
    letters(&h, 2)
    #expect(h.acceptsLetters)
    letters(&h, 1, from: 3)
    #expect(!h.acceptsLetters)
    // The reader had read one more already: ~12,000 bytes held, past the bound.
    letters(&h, 1, from: 4)
    // The accept's event passes the node's bound now: admitted, it is numbered all the same, in
    // the room kept for it (without admission it was refused and both sessions resynced).
    let submitted = h.submit(accept("a1"), now: at(0.01))
    #expect(submitted.refusal == nil && submitted.resyncing.isEmpty && submitted.event != nil)
    #expect(h.sessions["alice"]?.next == 6 && h.sessions["bob"]?.next == 2)
    #expect(h.reservedBytes == 0 && h.admittedWaiting == 0)
  }

  @Test func aRequestRefusedUpFrontLeavesEverythingAsItWas() {
    var h = holding()
    letters(&h, 3)
    let before = (h.sessions, h.eventsNumbered, h.reservedBytes)
    // 3 × ~3,000 held: 2,248 more would pass 10,000. Refused before the hub handles it: nothing
    // kept, nothing numbered, no session to resync (the hub answers `rate-limited`).
    #expect(h.admit("a1", of: "bob", bytes: 100, now: at(0)) == false)
    #expect(h.sessions == before.0 && h.eventsNumbered == before.1 && h.reservedBytes == before.2)
    #expect(h.admittedWaiting == 0)
    // Once Redis has them there is room again.
    let cut = h.tick(now: at(61))
    guard case .store(let batch)? = cut.first(where: { if case .store = $0 { true } else { false } }) else {
      Issue.record("no batch: \(cut)")
      return
    }
    _ = h.batchStored(batch.number, refused: [:], now: at(61.01))
    #expect(h.admit("a1", of: "bob", bytes: 100, now: at(61.02)) == true)
  }

  @Test func theRoomKeptIsNotTakenByEventsOfRequestsNotAdmitted() {
    var h = holding()
    letters(&h, 2)
    // ~6,000 held: a first request is kept 2,248, a second would pass the bound.
    #expect(h.admit("a1", of: "bob", bytes: 100, now: at(0)) == true)
    #expect(h.admit("a2", of: "alice", bytes: 100, now: at(0)) == false)
    // An event nobody admitted (a timer's end) that would eat into that room is refused as
    // before (its sessions resync); the admitted one still fits.
    let timer = h.submit(
      [.init(session: "alice", frame: frame(9, size: 1_000), kind: .storeFirst)], now: at(0))
    #expect(timer.refusal == .backlog && timer.resyncing == ["alice"])
    #expect(h.submit(accept("a1"), now: at(0)).refusal == nil)
  }

  @Test func roomNeverClaimedIsLetGo() {
    var h = holding()
    #expect(h.admit("a1", of: "bob", bytes: 100, now: at(0)) == true)
    #expect(h.admit("a2", of: "alice", bytes: 100, now: at(1)) == true)
    // Asked again (a retry before it was handled), the same room.
    #expect(h.admit("a2", of: "alice", bytes: 100, now: at(1)) == true)
    #expect(h.admittedWaiting == 2 && h.reservedBytes == 4_496)
    // Alice's session ends here: her request's room goes with it.
    _ = h.release("alice")
    #expect(h.admittedWaiting == 1 && h.reservedBytes == 2_248)
    // Bob's answer never came through the holder: let go after `admissionHold`.
    _ = h.tick(now: at(4.9))
    #expect(h.admittedWaiting == 1)
    _ = h.tick(now: at(5))
    #expect(h.admittedWaiting == 0 && h.reservedBytes == 0)
    // A lapsed lease lets every room go.
    #expect(h.admit("a3", of: "bob", bytes: 100, now: at(6)) == true)
    _ = h.tick(now: at(98))
    #expect(h.lease == .stale && h.reservedBytes == 0 && h.admittedWaiting == 0)
  }
}
