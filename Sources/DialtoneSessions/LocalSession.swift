import DialtoneMetrics
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// A session on one server: it numbers its messages itself and keeps those not yet acknowledged
/// (`unacked`, bounded in count and bytes) for a resume on a later socket.
package final class LocalSession: DeliverySession {
  package let id: String
  package let identity: Identity
  package private(set) var socket: (any SessionSocket)?
  package private(set) var connectedAt: Date
  package private(set) var detachedAt: Date?

  private var nextSeq: UInt64 = 1
  private var unacked = FIFOQueue<(seq: UInt64, bytes: [UInt8])>()
  /// Highest seq dropped from `unacked` without an ack: a resume from below it is impossible.
  private var droppedThrough: UInt64 = 0
  /// `unacked` holds at most this many messages and bytes: a device that never acks costs a
  /// bounded amount, and resuming from before what was dropped gets `resync`.
  private let capacity: Int
  private let maxUnackedBytes: Int
  package private(set) var unackedBytes = 0
  private var replies: ReplyMemory
  /// Counts every sequenced message (`dialtone_messages_sent_total`).
  private let sent: Counter?

  package init(
    id: String, identity: Identity, socket: (any SessionSocket)?, now: Date, capacity: Int = 1024,
    maxUnackedBytes: Int = 1 << 20, replyMemory: Int = 512, sent: Counter? = nil
  ) {
    self.id = id
    self.identity = identity
    self.socket = socket
    connectedAt = now
    self.capacity = capacity
    self.maxUnackedBytes = maxUnackedBytes
    replies = ReplyMemory(capacity: replyMemory)
    self.sent = sent
  }

  package var lastSentSeq: UInt64 { nextSeq - 1 }
  package var unackedCount: Int { unacked.count }

  package func deliver(_ message: ServerMessage, coalesced: Bool) {
    enqueue(coalesced: coalesced) { MessageCodec.encode(message, seq: $0) }
  }

  package func deliver(_ frame: ServerFrame) {
    enqueue(coalesced: false) { frame.bytes(seq: $0) }
  }

  package func answer(_ reply: ServerMessage, to requestID: String, coalesced: Bool) {
    replies.remember(reply, for: requestID)
    deliver(reply, coalesced: coalesced)
  }

  private func enqueue(coalesced: Bool, _ encode: (UInt64) -> [UInt8]) {
    let seq = nextSeq
    nextSeq += 1
    sent?.increment()
    let bytes = encode(seq)
    unacked.append((seq, bytes))
    unackedBytes += bytes.count
    while unacked.count > capacity || (unackedBytes > maxUnackedBytes && unacked.count > 1),
      let dropped = unacked.popFirst()
    {
      unackedBytes -= dropped.bytes.count
      droppedThrough = dropped.seq
    }
    if coalesced { socket?.sendCoalesced(text: bytes) } else { socket?.send(text: bytes) }
  }

  package func acknowledge(upTo seq: UInt64) {
    let bounded = min(seq, lastSentSeq)
    // `unacked` holds exactly the seqs `nextSeq - count ..< nextSeq` (numbered as appended,
    // dropped only from the front), so how many to drop is known without reading each one's
    // seq: `first` would copy every element out (a retain and a release) just for it.
    let oldest = nextSeq - UInt64(unacked.count)
    guard bounded >= oldest else { return }
    for _ in 0..<(bounded - oldest + 1) {
      guard let gone = unacked.popFirst() else { break }
      unackedBytes -= gone.bytes.count
    }
  }

  /// A resume from `lastSeq` works when every later message is still held.
  package func canResume(from lastSeq: UInt64) -> Bool {
    lastSeq >= droppedThrough && lastSeq <= lastSentSeq
  }

  /// Attaches a new socket and re-sends every message after `lastSeq`, in order.
  package func resume(on socket: any SessionSocket, lastSeq: UInt64, now: Date) {
    attach(socket, now: now)
    acknowledge(upTo: lastSeq)
    for message in unacked where message.seq > lastSeq { socket.send(text: message.bytes) }
  }

  package func attach(_ socket: any SessionSocket, now: Date) {
    self.socket = socket
    connectedAt = now
    detachedAt = nil
  }

  package func detach(now: Date) {
    socket = nil
    detachedAt = now
  }

  package func reply(to requestID: String) -> ServerMessage? { replies.reply(to: requestID) }
  package func remember(_ reply: ServerMessage, for requestID: String) { replies.remember(reply, for: requestID) }
  package func forget(_ requestID: String) { replies.forget(requestID) }
}
