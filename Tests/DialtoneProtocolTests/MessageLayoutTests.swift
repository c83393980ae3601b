import Testing

@testable import DialtoneProtocol

/// A message enum is as large as its largest payload and is copied whole each time it moves, so
/// a rare, large payload kept inline makes every relayed candidate and ack pay for it. The hot
/// messages set the budget; anything larger goes out of line (`OutOfLine`, `indirect`).
struct MessageLayoutTests {
  @Test func theHotMessagesSetTheSizeOfEveryMessage() {
    #expect(MemoryLayout<ClientMessage>.size <= MemoryLayout<ClientMessage.Candidate>.size + 8)
    #expect(MemoryLayout<ServerMessage>.size <= MemoryLayout<ServerMessage.Candidate>.size + 8)
    #expect(MemoryLayout<ServerMessage.Ack>.size <= 64)
  }

  @Test func anAcksCallAndGroupAreValuesThoughKeptOutOfLine() throws {
    let original = ServerMessage.Ack(replyTo: "g1", callId: Fixtures.callId, group: Fixtures.group)
    var changed = original
    changed.group?.title = "Retro"
    changed.call = CallState(
      callId: Fixtures.callId, callerId: "alice", calleeId: "bob", callerDeviceId: "phone", video: false,
      state: .ringing, createdAt: 5)
    #expect(original.group?.title == "Standup")
    #expect(original.call == nil)
    #expect(changed.group?.title == "Retro")
    #expect(changed != original)
    changed.group?.title = "Standup"
    changed.call = nil
    #expect(changed == original)
    #expect(changed.hashValue == original.hashValue)

    let decoded = try MessageCodec.decodeServerMessage(MessageCodec.encode(.ack(original), seq: 3))
    #expect(decoded.message == .ack(original))
  }

  /// The plain ack (no states' temporaries) is the same value as one built with both states
  /// nil, and only it, answering the very request, may go without a seq.
  @Test func aPlainAckIsOnlyTheRequestAndItsCall() {
    let plain = ServerMessage.Ack(replyTo: "c1", callId: Fixtures.callId)
    #expect(plain == ServerMessage.Ack(replyTo: "c1", callId: Fixtures.callId, call: nil, group: nil))
    #expect(plain.isPlain && ServerMessage.ack(plain).isPlainAck(answering: "c1"))
    #expect(!ServerMessage.ack(plain).isPlainAck(answering: "c2"))
    let withGroup = ServerMessage.Ack(replyTo: "c1", callId: Fixtures.callId, group: Fixtures.group)
    #expect(!withGroup.isPlain && !ServerMessage.ack(withGroup).isPlainAck(answering: "c1"))
    let withCall = ServerMessage.Ack(
      replyTo: "c1",
      call: CallState(
        callId: Fixtures.callId, callerId: "alice", calleeId: "bob", callerDeviceId: "phone", video: false,
        state: .ringing, createdAt: 5))
    #expect(!withCall.isPlain && !ServerMessage.ack(withCall).isPlainAck(answering: "c1"))
    #expect(!ServerMessage.error(.init(replyTo: "c1", code: .notFound, message: "no call")).isPlainAck(answering: "c1"))
  }
}
