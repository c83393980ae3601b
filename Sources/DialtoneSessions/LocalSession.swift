import DialtoneMetrics
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// A session on one server: it numbers its messages itself and keeps those not yet acknowledged
/// (`unacked`, bounded in count and bytes) for a resume on a later socket.
package final class LocalSession: DeliverySession {
  package let id: String
  package let identity: Identity
  package var socket: (any SessionSocket)? { attached }
  /// The socket in private storage: every access to a `package` stored property (visible to
  /// other modules) stays a runtime exclusivity check, two a relayed message; these accesses
  /// are all seen here, and checked statically.
  private var attached: (any SessionSocket)?
  package private(set) var connectedAt: Date
  package private(set) var detachedAt: Date?

  private var nextSeq: UInt64 = 1
  /// The messages not yet acknowledged, with their bytes' total, mutated in one access each time.
  private var kept = Unacked()
  /// Highest seq dropped from `unacked` without an ack: a resume from below it is impossible.
  private var droppedThrough: UInt64 = 0
  /// `unacked` holds at most this many messages and bytes: a device that never acks costs a
  /// bounded amount, and resuming from before what was dropped gets `resync`.
  private let capacity: Int
  private let maxUnackedBytes: Int
  package var unackedBytes: Int { kept.bytes }
  private var replies: ReplyMemory
  /// Counts every message of the session, numbered or a relayed candidate's ack without a seq
  /// (`dialtone_messages_sent_total`, as `SharedSession` counts them).
  private let sent: Counter?

  package init(
    id: String, identity: Identity, socket: (any SessionSocket)?, now: Date, capacity: Int = 1024,
    maxUnackedBytes: Int = 1 << 20, replyMemory: Int = 512, sent: Counter? = nil
  ) {
    self.id = id
    self.identity = identity
    attached = socket
    connectedAt = now
    self.capacity = capacity
    self.maxUnackedBytes = maxUnackedBytes
    replies = ReplyMemory(capacity: replyMemory)
    self.sent = sent
  }

  package var lastSentSeq: UInt64 { nextSeq - 1 }
  package var unackedCount: Int { kept.frames.count }

  package func deliver(_ message: ServerMessage, coalesced: Bool) {
    // The seq first, then the bytes, then the queue: a closure encoding the message inside
    // `enqueue` captured a copy of it (a copy and a destroy of the message per frame).
    let seq = takeSeq()
    enqueue(seq: seq, bytes: MessageCodec.encode(message, seq: seq), coalesced: coalesced)
  }

  package func deliver(_ frame: ServerFrame) {
    let seq = takeSeq()
    enqueue(seq: seq, bytes: frame.bytes(seq: seq), coalesced: false)
  }

  package func answer(_ reply: ServerMessage, to requestID: String, coalesced: Bool) {
    changeReplies { $0.remember(reply, for: requestID) }
    deliver(reply, coalesced: coalesced)
  }

  /// Without a seq, so that it is kept for no resume and the client counts it towards no ack
  /// (its own acks are then fewer); not remembered, as a candidate sent again is handled afresh.
  package func answerRelayed(_ reply: ServerMessage, to requestID: String, coalesced: Bool) {
    guard reply.isPlainAck(answering: requestID) else { return answer(reply, to: requestID, coalesced: coalesced) }
    sendUnnumbered(reply, coalesced: coalesced)
  }

  /// A relayed candidate's ack: counted as sent, written without a seq, kept for no resume.
  private func sendUnnumbered(_ reply: ServerMessage, coalesced: Bool) {
    sent?.increment()
    guard let socket = attached else { return }
    let bytes = MessageCodec.encode(reply, seq: nil)
    if coalesced { socket.sendCoalesced(text: bytes) } else { socket.send(text: bytes) }
  }

  /// The next message's seq, counted as sent.
  private func takeSeq() -> UInt64 {
    let seq = nextSeq
    nextSeq = seq &+ 1
    sent?.increment()
    return seq
  }

  /// Keeps the frame numbered `seq` (just taken) until acknowledged and sends it.
  private func enqueue(seq: UInt64, bytes: [UInt8], coalesced: Bool) {
    // The queue and its byte count are one stored property, mutated in one access: every access
    // to a class's stored property across a call the optimiser cannot see through is a runtime
    // exclusivity check, and appending and trimming took one per property touched.
    let (capacity, maxBytes) = (capacity, maxUnackedBytes)
    if let dropped = changeKept({ $0.keep(seq: seq, bytes: bytes, capacity: capacity, maxBytes: maxBytes) }) {
      droppedThrough = dropped
    }
    if let socket = attached {
      if coalesced { socket.sendCoalesced(text: bytes) } else { socket.send(text: bytes) }
    }
  }

  package func acknowledge(upTo seq: UInt64) {
    let bounded = min(seq, lastSentSeq)
    // `kept` holds exactly the seqs `nextSeq - count ..< nextSeq` (numbered as appended,
    // dropped only from the front), so how many to drop is known without reading each one's
    // seq: `first` would copy every element out (a retain and a release) just for it.
    let oldest = nextSeq - UInt64(kept.frames.count)
    guard bounded >= oldest else { return }
    changeKept { $0.drop(Int(bounded - oldest + 1)) }
  }

  /// A resume from `lastSeq` works when every later message is still held.
  package func canResume(from lastSeq: UInt64) -> Bool {
    lastSeq >= droppedThrough && lastSeq <= lastSentSeq
  }

  /// Attaches a new socket and re-sends every message after `lastSeq`, in order.
  package func resume(on socket: any SessionSocket, lastSeq: UInt64, now: Date) {
    attach(socket, now: now)
    acknowledge(upTo: lastSeq)
    for message in kept.frames where message.seq > lastSeq { socket.send(text: message.bytes) }
  }

  package func attach(_ socket: any SessionSocket, now: Date) {
    attached = socket
    connectedAt = now
    detachedAt = nil
  }

  package func detach(now: Date) {
    attached = nil
    detachedAt = now
  }

  package func reply(to requestID: String) -> ServerMessage? { changeReplies { $0.reply(to: requestID) } }
  package func remember(_ reply: ServerMessage, for requestID: String) {
    changeReplies { $0.remember(reply, for: requestID) }
  }
  package func forget(_ requestID: String) { changeReplies { $0.forget(requestID) } }

  /// Changes `kept` on the value moved out of the property and back (see `changeReplies`).
  @discardableResult
  private func changeKept<Result>(_ change: (inout Unacked) -> Result) -> Result {
    var frames = Unacked()
    swap(&frames, &kept)
    defer { swap(&frames, &kept) }
    return change(&frames)
  }

  /// Uses `replies` moved out of the property and back. An access to the property spanning the
  /// memory's own calls (hashing, arrays that may free what they drop: code the optimiser cannot
  /// see through) is a runtime exclusivity check, one or two each request; a move is cheaper.
  /// `use` only uses the memory.
  @discardableResult
  private func changeReplies<Result>(_ use: (inout ReplyMemory) -> Result) -> Result {
    var memory = ReplyMemory(capacity: 1)
    swap(&memory, &replies)
    defer { swap(&memory, &replies) }
    return use(&memory)
  }
}

/// A session's unacknowledged messages, oldest first, and their bytes' total.
private struct Unacked {
  private(set) var frames = FIFOQueue<(seq: UInt64, bytes: [UInt8])>()
  private(set) var bytes = 0

  /// Appends a message and drops the oldest past `capacity` messages or `maxBytes` (always
  /// keeping the newest); the highest seq dropped, if any.
  mutating func keep(seq: UInt64, bytes frame: [UInt8], capacity: Int, maxBytes: Int) -> UInt64? {
    frames.append((seq, frame))
    bytes += frame.count
    var droppedThrough: UInt64?
    while frames.count > capacity || (bytes > maxBytes && frames.count > 1), let dropped = frames.popFirst() {
      bytes -= dropped.bytes.count
      droppedThrough = dropped.seq
    }
    return droppedThrough
  }

  /// Drops the `count` oldest messages (acknowledged).
  mutating func drop(_ count: Int) {
    for _ in 0..<count {
      guard let gone = frames.popFirst() else { break }
      bytes -= gone.bytes.count
    }
  }
}
