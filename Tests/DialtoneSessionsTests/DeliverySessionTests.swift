import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSessions

/// The session's memories without a socket: answers to repeated ids, and the resume window.
struct DeliverySessionTests {
  private func session(capacity: Int = 1024, maxUnackedBytes: Int = 1 << 20, replyMemory: Int = 3)
    -> LocalSession
  {
    LocalSession(
      id: "s_test", identity: Identity(userId: "alice", deviceId: "phone", name: nil), socket: nil,
      now: Date(timeIntervalSince1970: 0), capacity: capacity, maxUnackedBytes: maxUnackedBytes,
      replyMemory: replyMemory)
  }

  @Test func repeatedIdsGetTheFirstAnswerUntilTheyAreEvictedOldestFirst() {
    let session = session(replyMemory: 3)
    for n in 1...3 { session.remember(.ack(.init(replyTo: "r\(n)", callId: "c\(n)")), for: "r\(n)") }
    #expect(session.reply(to: "r1") == .ack(.init(replyTo: "r1", callId: "c1")))
    #expect(session.reply(to: "r9") == nil)

    session.remember(.ack(.init(replyTo: "r4")), for: "r4")  // evicts r1, the oldest
    #expect(session.reply(to: "r1") == nil)
    #expect(session.reply(to: "r2") != nil && session.reply(to: "r4") != nil)
    session.remember(.ack(.init(replyTo: "r5")), for: "r5")  // evicts r2
    #expect(session.reply(to: "r2") == nil && session.reply(to: "r3") != nil)

    // Remembering an id again replaces its answer without evicting anything.
    session.remember(.error(.init(replyTo: "r3", code: .notFound, message: "gone")), for: "r3")
    #expect(session.reply(to: "r3")?.errorCode == .notFound)
    #expect(session.reply(to: "r4") != nil && session.reply(to: "r5") != nil)
  }

  @Test func resumeWorksOnlyWhileEveryLaterMessageIsHeld() {
    let session = session(capacity: 4)
    for n in 1...6 { session.deliver(.ack(.init(replyTo: "r\(n)"))) }
    // Six sent, four held: seq 1 and 2 were dropped unacknowledged.
    #expect(session.lastSentSeq == 6 && session.unackedCount == 4)
    #expect(!session.canResume(from: 1))
    #expect(session.canResume(from: 2) && session.canResume(from: 6))
    #expect(!session.canResume(from: 7))
    session.acknowledge(upTo: 5)
    #expect(session.unackedCount == 1)
  }

  /// A device that never acks holds a bounded number of bytes, however big the messages: the
  /// oldest go, and a resume from before them is refused (the client resyncs).
  @Test func unacknowledgedMessagesAreBoundedInBytes() {
    let session = session(maxUnackedBytes: 100_000)
    let sdp = String(repeating: "a", count: 30_000)
    for n in 1...10 {
      session.deliver(.offer(.init(callId: "c\(n)", from: Peer(userId: "bob", deviceId: "phone"), sdp: sdp)))
    }
    #expect(session.unackedBytes <= 100_000 && session.unackedCount == 3)
    #expect(!session.canResume(from: 6) && session.canResume(from: 7))
    session.acknowledge(upTo: 10)
    #expect(session.unackedBytes == 0 && session.unackedCount == 0)
  }

  /// A relayed candidate's ack goes without a seq: not numbered, kept for no resume, and not
  /// remembered (a candidate sent again is handled afresh, protocol.md 5.3), so it takes no
  /// place of the answers a repeat must find.
  @Test func aRelayedCandidatesAckIsUnnumberedAndNotRemembered() throws {
    let session = session(replyMemory: 2)
    let socket = RecordingSocket()
    session.attach(socket, now: Date(timeIntervalSince1970: 0))
    session.answer(.ack(.init(replyTo: "r1")), to: "r1", coalesced: false)
    let ack = ServerMessage.ack(.init(replyTo: "c1", callId: "call"))
    session.answerRelayed(ack, to: "c1", coalesced: true)
    #expect(session.lastSentSeq == 1 && session.unackedCount == 1)
    let written = try MessageCodec.decodeServerMessage(try #require(socket.frames.last))
    #expect(written.seq == nil && written.message == ack)
    session.answer(.ack(.init(replyTo: "r2")), to: "r2", coalesced: false)
    #expect(try MessageCodec.decodeServerMessage(try #require(socket.frames.last)).seq == 2)

    // A resume re-sends the numbered messages only.
    let again = RecordingSocket()
    session.resume(on: again, lastSeq: 0, now: Date(timeIntervalSince1970: 0))
    #expect(try again.frames.map { try MessageCodec.decodeServerMessage($0).seq } == [1, 2])

    // Not remembered; the two answers around it still are (the memory holds two here), and
    // a repeat of one is numbered anew.
    #expect(!session.answerAgain("c1"))
    #expect(session.answerAgain("r1") && session.lastSentSeq == 3)
    #expect(session.answerAgain("r2") && session.lastSentSeq == 4)
  }

  /// Only a plain ack of the very request is sent without a seq: anything else is numbered.
  @Test func aRelayedAnswerOtherThanItsPlainAckIsNumbered() {
    let session = session()
    session.answerRelayed(.error(.init(replyTo: "c1", code: .notFound, message: "no call")), to: "c1", coalesced: false)
    #expect(session.lastSentSeq == 1 && session.unackedCount == 1)
    #expect(session.answerAgain("c1") && session.lastSentSeq == 2)
  }

  /// Deliveries, acks (stale, exact, beyond what was sent) and resumes in a long random run,
  /// against a plain list of what is held: the counts, the bytes, the resume window and what a
  /// resume re-sends agree at every step (acknowledging counts what to drop from the seqs held).
  @Test func aLongRunOfDeliveriesAcksAndResumesMatchesTheModel() throws {
    var random = SeededGenerator(seed: 40)
    let session = session(capacity: 16, maxUnackedBytes: 4_000)
    var held: [(seq: UInt64, bytes: Int)] = []
    var sent: UInt64 = 0
    var dropped: UInt64 = 0
    for step in 0..<3_000 {
      switch random.next() % 10 {
      case 0..<6:
        let message = ServerMessage.ack(.init(replyTo: String(repeating: "r", count: Int(random.next() % 900) + 1)))
        session.deliver(message)
        sent += 1
        held.append((sent, MessageCodec.encode(message, seq: sent).count))
        while held.count > 16 || (held.reduce(0) { $0 + $1.bytes } > 4_000 && held.count > 1) {
          dropped = held.removeFirst().seq
        }
      case 6..<9:
        let upTo = random.next() % (sent + 3)
        session.acknowledge(upTo: upTo)
        held.removeAll { $0.seq <= upTo }
      default:
        let lastSeq = random.next() % (sent + 2)
        guard session.canResume(from: lastSeq) else {
          #expect(lastSeq < dropped || lastSeq > sent, "step \(step)")
          continue
        }
        let socket = RecordingSocket()
        session.resume(on: socket, lastSeq: lastSeq, now: Date(timeIntervalSince1970: 0))
        held.removeAll { $0.seq <= lastSeq }
        let resent = try socket.frames.map { try #require(MessageCodec.decodeServerMessage($0).seq) }
        #expect(resent == held.map(\.seq), "step \(step)")
        session.detach(now: Date(timeIntervalSince1970: 0))
      }
      #expect(session.unackedCount == held.count, "step \(step)")
      #expect(session.unackedBytes == held.reduce(0) { $0 + $1.bytes }, "step \(step)")
      #expect(session.lastSentSeq == sent)
    }
  }
}

/// Frames a session wrote, in order. Test-only and used from one thread: `@unchecked` for that.
private final class RecordingSocket: SessionSocket, @unchecked Sendable {
  let id: UInt64 = 1
  var frames: [[UInt8]] = []
  func send(text bytes: [UInt8]) { frames.append(bytes) }
  func sendCoalesced(text bytes: [UInt8]) { frames.append(bytes) }
  func close(code: UInt16, reason: String) {}
}

extension ServerMessage {
  fileprivate var errorCode: ErrorCode? {
    if case .error(let e) = self { return e.code }
    return nil
  }
}
