import DialtoneCluster
import DialtoneProtocol
import Testing

@Suite struct LedgerFrameBytes {
  /// A numbered frame's bytes are written in one buffer: the same bytes as the head, the seq's
  /// decimal digits and the tail joined, for every number of digits (they are stored in Redis and
  /// compared across nodes of different versions during a rolling restart).
  @Test func aFramesBytesAreItsHeadTheSeqInDecimalAndItsTail() {
    let frame = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"candidate"}"#.utf8))
    var seqs: [UInt64] = [0, 1, 9, UInt64.max, UInt64.max - 1]
    var power: UInt64 = 1
    for _ in 0..<19 {
      power *= 10
      seqs += [power - 1, power, power + 1]
    }
    for seq in seqs {
      #expect(frame.bytes(seq: seq) == frame.head + Array(String(seq).utf8) + frame.tail, "seq \(seq)")
    }
    let bare = SessionLedger.Frame(head: [], tail: [])
    #expect(bare.bytes(seq: 42) == Array("42".utf8))
    // As the node builds it: the message's frame split around its seq, numbered again.
    let message = ServerMessage.ack(.init(replyTo: "r1", callId: "c1"))
    let (head, tail) = ServerFrame(message).splitAtSeq
    #expect(SessionLedger.Frame(head: head, tail: tail).bytes(seq: 1234) == ServerFrame(message).bytes(seq: 1234))
  }
}
