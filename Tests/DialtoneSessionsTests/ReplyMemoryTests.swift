import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSessions

/// `ReplyMemory` against a plain model (a list of the last `capacity` distinct ids in the order
/// they were first remembered; remembering an id again replaces its answer in place), over
/// generated sequences with many repeats, at several capacities, with every kind of answer the
/// memory keeps apart (a plain ack is kept as its call id alone, anything else whole).
struct ReplyMemoryTests {
  static func reply(_ kind: Int, to id: String, step: Int) -> ServerMessage {
    switch kind {
    case 0: return .ack(.init(replyTo: id))
    case 1: return .ack(.init(replyTo: "other-\(id)", callId: "c\(step)"))  // not this id's own ack
    case 2:
      return .ack(
        .init(
          replyTo: id, callId: "c\(step)",
          call: CallState(
            callId: "c\(step)", callerId: "a", calleeId: "b", callerDeviceId: "p", video: false, state: .ringing,
            createdAt: Int64(step))))
    case 3: return .error(.init(replyTo: id, code: .notFound, message: "no call c\(step)", callId: "c\(step)"))
    default: return .ack(.init(replyTo: id, callId: "c\(step)"))
    }
  }

  @Test(arguments: [1, 2, 3, 7, 16, 100])
  func behavesAsTheModel(capacity: Int) {
    var random = SeededGenerator(seed: UInt64(capacity) &* 0x9E37_79B9_7F4A_7C15)
    func next(_ n: Int) -> Int { random.below(n) }
    var memory = ReplyMemory(capacity: capacity)
    var model = RecentReplies(capacity: capacity)
    for step in 0..<2000 {
      let id = "r\(next(capacity * 3))"
      let reply = Self.reply(next(6), to: id, step: step)
      model.remember(reply, for: id)
      memory.remember(reply, for: id)
      // Every id ever used is probed at small capacities, a sample of them at large ones.
      for k in stride(from: step % max(1, capacity / 16), to: capacity * 3, by: max(1, capacity / 16)) {
        let probe = "r\(k)"
        #expect(memory.reply(to: probe) == model.reply(to: probe), "step \(step), \(probe)")
      }
    }
  }

  /// With `forget` among the steps: the model is the ring itself (slots in the order they were
  /// filled, the oldest slot reused, an id mapped to its slot until forgotten or evicted), so
  /// the table's deletions (backward shifts, forgotten slots left out of it) are checked against
  /// plain look-ups at every step.
  @Test(arguments: [1, 2, 3, 7, 16, 100])
  func behavesAsTheRingModelWithForgets(capacity: Int) {
    var random = SeededGenerator(seed: UInt64(capacity) &* 0xD1B5_4A32_D192_ED03 &+ 1)
    func next(_ n: Int) -> Int { random.below(n) }
    var memory = ReplyMemory(capacity: capacity)
    var ring = ReplyRing(capacity: capacity)
    for step in 0..<3000 {
      let id = "r\(next(capacity * 3))"
      if next(4) == 0 {
        ring.forget(id)
        memory.forget(id)
      } else {
        let reply = Self.reply(next(6), to: id, step: step)
        ring.remember(reply, for: id)
        memory.remember(reply, for: id)
      }
      for k in 0..<(capacity * 3) {
        let probe = "r\(k)"
        #expect(memory.reply(to: probe) == ring.reply(to: probe), "step \(step), \(probe)")
      }
    }
  }

  /// A request refused after its answer was remembered (write-behind's `rate-limited`) is
  /// forgotten; remembered again, it stays however the ring turns round its old slot.
  @Test func aForgottenIdIsGoneAndRememberedAgainIsKept() {
    var memory = ReplyMemory(capacity: 3)
    func ack(_ id: String) -> ServerMessage { .ack(.init(replyTo: id)) }
    for id in ["a", "b", "c"] { memory.remember(ack(id), for: id) }
    memory.forget("a")
    #expect(memory.reply(to: "a") == nil)
    memory.remember(ack("a"), for: "a")  // into the oldest slot: its own old one
    #expect(["a", "b", "c"].map { memory.reply(to: $0) } == [ack("a"), ack("b"), ack("c")])
    memory.forget("b")
    memory.remember(ack("d"), for: "d")  // into b's old slot
    memory.remember(ack("b"), for: "b")  // into c's
    #expect(["a", "b", "c", "d"].map { memory.reply(to: $0) } == [ack("a"), ack("b"), nil, ack("d")])
  }

  /// A full memory of 512 (the server's size) through many evictions: every remembered id is
  /// found with its own answer, every evicted one is gone, and ids never sent are not found.
  @Test func aFullMemoryEvictsExactlyTheOldest() {
    var memory = ReplyMemory(capacity: 512)
    for n in 0..<5_000 {
      memory.remember(.ack(.init(replyTo: "req-\(n)", callId: "call-\(n % 7)")), for: "req-\(n)")
      if n % 997 == 0 || n == 4_999 {
        for k in 0...n {
          let expected: ServerMessage? = k > n - 512 ? .ack(.init(replyTo: "req-\(k)", callId: "call-\(k % 7)")) : nil
          #expect(memory.reply(to: "req-\(k)") == expected, "after \(n), req-\(k)")
        }
        #expect(memory.reply(to: "never-\(n)") == nil)
      }
    }
  }

  /// The server's order: each request's id is looked up first and, when missed, remembered
  /// (its hash kept from the look-up); sometimes another id is remembered in between, or the
  /// same text arrives as another string, so a kept hash must only serve its own id.
  @Test(arguments: [1, 5, 64])
  func aMissesHashServesOnlyItsOwnId(capacity: Int) {
    var random = SeededGenerator(seed: 0x1234_5678 &+ UInt64(capacity))
    func next(_ n: Int) -> Int { random.below(n) }
    var memory = ReplyMemory(capacity: capacity)
    var model = RecentReplies(capacity: capacity)
    func remember(_ id: String, _ reply: ServerMessage) {
      model.remember(reply, for: id)
      memory.remember(reply, for: id)
    }
    for step in 0..<3000 {
      let id = "request-\(next(capacity * 2 + 1))-of-a-longer-text"
      #expect(memory.reply(to: id) == model.reply(to: id), "step \(step)")
      switch next(4) {
      case 0:  // another id remembered between the look-up and its own remember
        let other = "request-\(next(capacity * 2 + 1))-of-a-longer-text"
        remember(other, Self.reply(next(6), to: other, step: step))
        remember(id, Self.reply(next(6), to: id, step: step))
      case 1:  // the same text as a string of its own
        let copy = String(decoding: Array(id.utf8), as: UTF8.self)
        remember(copy, Self.reply(next(6), to: copy, step: step))
      default:
        remember(id, Self.reply(next(6), to: id, step: step))
      }
    }
    for k in 0...(capacity * 2) {
      let probe = "request-\(k)-of-a-longer-text"
      #expect(memory.reply(to: probe) == model.reply(to: probe))
    }
  }

  /// `remember` after its own id's miss skips its probe (the id cannot have been added since):
  /// in the server's order, with forgets, hits, other misses and other ids' remembers between a
  /// look-up and its `remember`, against the ring model (an id stored twice, or a repeat stored
  /// as new, would change which id the ring evicts, and what is found).
  @Test(arguments: [1, 2, 7, 64])
  func aRememberAfterItsMissStoresTheIdOnce(capacity: Int) {
    var random = SeededGenerator(seed: 0xABCD_0000 &+ UInt64(capacity))
    func next(_ n: Int) -> Int { random.below(n) }
    var memory = ReplyMemory(capacity: capacity)
    var ring = ReplyRing(capacity: capacity)
    func remember(_ id: String, _ reply: ServerMessage) {
      ring.remember(reply, for: id)
      memory.remember(reply, for: id)
    }
    func lookUp(_ id: String, _ step: Int) {
      #expect(memory.reply(to: id) == ring.reply(to: id), "step \(step), \(id)")
    }
    for step in 0..<4000 {
      let id = "r\(next(capacity * 3))"
      lookUp(id, step)
      for _ in 0..<next(3) {
        let other = "r\(next(capacity * 3))"
        switch next(3) {
        case 0:
          ring.forget(other)
          memory.forget(other)
        case 1: lookUp(other, step)
        default: remember(other, Self.reply(next(6), to: other, step: step))
        }
      }
      remember(id, Self.reply(next(6), to: id, step: step))
      if next(3) == 0 { remember(id, Self.reply(next(6), to: id, step: step)) }  // again, no look-up
    }
    for k in 0..<(capacity * 3) { lookUp("r\(k)", -1) }
  }

  /// The ring's storage grows by doubling up to `capacity` (the slots moved, the table rebuilt
  /// from the indexed ones): with forgets and repeats while it grows, at capacities just past
  /// each doubling and at the server's 512, every id ever used answers as the ring model after
  /// each step that crossed a doubling, and after the last.
  @Test(arguments: [9, 17, 33, 65, 129, 512])
  func growsThroughEveryRoomAsTheRingModel(capacity: Int) {
    var random = SeededGenerator(seed: 0x5EED_0000 &+ UInt64(capacity))
    func next(_ n: Int) -> Int { random.below(n) }
    var memory = ReplyMemory(capacity: capacity)
    var ring = ReplyRing(capacity: capacity)
    var remembered = 0
    for step in 0..<(capacity * 3) {
      let id = "req-\(next(capacity * 2))-\(step % 3)"
      if next(5) == 0 {
        ring.forget(id)
        memory.forget(id)
        continue
      }
      #expect(memory.reply(to: id) == ring.reply(to: id), "step \(step), \(id)")
      let reply = Self.reply(next(6), to: id, step: step)
      ring.remember(reply, for: id)
      memory.remember(reply, for: id)
      remembered += 1
      if remembered.nonzeroBitCount == 1 || remembered.nonzeroBitCount == 2 && remembered & 1 == 1 {
        for k in 0..<(capacity * 2) {
          for suffix in 0..<3 {
            let probe = "req-\(k)-\(suffix)"
            #expect(memory.reply(to: probe) == ring.reply(to: probe), "step \(step), \(probe)")
          }
        }
      }
    }
    for k in 0..<(capacity * 2) {
      for suffix in 0..<3 {
        let probe = "req-\(k)-\(suffix)"
        #expect(memory.reply(to: probe) == ring.reply(to: probe), "end, \(probe)")
      }
    }
  }
}

extension ReplyMemoryTests {
  /// A capacity that is not a power of two: the ring's storage stops growing at the capacity,
  /// and the full ring evicts exactly the oldest from there on.
  @Test func aRoomCappedAtAnOddCapacityHoldsExactlyThatMany() {
    var memory = ReplyMemory(capacity: 20)
    for n in 0..<100 {
      memory.remember(.ack(.init(replyTo: "req-\(n)")), for: "req-\(n)")
      for k in 0...n {
        let expected: ServerMessage? = k > n - 20 ? .ack(.init(replyTo: "req-\(k)")) : nil
        #expect(memory.reply(to: "req-\(k)") == expected, "after \(n), req-\(k)")
      }
    }
  }
}

/// The plain model of `ReplyMemory`: the last `capacity` distinct ids in the order they were
/// first remembered, an id remembered again keeping its place with the new answer.
private struct RecentReplies {
  let capacity: Int
  private var entries: [(id: String, reply: ServerMessage)] = []

  init(capacity: Int) { self.capacity = capacity }

  mutating func remember(_ reply: ServerMessage, for id: String) {
    if let index = entries.firstIndex(where: { $0.id == id }) {
      entries[index].reply = reply
    } else {
      entries.append((id, reply))
      if entries.count > capacity { entries.removeFirst() }
    }
  }

  func reply(to id: String) -> ServerMessage? { entries.first(where: { $0.id == id })?.reply }
}

/// The memory's own ring as a model: slots in the order they were filled, the oldest slot
/// reused once full, an id mapped to its slot until forgotten or evicted (a forgotten id's slot
/// stays in the ring and is reused in its turn).
private struct ReplyRing {
  let capacity: Int
  private var ring: [(id: String, reply: ServerMessage)] = []
  private var slotOf: [String: Int] = [:]
  private var oldest = 0

  init(capacity: Int) { self.capacity = capacity }

  mutating func remember(_ reply: ServerMessage, for id: String) {
    if let index = slotOf[id] {
      ring[index].reply = reply
    } else if ring.count < capacity {
      ring.append((id, reply))
      slotOf[id] = ring.count - 1
    } else {
      if slotOf[ring[oldest].id] == oldest { slotOf[ring[oldest].id] = nil }
      ring[oldest] = (id, reply)
      slotOf[id] = oldest
      oldest = (oldest + 1) % capacity
    }
  }

  mutating func forget(_ id: String) { slotOf[id] = nil }

  func reply(to id: String) -> ServerMessage? { slotOf[id].map { ring[$0].reply } }
}
