import DialtoneMetrics
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// One device's signaling session: it outlives sockets so that nothing sent to the device is lost
/// when a socket drops. Every server message gets the next `seq` and is kept until the client's
/// cumulative `ack`; a resume re-sends what the client has not processed.
///
/// On a single server the session numbers and keeps its messages itself (`unacked`). In a
/// cluster (`shared`) they are stored where every node can resume the session, which numbers
/// them: the session hands each message to the store, and writes what comes back (`stored`) to
/// its socket in seq order, holding early ones until the gap before them is filled.
/// Owned by `SignalingHub` (actor-isolated there; never shared).
package final class DeliverySession {
  package let id: String
  package let identity: Identity
  package let createdAt: Date
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

  /// Answers to recent request ids, replayed when a request is repeated. They sit in a ring of
  /// slots (oldest evicted first) and the dictionary maps an id to its slot: evicting an entry
  /// then moves an Int inside the hash table, not a whole message.
  private var replySlot: [String: Int] = [:]
  private var replySlots: [(id: String, reply: ServerMessage)] = []  // grows to replyMemory
  private var replyNext = 0
  private let replyMemory: Int
  /// Counts every sequenced message (`dialtone_messages_sent_total`).
  private let sent: Counter?

  /// The cluster's store of sessions; nil on a single server.
  private let shared: (any SharedSessions)?
  /// Frames stored ahead of the next one to write, by seq (shared sessions only).
  private var early: [UInt64: (bytes: [UInt8], coalesced: Bool)] = [:]
  /// The highest seq the client acknowledged and the store was told of.
  private var acknowledged: UInt64 = 0
  /// A check for a gap before `early` is scheduled.
  package var gapCheckPending = false
  /// Frames held for a gap before the session gives up on filling it (it is then broken).
  package static let maxEarly = 1024

  package init(
    id: String, identity: Identity, socket: (any SessionSocket)?, now: Date, capacity: Int = 1024,
    maxUnackedBytes: Int = 1 << 20, replyMemory: Int = 512, sent: Counter? = nil,
    shared: (any SharedSessions)? = nil, lastSeq: UInt64 = 0
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
    self.shared = shared
    nextSeq = lastSeq + 1
    acknowledged = lastSeq
  }

  package var isConnected: Bool { socket != nil }
  package var lastSentSeq: UInt64 { nextSeq - 1 }
  package var unackedCount: Int { unacked.count }

  /// Assigns the next seq, keeps the message for resume, and writes it if a socket is attached.
  /// A `coalesced` message may wait briefly to share a write with the next one (order is kept).
  package func deliver(_ message: ServerMessage, coalesced: Bool = false) {
    if let shared {
      sent?.increment()
      return shared.append(message, to: id, answering: nil, coalesced: coalesced)
    }
    enqueue(coalesced: coalesced) { MessageCodec.encode(message, seq: $0) }
  }

  /// `deliver` for a message encoded once for several sessions (single server only: in a
  /// cluster the store encodes it once for all).
  package func deliver(_ frame: ServerFrame) {
    enqueue(coalesced: false) { frame.bytes(seq: $0) }
  }

  /// Delivers the answer to a request and remembers it for a repeat of the request.
  package func answer(_ reply: ServerMessage, to requestID: String, coalesced: Bool = false) {
    remember(reply, for: requestID)
    if let shared {
      sent?.increment()
      return shared.append(reply, to: id, answering: requestID, coalesced: coalesced)
    }
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
    write(bytes, coalesced: coalesced)
  }

  private func write(_ bytes: [UInt8], coalesced: Bool) {
    if coalesced { socket?.sendCoalesced(text: bytes) } else { socket?.send(text: bytes) }
  }

  /// A frame the cluster's store numbered for this session: written in seq order. Whether a gap
  /// now holds frames back (the hub checks on it later).
  package func stored(_ frame: StoredFrame) -> Bool {
    guard frame.seq >= nextSeq else { return false }  // written already, or replayed by a resume
    // Without a socket the store keeps it for the resume.
    guard socket != nil else { return false }
    guard frame.seq == nextSeq else {
      if early.count < Self.maxEarly { early[frame.seq] = (frame.bytes, frame.coalesced) }
      return true
    }
    write(frame.bytes, coalesced: frame.coalesced)
    nextSeq += 1
    while let next = early.removeValue(forKey: nextSeq) {
      write(next.bytes, coalesced: next.coalesced)
      nextSeq += 1
    }
    return !early.isEmpty
  }

  /// Whether frames still wait for an earlier one (the store is asked for what came after
  /// `lastSentSeq`), or so many wait that the session cannot catch up (`overflowing`).
  package var hasGap: Bool { !early.isEmpty }
  package var overflowing: Bool { early.count >= Self.maxEarly }

  package func sendUnsequenced(_ message: ServerMessage) {
    socket?.send(text: MessageCodec.encode(message, seq: nil))
  }

  package func acknowledge(upTo seq: UInt64) {
    if let shared {
      let bounded = min(seq, lastSentSeq)
      guard bounded > acknowledged else { return }
      acknowledged = bounded
      return shared.acknowledge(id, through: bounded)
    }
    let bounded = min(seq, lastSentSeq)
    while let oldest = unacked.first, oldest.seq <= bounded {
      unacked.popFirst()
      unackedBytes -= oldest.bytes.count
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
    early.removeAll()
  }

  package func reply(to requestID: String) -> ServerMessage? {
    replySlot[requestID].map { replySlots[$0].reply }
  }

  package func remember(_ reply: ServerMessage, for requestID: String) {
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
