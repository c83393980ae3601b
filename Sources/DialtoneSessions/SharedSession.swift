import DialtoneMetrics
import DialtoneProtocol
import Foundation

/// A session kept in a cluster's `SessionStore`: each message is handed to the store, which
/// numbers it; what comes back numbered (`stored`) is written to the socket in seq order, early
/// frames held until the gap before them is filled.
package final class SharedSession: DeliverySession {
  package let id: String
  package let identity: Identity
  package private(set) var socket: (any SessionSocket)?
  package private(set) var connectedAt: Date

  private let store: any SessionStore
  private var nextSeq: UInt64
  /// Frames stored ahead of the next one to write, by seq.
  private var early: [UInt64: (bytes: [UInt8], coalesced: Bool)] = [:]
  /// The highest seq the client acknowledged and the store was told of.
  private var acknowledged: UInt64
  private var replies: ReplyMemory
  private let sent: Counter?
  /// A check for a gap before `early` is scheduled.
  package var gapCheckPending = false
  /// Frames held for a gap before the session gives up on filling it (it is then broken).
  package static let maxEarly = 1024

  package init(
    id: String, identity: Identity, store: any SessionStore, now: Date, lastSeq: UInt64, replyMemory: Int = 512,
    sent: Counter? = nil
  ) {
    self.id = id
    self.identity = identity
    self.store = store
    connectedAt = now
    nextSeq = lastSeq + 1
    acknowledged = lastSeq
    replies = ReplyMemory(capacity: replyMemory)
    self.sent = sent
  }

  package var lastSentSeq: UInt64 { nextSeq - 1 }

  package func deliver(_ message: ServerMessage, coalesced: Bool) {
    sent?.increment()
    store.append(message, to: id, answering: nil, coalesced: coalesced)
  }

  /// The store encodes once for all of a user's sessions (`SessionStore.deliver`); a frame
  /// encoded here for one session is stored as its message.
  package func deliver(_ frame: ServerFrame) { deliver(frame.message, coalesced: false) }

  package func answer(_ reply: ServerMessage, to requestID: String, coalesced: Bool) {
    replies.remember(reply, for: requestID)
    sent?.increment()
    store.append(reply, to: id, answering: requestID, coalesced: coalesced)
  }

  package func answerRelayed(_ reply: ServerMessage, to requestID: String, coalesced: Bool) {
    guard store.answerUnstored(reply, to: id, answering: requestID) else {
      return answer(reply, to: requestID, coalesced: coalesced)
    }
    sent?.increment()
  }

  package func acknowledge(upTo seq: UInt64) {
    let bounded = min(seq, lastSentSeq)
    guard bounded > acknowledged else { return }
    acknowledged = bounded
    store.acknowledge(id, through: bounded)
  }

  /// A frame the store numbered for this session: written in seq order. Whether a gap now holds
  /// frames back (the hub checks on it later).
  package func stored(_ frame: StoredFrame) -> Bool {
    guard frame.seq >= nextSeq else { return false }  // written already, or replayed by a resume
    // Without a socket the store keeps it for the resume.
    guard let socket else { return false }
    guard frame.seq == nextSeq else {
      if early.count < Self.maxEarly { early[frame.seq] = (frame.bytes, frame.coalesced) }
      return true
    }
    write(frame.bytes, coalesced: frame.coalesced, on: socket)
    nextSeq += 1
    while let next = early.removeValue(forKey: nextSeq) {
      write(next.bytes, coalesced: next.coalesced, on: socket)
      nextSeq += 1
    }
    return !early.isEmpty
  }

  private func write(_ bytes: [UInt8], coalesced: Bool, on socket: any SessionSocket) {
    if coalesced { socket.sendCoalesced(text: bytes) } else { socket.send(text: bytes) }
  }

  /// Whether frames still wait for an earlier one (the store is asked for what came after
  /// `lastSentSeq`), or so many wait that the session cannot catch up (`overflowing`).
  package var hasGap: Bool { !early.isEmpty }
  package var overflowing: Bool { early.count >= Self.maxEarly }

  package func attach(_ socket: any SessionSocket, now: Date) {
    self.socket = socket
    connectedAt = now
  }

  package func detach(now: Date) {
    socket = nil
    early.removeAll()
  }

  package func reply(to requestID: String) -> ServerMessage? { replies.reply(to: requestID) }
  package func remember(_ reply: ServerMessage, for requestID: String) { replies.remember(reply, for: requestID) }
  package func forget(_ requestID: String) { replies.forget(requestID) }
}
