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
/// The table and the ring are one raw allocation (the table first, the slots after it), and its
/// address and the table's mask, the slots filled and the ring's next slot sit in this value as
/// one pointer and three 32-bit fields: in the session's object, which the request has just
/// touched. A request reads no array header (with `[UInt64]` and `[Slot]` each header was a cache
/// miss on a busy node: half of the look-up's and half of `remember`'s samples under
/// `bench-signaling`), and the value is 8 bytes smaller than the two arrays and a ring index were
/// (every session holds one inline, idle or not: RSS per idle socket). Non-copyable, so the
/// storage has one owner, freed in `deinit`.
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

  /// The table, `mask + 1` buckets of `UInt64`, then the slots, `room` of them (`0 ..< filled`
  /// initialised); nil until the first `remember` (an idle session allocates nothing).
  ///
  /// Bucket → the slot's index + 1 in the low 32 bits (0: empty), the low 32 bits of its id's
  /// hash above them; a power of two, at least twice the slots' room, grown with it. With the
  /// hash's bits in the bucket, a probe passes other ids' buckets without reading their slots,
  /// and a deletion's backward shift finds each entry's home bucket without reading its slot
  /// (each slot read was a cache miss on a busy node).
  private var storage: UnsafeMutableRawPointer?
  private var mask: UInt32 = 0
  /// Slots initialised: they grow by doubling up to `capacity`, then the ring turns at `next`.
  private var filled: UInt32 = 0
  private var next: UInt32 = 0
  private let capacity: UInt32
  /// The id `reply(to:)` last missed and its hash: the request's `remember` usually follows.
  private var missed: (id: String, hash: Int)?

  /// At most 2^28 ids: the table (at most 2^30 buckets) then fits a bucket's 32 bits of slot
  /// index and its 32 bits of hash hold every entry's home bucket.
  package init(capacity: Int) { self.capacity = UInt32(max(1, min(capacity, 1 << 28))) }

  deinit {
    guard let storage else { return }
    slots(storage).deinitialize(count: Int(filled))
    storage.deallocate()
  }

  /// The bytes allocated (the table and the slots' room): 0 until the first `remember`.
  package var allocatedBytes: Int {
    storage == nil ? 0 : Self.tableBytes(mask: mask) + room * MemoryLayout<Slot>.stride
  }

  /// The slots allocated. Not stored: the table is the smallest power of two of at least 16
  /// buckets and twice the room, and the room is 8, 16, … up to `capacity`, so it is the table's
  /// half capped at `capacity`.
  private var room: Int { storage == nil ? 0 : min(Int(capacity), (Int(mask) + 1) / 2) }

  private static func tableBytes(mask: UInt32) -> Int { (Int(mask) + 1) * MemoryLayout<UInt64>.stride }

  private func buckets(_ storage: UnsafeMutableRawPointer) -> UnsafeMutablePointer<UInt64> {
    storage.assumingMemoryBound(to: UInt64.self)
  }

  private func slots(_ storage: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Slot> {
    (storage + Self.tableBytes(mask: mask)).assumingMemoryBound(to: Slot.self)
  }

  /// A bucket's entry for slot `index` of an id hashing to `hash`.
  private static func entry(slot index: Int, hash: Int) -> UInt64 {
    tag(hash) << 32 | UInt64(index + 1)
  }

  /// The hash's bits kept in a bucket: its low 32 (an entry's home bucket is among them).
  private static func tag(_ hash: Int) -> UInt64 { UInt64(UInt32(truncatingIfNeeded: hash)) }

  /// The slot an (occupied) entry points to.
  private static func slot(_ entry: UInt64) -> Int { Int(entry & 0xFFFF_FFFF) - 1 }

  /// The bucket holding `id` (hashing to `hash`), or nil.
  private func bucket(of id: String, hash: Int) -> Int? {
    guard let storage else { return nil }
    let buckets = buckets(storage)
    let slots = slots(storage)
    let mask = Int(mask)
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

  private func insert(slot index: Int, hash: Int, into buckets: UnsafeMutablePointer<UInt64>) {
    let mask = Int(mask)
    var b = hash & mask
    while buckets[b] != 0 { b = (b + 1) & mask }
    buckets[b] = Self.entry(slot: index, hash: hash)
  }

  /// Empties the bucket of slot `index` (whose id hashes to `hash`) and shifts the entries after
  /// it back (backward-shift deletion), so that probing needs no tombstones.
  private func removeBucket(ofSlot index: Int, hash: Int, in buckets: UnsafeMutablePointer<UInt64>) {
    let mask = Int(mask)
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

  /// Doubles the slots' room (8 at first, up to `capacity`) in a new allocation with a table of
  /// at least twice the room: the slots are moved, the indexed ones inserted into the new table.
  private mutating func makeRoom() {
    let newRoom = min(Int(capacity), max(8, room * 2))
    var size = 16
    while size < 2 * newRoom { size *= 2 }
    let newMask = UInt32(size - 1)
    let tableBytes = Self.tableBytes(mask: newMask)
    let grown = UnsafeMutableRawPointer.allocate(
      byteCount: tableBytes + newRoom * MemoryLayout<Slot>.stride,
      alignment: max(MemoryLayout<UInt64>.alignment, MemoryLayout<Slot>.alignment))
    let newBuckets = grown.initializeMemory(as: UInt64.self, repeating: 0, count: size)
    let newSlots = (grown + tableBytes).bindMemory(to: Slot.self, capacity: newRoom)
    let count = Int(filled)
    if let storage {
      newSlots.moveInitialize(from: slots(storage), count: count)
      storage.deallocate()
    }
    storage = grown
    mask = newMask
    for index in 0..<count where newSlots[index].indexed {
      insert(slot: index, hash: newSlots[index].hash, into: newBuckets)
    }
  }

  private mutating func hash(of requestID: String) -> Int {
    if let missed, missed.id == requestID { return missed.hash }
    return requestID.hashValue
  }

  /// `mutating`: it keeps a miss's hash for the request's `remember`.
  package mutating func reply(to requestID: String) -> ServerMessage? {
    let hash = requestID.hashValue
    guard let b = bucket(of: requestID, hash: hash), let storage else {
      missed = (requestID, hash)
      return nil
    }
    switch slots(storage)[Self.slot(buckets(storage)[b])].reply {
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
    guard let b = bucket(of: requestID, hash: hash), let storage else { return }
    let buckets = buckets(storage)
    let index = Self.slot(buckets[b])
    removeBucket(ofSlot: index, hash: hash, in: buckets)
    slots(storage)[index].indexed = false
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
    if !knownAbsent, let b = bucket(of: requestID, hash: hash), let storage {
      slots(storage)[Self.slot(buckets(storage)[b])].reply = kept  // a repeat of one still remembered: the rare case
      return
    }
    if filled < capacity {
      let index = Int(filled)
      if index == room { makeRoom() }
      guard let storage else { return }
      (slots(storage) + index).initialize(to: Slot(id: requestID, hash: hash, reply: kept))
      insert(slot: index, hash: hash, into: buckets(storage))
      filled += 1
      return
    }
    guard let storage else { return }
    let buckets = buckets(storage)
    let slots = slots(storage)
    let index = Int(next)
    // The oldest id, unless `forget` took it out of the table already: then the same text may
    // be `requestID` itself, or an id remembered again since in another slot.
    if slots[index].indexed { removeBucket(ofSlot: index, hash: slots[index].hash, in: buckets) }
    slots[index] = Slot(id: requestID, hash: hash, reply: kept)
    insert(slot: index, hash: hash, into: buckets)
    next = next + 1 == capacity ? 0 : next + 1
  }
}
