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
  /// The answer to a relayed candidate, written without a seq, kept for no resume and not
  /// remembered: a candidate sent again is handled afresh (protocol.md 5.3), relayed again, which
  /// changes nothing in ICE. On one server (`LocalSession`) the session writes it so; in a cluster,
  /// where the session's store can (`SessionStore.answerUnstored`, write-behind, its copies'
  /// once-keys keeping them from being stored twice); where it cannot (store-first), it is an
  /// `answer`. Anything but a plain ack of the request is an `answer` too.
  func answerRelayed(_ reply: ServerMessage, to requestID: String, coalesced: Bool)
  /// A repeat of a request whose answer is remembered: answered again, numbered anew. False
  /// when the answer is not remembered.
  func answerAgain(_ requestID: String) -> Bool
  /// The client processed everything through `seq`.
  func acknowledge(upTo seq: UInt64)

  func attach(_ socket: any SessionSocket, now: Date)
  func detach(now: Date)

  /// The answer given to `requestID`, if it is still remembered.
  func reply(to requestID: String) -> ServerMessage?
  func remember(_ reply: ServerMessage, for requestID: String)
  /// The request was not handled after all (refused): the same id sent again is handled afresh.
  func forget(_ requestID: String)
}

extension DeliverySession {
  package var isConnected: Bool { socket != nil }

  package func answerRelayed(_ reply: ServerMessage, to requestID: String, coalesced: Bool) {
    answer(reply, to: requestID, coalesced: coalesced)
  }

  package func answerAgain(_ requestID: String) -> Bool {
    guard let earlier = reply(to: requestID) else { return false }
    deliver(earlier)
    return true
  }

  package func deliver(_ message: ServerMessage) { deliver(message, coalesced: false) }

  /// A message outside the sequence (the welcome, an error before the session exists).
  package func sendUnsequenced(_ message: ServerMessage) {
    socket?.send(text: MessageCodec.encode(message, seq: nil))
  }
}

/// Answers to a session's recent request ids, replayed when a request is repeated. They sit in a
/// ring of slots (oldest evicted first), each with its id's hash, and an open-addressed table
/// (linear probing) maps an id to its slot. Each request hashes its id once: `reply(to:)`'s miss
/// keeps the hash for the `remember` that follows, and evicting the oldest id finds its bucket by
/// the hash kept in its slot and the slot's index, comparing no text (a `[String: Int]` hashed
/// the id for the look-up, again to insert it and the evicted id a third time to remove it).
package struct ReplyMemory {
  /// An answer as kept. Nearly all are an ack of the very request id, with at most a call id:
  /// kept as that call id, a few bytes (a `ServerMessage`, whose `ack` case holds a whole
  /// `CallState`, is hundreds, copied into its slot and out of the one it replaces on every
  /// request). Any other answer is kept whole, boxed.
  private enum Kept {
    case ack(callId: CallID?)
    case other(OutOfLine<ServerMessage>)
  }

  private struct Slot {
    var id: String
    var hash: Int
    var reply: Kept
    /// False once `forget` took the id out of the table; the slot waits for the ring.
    var indexed = true
  }

  /// Bucket → the slot's index + 1 in the low 32 bits (0: empty), the high 32 bits of its id's
  /// hash above them; a power of two, at least twice the slots, grown with them (an idle session
  /// allocates none). With the hash's bits in the bucket, a probe passes other ids' buckets
  /// without reading their slots: each slot read was a cache miss on a busy node (the probe was
  /// ~2 % of the server's CPU under `bench-signaling`, when the bucket held the index alone).
  private var buckets: [UInt64] = []
  private var slots: [Slot] = []  // grows to capacity
  private var next = 0
  private let capacity: Int
  /// The id `reply(to:)` last missed and its hash: the request's `remember` usually follows.
  private var missed: (id: String, hash: Int)?

  package init(capacity: Int) { self.capacity = max(1, min(capacity, 1 << 28)) }

  /// A bucket's entry for slot `index` of an id hashing to `hash`.
  private static func entry(slot index: Int, hash: Int) -> UInt64 {
    UInt64(bitPattern: Int64(hash)) & 0xFFFF_FFFF_0000_0000 | UInt64(index + 1)
  }

  /// The slot an (occupied) entry points to.
  private static func slot(_ entry: UInt64) -> Int { Int(entry & 0xFFFF_FFFF) - 1 }

  /// The bucket holding `id` (hashing to `hash`), or nil.
  private func bucket(of id: String, hash: Int) -> Int? {
    guard !buckets.isEmpty else { return nil }
    let mask = buckets.count - 1
    let high = UInt64(bitPattern: Int64(hash)) & 0xFFFF_FFFF_0000_0000
    var b = hash & mask
    while true {
      let entry = buckets[b]
      if entry == 0 { return nil }
      if entry & 0xFFFF_FFFF_0000_0000 == high {
        let index = Self.slot(entry)
        if slots[index].hash == hash, slots[index].id == id { return b }
      }
      b = (b + 1) & mask
    }
  }

  private mutating func insert(slot index: Int, hash: Int) {
    let mask = buckets.count - 1
    var b = hash & mask
    while buckets[b] != 0 { b = (b + 1) & mask }
    buckets[b] = Self.entry(slot: index, hash: hash)
  }

  /// Empties the bucket of slot `index` and shifts the entries after it back (backward-shift
  /// deletion), so that probing needs no tombstones.
  private mutating func removeBucket(ofSlot index: Int) {
    let mask = buckets.count - 1
    var hole = slots[index].hash & mask
    while Self.slot(buckets[hole]) != index { hole = (hole + 1) & mask }
    var b = hole
    while true {
      b = (b + 1) & mask
      let entry = buckets[b]
      if entry == 0 { break }
      let home = slots[Self.slot(entry)].hash & mask
      // The entry may move into the hole unless its home lies cyclically in (hole, b].
      if (b - home) & mask >= (b - hole) & mask {
        buckets[hole] = buckets[b]
        hole = b
      }
    }
    buckets[hole] = 0
  }

  private mutating func grow(toHold count: Int) {
    var size = max(16, buckets.count)
    while size < 2 * count { size *= 2 }
    guard size != buckets.count else { return }
    buckets = [UInt64](repeating: 0, count: size)
    for index in slots.indices where slots[index].indexed { insert(slot: index, hash: slots[index].hash) }
  }

  private mutating func hash(of requestID: String) -> Int {
    if let missed, missed.id == requestID { return missed.hash }
    return requestID.hashValue
  }

  /// `mutating`: it keeps a miss's hash for the request's `remember`, and the owner's call reads
  /// the memory in place (an exclusive access), where a non-mutating call on a class's stored
  /// struct copies it, retaining and releasing its table and ring.
  package mutating func reply(to requestID: String) -> ServerMessage? {
    let hash = requestID.hashValue
    guard let b = bucket(of: requestID, hash: hash) else {
      missed = (requestID, hash)
      return nil
    }
    switch slots[Self.slot(buckets[b])].reply {
    case .ack(let callId): return .ack(.init(replyTo: requestID, callId: callId))
    case .other(let boxed): return boxed.value
    }
  }

  private static func kept(_ reply: ServerMessage, for requestID: String) -> Kept {
    if case .ack(let ack) = reply, ack.isPlain, ack.replyTo == requestID {
      return .ack(callId: ack.callId)
    }
    return .other(OutOfLine(reply))
  }

  /// Its slot stays until the ring comes round to it, out of the table (`remember` then leaves
  /// the table alone for it).
  package mutating func forget(_ requestID: String) {
    let hash = hash(of: requestID)
    guard let b = bucket(of: requestID, hash: hash) else { return }
    let index = Self.slot(buckets[b])
    removeBucket(ofSlot: index)
    slots[index].indexed = false
  }

  package mutating func remember(_ reply: ServerMessage, for requestID: String) {
    keep(Self.kept(reply, for: requestID), for: requestID)
  }

  private mutating func keep(_ kept: Kept, for requestID: String) {
    // After `reply(to:)` missed this id, the id is still not in the table: only a `remember`
    // adds to it (and every one clears `missed`), `forget` only takes out. So the probe, whose
    // steps each read a slot of the ring (a cache miss apiece on a busy node), is skipped then.
    let hash: Int
    let knownAbsent: Bool
    if let missed, missed.id == requestID {
      hash = missed.hash
      knownAbsent = true
    } else {
      hash = requestID.hashValue
      knownAbsent = false
    }
    missed = nil
    if !knownAbsent, let b = bucket(of: requestID, hash: hash) {
      slots[Self.slot(buckets[b])].reply = kept  // a repeat of one still remembered: the rare case
      return
    }
    if slots.count < capacity {
      grow(toHold: slots.count + 1)
      slots.append(Slot(id: requestID, hash: hash, reply: kept))
      insert(slot: slots.count - 1, hash: hash)
      return
    }
    // The oldest id, unless `forget` took it out of the table already: then the same text may
    // be `requestID` itself, or an id remembered again since in another slot.
    if slots[next].indexed { removeBucket(ofSlot: next) }
    slots[next] = Slot(id: requestID, hash: hash, reply: kept)
    insert(slot: next, hash: hash)
    next = (next + 1) % capacity
  }
}
