import DialtoneCluster
import DialtoneProtocol
import DialtoneSupport
import Foundation

@testable import DialtoneServer
@testable import DialtoneSessions

/// A cluster's session store, in memory, as `SignalingHub` sees it: it numbers every message,
/// keeps it for a resume and hands back those of sessions the hub holds, one event at a time in
/// order on a queue of its own (like the real one's thread). A test can hold a frame back (its
/// letter lost), hold an open back, or make every step fail (Redis down).
final class InMemorySharedSessions: SessionStore {
  struct Session: Sendable {
    let userId: String
    let deviceId: String
    var last: UInt64 = 0
    var log: [UInt64: [UInt8]] = [:]
    var replies: [String: [UInt8]] = [:]
  }

  private struct State: Sendable {
    var sessions: [String: Session] = [:]
    /// user → device → session.
    var presence: [String: [String: String]] = [:]
    var withheld: Set<String> = []
    var failing = false
    var heldOpens: [SessionOpening] = []
    var holdOpens = false
    var fetches: [(String, UInt64)] = []
    var ended: [String] = []
    var acknowledged: [String: UInt64] = [:]
    var refusing = false
    var admitted: [String] = []
  }

  private let state = Locked(State())
  private let hub = Locked<SignalingHub?>(nil)
  private let queue = DispatchQueue(label: "in-memory-shared-sessions")

  func attach(_ hub: SignalingHub) { self.hub.withLock { $0 = hub } }

  private func send(_ event: ClusterEvent) {
    let hub = self.hub.current
    queue.async { hub?.receive(event) }
  }

  // MARK: What a test controls and reads

  /// The frame with this seq for the session is stored but its letter never arrives.
  func withhold(_ sessionID: String, seq: UInt64) { state.withLock { _ = $0.withheld.insert("\(sessionID)#\(seq)") } }
  func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }
  /// Whether `admit` refuses every request (too much waits for the store).
  func refuseRequests(_ refusing: Bool) { state.withLock { $0.refusing = refusing } }
  /// The request ids admitted, in order.
  var admitted: [String] { state.withLock { $0.admitted } }
  func holdOpens(_ hold: Bool) { state.withLock { $0.holdOpens = hold } }
  func releaseOpens() {
    let held = state.withLock { state -> [SessionOpening] in
      defer { state.heldOpens = [] }
      state.holdOpens = false
      return state.heldOpens
    }
    for opening in held { open(opening) }
  }
  var fetches: [(String, UInt64)] { state.withLock { $0.fetches } }
  var heldOpenCount: Int { state.withLock { $0.heldOpens.count } }
  var ended: [String] { state.withLock { $0.ended } }
  func acknowledged(_ sessionID: String) -> UInt64? { state.withLock { $0.acknowledged[sessionID] } }
  func session(of userId: String, _ deviceId: String) -> String? { state.withLock { $0.presence[userId]?[deviceId] } }

  // MARK: SessionStore

  func admit(_ requestID: String, of sessionID: String, bytes: Int) -> Bool {
    state.withLock { state in
      guard !state.refusing else { return false }
      state.admitted.append(requestID)
      return true
    }
  }

  func open(_ opening: SessionOpening) {
    let outcome: SessionOpened? = state.withLock { state in
      if state.holdOpens {
        state.heldOpens.append(opening)
        return nil
      }
      if state.failing { return .failed("the store is down") }
      let who = opening.identity
      if let resume = opening.resume, let session = state.sessions[resume.sessionId], session.userId == who.userId,
        session.deviceId == who.deviceId, resume.lastSeq <= session.last
      {
        state.presence[who.userId, default: [:]][who.deviceId] = resume.sessionId
        let pending = session.log.filter { $0.key > resume.lastSeq }.sorted { $0.key < $1.key }
          .map { StoredFrame(sessionID: resume.sessionId, seq: $0.key, bytes: $0.value) }
        var replies: [String: ServerMessage] = [:]
        for (id, bytes) in session.replies {
          replies[id] = try? MessageCodec.decodeServerMessage(bytes).message
        }
        return .resumed(sessionID: resume.sessionId, pending: pending, replies: replies)
      }
      state.sessions[opening.freshID] = Session(userId: who.userId, deviceId: who.deviceId)
      state.presence[who.userId, default: [:]][who.deviceId] = opening.freshID
      return .fresh(sessionID: opening.freshID, resync: opening.resume != nil)
    }
    if let outcome { send(.sessionOpened(opening, outcome)) }
  }

  func append(_ message: ServerMessage, to sessionID: String, answering requestID: String?, coalesced: Bool) {
    let (head, tail) = ServerFrame(message).splitAtSeq
    let event: ClusterEvent? = state.withLock { state in
      if state.failing { return .sessionsBroken([sessionID]) }
      guard var session = state.sessions[sessionID] else { return nil }
      session.last += 1
      let bytes = head + Array(String(session.last).utf8) + tail
      session.log[session.last] = bytes
      if let requestID { session.replies[requestID] = bytes }
      state.sessions[sessionID] = session
      if state.withheld.remove("\(sessionID)#\(session.last)") != nil { return nil }
      return .framesStored([StoredFrame(sessionID: sessionID, seq: session.last, bytes: bytes, coalesced: coalesced)])
    }
    if let event { send(event) }
  }

  func deliver(_ message: ServerMessage, to userId: String, device: String?, skipping: Set<String>) {
    let targets: [String]? = state.withLock { state in
      if state.failing { return nil }
      return (state.presence[userId] ?? [:]).filter {
        (device == nil || $0.key == device) && !skipping.contains($0.key)
      }
      .sorted { $0.key < $1.key }.map(\.value)
    }
    guard let targets else { return send(.deliveryFailed(userId: userId)) }
    for session in targets { append(message, to: session, answering: nil, coalesced: false) }
  }

  func acknowledge(_ sessionID: String, through seq: UInt64) {
    state.withLock { $0.acknowledged[sessionID] = seq }
  }

  func fetch(_ sessionID: String, after seq: UInt64) {
    let frames = state.withLock { state -> [StoredFrame] in
      state.fetches.append((sessionID, seq))
      let log = state.sessions[sessionID]?.log ?? [:]
      return log.filter { $0.key > seq }.sorted { $0.key < $1.key }
        .map { StoredFrame(sessionID: sessionID, seq: $0.key, bytes: $0.value) }
    }
    send(.framesStored(frames))
  }

  func flush() {}
  func refreshGauges() {}

  func end(_ sessionID: String) {
    state.withLock {
      $0.ended.append(sessionID)
      $0.sessions[sessionID] = nil
    }
  }
}
