import DialtoneMetrics
import DialtoneNet
import DialtoneProtocol
import Foundation

/// One device's signaling session: it outlives sockets so that nothing sent to the device is lost
/// when a socket drops. Every server message gets the next `seq` and stays in `unacked` until the
/// client's cumulative `ack`; a resume re-sends what the client has not processed.
/// Owned by `SignalingHub` (actor-isolated there; never shared).
final class DeliverySession {
  let id: String
  let identity: Identity
  let createdAt: Date
  private(set) var socket: WebSocketConnection?
  private(set) var connectedAt: Date
  private(set) var detachedAt: Date?

  private var nextSeq: UInt64 = 1
  private var unacked = FIFOQueue<(seq: UInt64, bytes: [UInt8])>()
  /// Highest seq dropped from `unacked` without an ack: a resume from below it is impossible.
  private var droppedThrough: UInt64 = 0
  /// `unacked` holds at most this many messages and bytes: a device that never acks costs a
  /// bounded amount, and resuming from before what was dropped gets `resync`.
  private let capacity: Int
  private let maxUnackedBytes: Int
  private(set) var unackedBytes = 0

  /// Answers to recent request ids, replayed when a request is repeated. They sit in a ring of
  /// slots (oldest evicted first) and the dictionary maps an id to its slot: evicting an entry
  /// then moves an Int inside the hash table, not a whole message.
  private var replySlot: [String: Int] = [:]
  private var replySlots: [(id: String, reply: ServerMessage)] = []  // grows to replyMemory
  private var replyNext = 0
  private let replyMemory: Int
  /// Copies of a ring that reached this session twice from other nodes (`RingReplayFilter`).
  var ringReplays = RingReplayFilter()
  /// Counts every sequenced message (`dialtone_messages_sent_total`).
  private let sent: Counter?

  init(
    id: String, identity: Identity, socket: WebSocketConnection?, now: Date, capacity: Int = 1024,
    maxUnackedBytes: Int = 1 << 20, replyMemory: Int = 512, sent: Counter? = nil
  ) {
    self.sent = sent
    self.id = id
    self.identity = identity
    self.socket = socket
    self.createdAt = now
    self.connectedAt = now
    self.capacity = capacity
    self.maxUnackedBytes = maxUnackedBytes
    self.replyMemory = max(1, replyMemory)
  }

  var isConnected: Bool { socket != nil }
  var lastSentSeq: UInt64 { nextSeq - 1 }
  var unackedCount: Int { unacked.count }

  /// Assigns the next seq, keeps the message for resume, and writes it if a socket is attached.
  /// A `coalesced` message may wait briefly to share a write with the next one (order is kept).
  func deliver(_ message: ServerMessage, coalesced: Bool = false) {
    enqueue(coalesced: coalesced) { MessageCodec.encode(message, seq: $0) }
  }

  /// `deliver` for a message encoded once for several sessions.
  func deliver(_ frame: ServerFrame) {
    enqueue(coalesced: false) { frame.bytes(seq: $0) }
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

  /// Writes a message outside the seq stream (`welcome`, pre-session errors).
  func sendUnsequenced(_ message: ServerMessage) {
    socket?.send(text: MessageCodec.encode(message, seq: nil))
  }

  func acknowledge(upTo seq: UInt64) {
    let bounded = min(seq, lastSentSeq)
    while let oldest = unacked.first, oldest.seq <= bounded {
      unacked.popFirst()
      unackedBytes -= oldest.bytes.count
    }
  }

  /// A resume from `lastSeq` works when every later message is still held.
  func canResume(from lastSeq: UInt64) -> Bool {
    lastSeq >= droppedThrough && lastSeq <= lastSentSeq
  }

  /// Attaches a new socket and re-sends every message after `lastSeq`, in order.
  func resume(on socket: WebSocketConnection, lastSeq: UInt64, now: Date) {
    attach(socket, now: now)
    acknowledge(upTo: lastSeq)
    for message in unacked where message.seq > lastSeq { socket.send(text: message.bytes) }
  }

  func attach(_ socket: WebSocketConnection, now: Date) {
    self.socket = socket
    connectedAt = now
    detachedAt = nil
  }

  func detach(now: Date) {
    socket = nil
    detachedAt = now
  }

  func reply(to requestID: String) -> ServerMessage? {
    replySlot[requestID].map { replySlots[$0].reply }
  }

  func remember(_ reply: ServerMessage, for requestID: String) {
    if let slot = replySlot[requestID] {
      replySlots[slot].reply = reply
      return
    }
    if replySlots.count < replyMemory {
      replySlot[requestID] = replySlots.count
      replySlots.append((requestID, reply))
      return
    }
    replySlot.removeValue(forKey: replySlots[replyNext].id)
    replySlots[replyNext] = (requestID, reply)
    replySlot[requestID] = replyNext
    replyNext = (replyNext + 1) % replyMemory
  }
}
