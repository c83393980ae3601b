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
  /// The request was not handled after all (refused): the same id sent again is handled afresh.
  func forget(_ requestID: String)
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
/// ring of slots (oldest evicted first), each with its id's hash, and an open-addressed table
/// (linear probing) maps an id to its slot. Each request hashes its id once: `reply(to:)`'s miss
/// keeps the hash for the `remember` that follows, and evicting the oldest id finds its bucket by
/// the hash kept in its slot and the slot's index, comparing no text (a `[String: Int]` hashed
/// the id for the look-up, again to insert it and the evicted id a third time to remove it).
///
/// The table and the ring are raw allocations whose addresses and sizes sit in this value (so in
/// its session's object, which the request has just touched): a request reads no array header.
/// On a busy node every session's table is cold by its next request, and with `[UInt64]` and
/// `[Slot]` the two headers were a cache miss each (half of the look-up's and half of
/// `remember`'s samples under `bench-signaling`). Non-copyable, so the storage has one owner.
package struct ReplyMemory: ~Copyable {
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

  private struct Slot {
    var id: String
    var hash: Int
    var reply: Kept
    /// False once `forget` took the id out of the table; the slot waits for the ring.
    var indexed = true
  }

  /// Bucket → the slot's index + 1 in the low 32 bits (0: empty), the low 32 bits of its id's
  /// hash above them; a power of two (`mask + 1`), at least twice the slots' room, grown with
  /// it (an idle session allocates none). With the hash's bits in the bucket, a probe passes
  /// other ids' buckets without reading their slots, and a deletion's backward shift finds each
  /// entry's home bucket without reading its slot (each slot read was a cache miss on a busy
  /// node).
  private var buckets: UnsafeMutablePointer<UInt64>?
  private var mask = 0
  /// Slots `0 ..< count` are initialised; `room` are allocated (doubling up to `capacity`).
  private var slots: UnsafeMutablePointer<Slot>?
  private var count = 0
  private var room = 0
  private var next = 0
  private let capacity: Int
  /// The id `reply(to:)` last missed and its hash: the request's `remember` usually follows.
  private var missed: (id: String, hash: Int)?

  package init(capacity: Int) { self.capacity = max(1, min(capacity, 1 << 28)) }

  deinit {
    if let slots {
      slots.deinitialize(count: count)
      slots.deallocate()
    }
    buckets?.deallocate()
  }

  /// A bucket's entry for slot `index` of an id hashing to `hash`.
  private static func entry(slot index: Int, hash: Int) -> UInt64 {
    tag(hash) << 32 | UInt64(index + 1)
  }

  /// The hash's bits kept in a bucket: its low 32 (the table is at most 2^30 buckets, so an
  /// entry's home bucket is among them).
  private static func tag(_ hash: Int) -> UInt64 { UInt64(UInt32(truncatingIfNeeded: hash)) }

  /// The slot an (occupied) entry points to.
  private static func slot(_ entry: UInt64) -> Int { Int(entry & 0xFFFF_FFFF) - 1 }

  /// The bucket holding `id` (hashing to `hash`), or nil.
  private func bucket(of id: String, hash: Int) -> Int? {
    guard let buckets, let slots else { return nil }
    let tag = Self.tag(hash)
    var b = hash & mask
    while true {
      let entry = buckets[b]
      if entry == 0 { return nil }
      if entry >> 32 == tag {
        let index = Self.slot(entry)
        if slots[index].hash == hash, slots[index].id == id { return b }
      }
      b = (b + 1) & mask
    }
  }

  private func insert(slot index: Int, hash: Int) {
    guard let buckets else { return }
    var b = hash & mask
    while buckets[b] != 0 { b = (b + 1) & mask }
    buckets[b] = Self.entry(slot: index, hash: hash)
  }

  /// Empties the bucket of slot `index` (whose id hashes to `hash`) and shifts the entries after
  /// it back (backward-shift deletion), so that probing needs no tombstones.
  private func removeBucket(ofSlot index: Int, hash: Int) {
    guard let buckets else { return }
    var hole = hash & mask
    while Self.slot(buckets[hole]) != index { hole = (hole + 1) & mask }
    var b = hole
    while true {
      b = (b + 1) & mask
      let entry = buckets[b]
      if entry == 0 { break }
      let home = Int(truncatingIfNeeded: entry >> 32) & mask
      // The entry may move into the hole unless its home lies cyclically in (hole, b].
      if (b - home) & mask >= (b - hole) & mask {
        buckets[hole] = entry
        hole = b
      }
    }
    buckets[hole] = 0
  }

  /// Doubles the slots' room (up to `capacity`), moving the slots, and grows the table to at
  /// least twice the room, re-inserting the indexed slots.
  private mutating func makeRoom() {
    let newRoom = min(capacity, max(8, room * 2))
    let moved = UnsafeMutablePointer<Slot>.allocate(capacity: newRoom)
    if let slots {
      moved.moveInitialize(from: slots, count: count)
      slots.deallocate()
    }
    slots = moved
    room = newRoom
    var size = buckets == nil ? 16 : mask + 1
    while size < 2 * newRoom { size *= 2 }
    guard buckets == nil || size != mask + 1 else { return }
    buckets?.deallocate()
    let table = UnsafeMutablePointer<UInt64>.allocate(capacity: size)
    table.initialize(repeating: 0, count: size)
    buckets = table
    mask = size - 1
    for index in 0..<count where moved[index].indexed { insert(slot: index, hash: moved[index].hash) }
  }

  private mutating func hash(of requestID: String) -> Int {
    if let missed, missed.id == requestID { return missed.hash }
    return requestID.hashValue
  }

  /// `mutating`: it keeps a miss's hash for the request's `remember`.
  package mutating func reply(to requestID: String) -> ServerMessage? {
    let hash = requestID.hashValue
    guard let b = bucket(of: requestID, hash: hash), let buckets, let slots else {
      missed = (requestID, hash)
      return nil
    }
    switch slots[Self.slot(buckets[b])].reply {
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

  /// Its slot stays until the ring comes round to it, out of the table (`remember` then leaves
  /// the table alone for it).
  package mutating func forget(_ requestID: String) {
    let hash = hash(of: requestID)
    guard let b = bucket(of: requestID, hash: hash), let buckets, let slots else { return }
    let index = Self.slot(buckets[b])
    removeBucket(ofSlot: index, hash: hash)
    slots[index].indexed = false
  }

  package mutating func remember(_ reply: ServerMessage, for requestID: String) {
    let kept = Self.kept(reply, for: requestID)
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
    if !knownAbsent, let b = bucket(of: requestID, hash: hash), let buckets, let slots {
      slots[Self.slot(buckets[b])].reply = kept  // a repeat of one still remembered: the rare case
      return
    }
    if count < capacity {
      if count == room { makeRoom() }
      guard let slots else { return }
      (slots + count).initialize(to: Slot(id: requestID, hash: hash, reply: kept))
      insert(slot: count, hash: hash)
      count += 1
      return
    }
    guard let slots else { return }
    // The oldest id, unless `forget` took it out of the table already: then the same text may
    // be `requestID` itself, or an id remembered again since in another slot.
    if slots[next].indexed { removeBucket(ofSlot: next, hash: slots[next].hash) }
    slots[next] = Slot(id: requestID, hash: hash, reply: kept)
    insert(slot: next, hash: hash)
    next += 1
    if next == capacity { next = 0 }
  }
}
