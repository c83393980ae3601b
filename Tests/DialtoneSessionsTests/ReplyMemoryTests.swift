import DialtoneProtocol
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

  @Test(arguments: [1, 2, 3, 7, 16])
  func behavesAsTheModel(capacity: Int) {
    var state: UInt64 = UInt64(capacity) &* 0x9E37_79B9_7F4A_7C15
    func next(_ n: Int) -> Int {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return Int((state >> 33) % UInt64(n))
    }
    var memory = ReplyMemory(capacity: capacity)
    var model: [(id: String, reply: ServerMessage)] = []
    for step in 0..<2000 {
      let id = "r\(next(capacity * 3))"
      let reply = Self.reply(next(6), to: id, step: step)
      if let index = model.firstIndex(where: { $0.id == id }) {
        model[index].reply = reply
      } else {
        model.append((id, reply))
        if model.count > capacity { model.removeFirst() }
      }
      memory.remember(reply, for: id)
      for k in 0..<(capacity * 3) {
        let probe = "r\(k)"
        #expect(memory.reply(to: probe) == model.first(where: { $0.id == probe })?.reply, "step \(step), \(probe)")
      }
    }
  }
}
