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
/// ring of slots (oldest evicted first) and the dictionary maps an id to its slot: evicting an
/// entry then moves an Int inside the hash table, not a whole message.
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

  private var slot: [String: Int] = [:]
  private var slots: [(id: String, reply: Kept)] = []  // grows to capacity
  private var next = 0
  private let capacity: Int

  package init(capacity: Int) { self.capacity = max(1, capacity) }

  /// `mutating` though it changes nothing: the owner's call then reads the memory in place
  /// (an exclusive access), where a non-mutating call on a class's stored struct copies it,
  /// retaining and releasing its table and ring, on every request a session sends.
  package mutating func reply(to requestID: String) -> ServerMessage? {
    guard let position = slot[requestID] else { return nil }
    switch slots[position].reply {
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

  /// Its slot stays until the ring comes round to it (`remember` then leaves the id alone).
  package mutating func forget(_ requestID: String) { slot.removeValue(forKey: requestID) }

  package mutating func remember(_ reply: ServerMessage, for requestID: String) {
    let kept = Self.kept(reply, for: requestID)
    // The id is put in its slot with one look-up (every request of a session comes here; a
    // repeat of one still remembered is the rare case, undone).
    let position = slots.count < capacity ? slots.count : next
    if let existing = slot.updateValue(position, forKey: requestID) {
      slot[requestID] = existing
      slots[existing].reply = kept
      return
    }
    if slots.count < capacity {
      slots.append((requestID, kept))
      return
    }
    // The oldest id, unless its slot was forgotten (`forget`): then it may be `requestID` itself,
    // or an id remembered again since in another slot.
    let evicted = slots[next].id
    if evicted != requestID, slot[evicted] == next { slot.removeValue(forKey: evicted) }
    slots[next] = (requestID, kept)
    next = (next + 1) % capacity
  }
}
