import DialtoneMetrics
import DialtoneProtocol
import Foundation

/// One device's signaling session: it outlives sockets so that nothing sent to the device is lost
/// when a socket drops. Every server message gets the next `seq` and is kept until the client's
/// cumulative `ack`; a resume re-sends what the client has not processed.
///
/// Two kinds, told apart by where messages get their seq and are kept: `LocalSession` numbers
/// and keeps its own (one server), `SharedSession` hands each to the cluster's `SessionStore`,
/// which numbers it where any node can resume the session. Owned by the hub (isolated there).
package protocol DeliverySession: AnyObject {
  var id: String { get }
  var identity: Identity { get }
  var socket: (any SessionSocket)? { get }
  var connectedAt: Date { get }
  var lastSentSeq: UInt64 { get }

  /// Gives the message the next seq, keeps it for a resume and writes it if a socket is attached.
  /// A `coalesced` message may wait briefly to share a write with the next one (order is kept).
  func deliver(_ message: ServerMessage, coalesced: Bool)
  /// `deliver` for a message encoded once for several sessions.
  func deliver(_ frame: ServerFrame)
  /// Delivers the answer to a request and remembers it for a repeat of the request.
  func answer(_ reply: ServerMessage, to requestID: String, coalesced: Bool)
  /// The client processed everything through `seq`.
  func acknowledge(upTo seq: UInt64)

  func attach(_ socket: any SessionSocket, now: Date)
  func detach(now: Date)

  /// The answer given to `requestID`, if it is still remembered.
  func reply(to requestID: String) -> ServerMessage?
  func remember(_ reply: ServerMessage, for requestID: String)
}

extension DeliverySession {
  package var isConnected: Bool { socket != nil }

  package func deliver(_ message: ServerMessage) { deliver(message, coalesced: false) }

  /// A message outside the sequence (the welcome, an error before the session exists).
  package func sendUnsequenced(_ message: ServerMessage) {
    socket?.send(text: MessageCodec.encode(message, seq: nil))
  }
}

/// Answers to a session's recent request ids, replayed when a request is repeated. They sit in a
/// ring of slots (oldest evicted first), found through a small open-addressing table of slot
/// numbers (linear probing). Each slot keeps its id's hash: a look-up compares hashes before
/// ids, and evicting or growing never hashes an id again, so a request costs two hashes of its id
/// (the look-up, then remembering its answer) where a `[String: Int]` took three (the eviction's
/// too) and compared ids along each probe. The hash is `String.hashValue` (seeded per process),
/// so a client cannot choose ids that collide.
package struct ReplyMemory {
  /// An answer as kept. Nearly all are an ack of the very request id, with at most a call id:
  /// kept as that call id, a few bytes (a `ServerMessage`, whose `ack` case holds a whole
  /// `CallState`, is hundreds, copied into its slot and out of the one it replaces on every
  /// request). Any other answer is kept whole, boxed.
  private enum Kept {
    case ack(callId: CallID?)
    case other(Boxed)
  }

  private final class Boxed {
    let reply: ServerMessage
    init(_ reply: ServerMessage) { self.reply = reply }
  }

  private var slots: [(id: String, hash: Int, reply: Kept)] = []  // grows to capacity
  /// Slot number + 1 per bucket, 0 when empty; a power of two at least twice the slots, so
  /// probes stay short and always end at an empty bucket.
  private var buckets: [Int32] = []
  private var next = 0
  private let capacity: Int

  package init(capacity: Int) { self.capacity = max(1, capacity) }

  /// `mutating` though it changes nothing: the owner's call then reads the memory in place
  /// (an exclusive access), where a non-mutating call on a class's stored struct copies it,
  /// retaining and releasing its table and ring, on every request a session sends.
  package mutating func reply(to requestID: String) -> ServerMessage? {
    guard !slots.isEmpty, let slot = find(requestID, hash: requestID.hashValue) else { return nil }
    switch slots[slot].reply {
    case .ack(let callId): return .ack(.init(replyTo: requestID, callId: callId))
    case .other(let boxed): return boxed.reply
    }
  }

  private static func kept(_ reply: ServerMessage, for requestID: String) -> Kept {
    if case .ack(let ack) = reply, ack.call == nil, ack.group == nil, ack.replyTo == requestID {
      return .ack(callId: ack.callId)
    }
    return .other(Boxed(reply))
  }

  package mutating func remember(_ reply: ServerMessage, for requestID: String) {
    let kept = Self.kept(reply, for: requestID)
    let hash = requestID.hashValue
    if !slots.isEmpty, let slot = find(requestID, hash: hash) {
      // A repeat of an id still remembered: its answer is replaced in place, nothing evicted.
      slots[slot].reply = kept
      return
    }
    if slots.count < capacity {
      if 2 * (slots.count + 1) > buckets.count { grow() }
      slots.append((requestID, hash, kept))
      insert(slot: slots.count - 1, hash: hash)
      return
    }
    removeBucket(of: next)  // the oldest id: never `requestID`, which was not here
    slots[next] = (requestID, hash, kept)
    insert(slot: next, hash: hash)
    next = (next + 1) % capacity
  }

  // MARK: - The table

  private var mask: Int { buckets.count - 1 }

  /// The slot holding `id`, if any.
  private func find(_ id: String, hash: Int) -> Int? {
    var bucket = hash & mask
    while true {
      let entry = Int(buckets[bucket])
      if entry == 0 { return nil }
      if slots[entry - 1].hash == hash, slots[entry - 1].id == id { return entry - 1 }
      bucket = (bucket + 1) & mask
    }
  }

  /// Puts `slot` in the first empty bucket of its hash's probe (its id is not in the table).
  private mutating func insert(slot: Int, hash: Int) {
    var bucket = hash & mask
    while buckets[bucket] != 0 { bucket = (bucket + 1) & mask }
    buckets[bucket] = Int32(slot + 1)
  }

  /// Takes `slot`'s bucket out and shifts the entries probed past it back, so that every probe
  /// still ends at the first empty bucket (no tombstones).
  private mutating func removeBucket(of slot: Int) {
    var hole = slots[slot].hash & mask
    while Int(buckets[hole]) != slot + 1 { hole = (hole + 1) & mask }
    buckets[hole] = 0
    var bucket = (hole + 1) & mask
    while buckets[bucket] != 0 {
      let home = slots[Int(buckets[bucket]) - 1].hash & mask
      // The entry may fill the hole unless its home lies cyclically in (hole, bucket].
      let distanceToBucket = (bucket - home) & mask
      let distanceToHole = (hole - home) & mask
      if distanceToHole < distanceToBucket {
        buckets[hole] = buckets[bucket]
        buckets[bucket] = 0
        hole = bucket
      }
      bucket = (bucket + 1) & mask
    }
  }

  /// Doubles the table (from 8 buckets), re-placing the slots by their kept hashes.
  private mutating func grow() {
    buckets = [Int32](repeating: 0, count: max(8, 2 * buckets.count))
    for slot in slots.indices { insert(slot: slot, hash: slots[slot].hash) }
  }
}
