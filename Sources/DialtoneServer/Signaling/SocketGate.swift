import DialtoneNet
import DialtoneProtocol
import DialtoneSessions
import DialtoneSupport
import Foundation

/// One socket as the hub sees it: the session it carries once its hello was answered, and what
/// limits it. A class, so that looking a socket up on every message costs a retain, not a copy.
final class SocketState {
  let connection: WebSocketConnection
  let headerToken: String?
  /// Set by the hello's welcome; cleared when a newer socket of the same device takes over.
  var session: (any DeliverySession)?
  /// In a cluster, between the hello and its welcome (`SessionStore.open`): what the client
  /// sends meanwhile waits in `early`, up to `SocketGate.maxEarlyMessages`.
  var opening = false
  var early: [(bytes: [UInt8], isText: Bool)] = []
  /// Set once its hello is accepted: the hello deadline no longer applies.
  var helloAccepted = false
  /// Every message this socket sends takes a token (`ServerLimits.messagesPerSecond`).
  var messages: TokenBucket
  /// Messages refused in a row: a socket that keeps sending through its refusals is closed.
  var refusedInARow = 0

  init(connection: WebSocketConnection, headerToken: String?, messages: TokenBucket) {
    self.connection = connection
    self.headerToken = headerToken
    self.messages = messages
  }
}

/// The hub's sockets and the limits a socket meets before any message of it is read: sockets
/// per address, the hello deadline, messages per second and messages before the welcome.
final class SocketGate {
  private(set) var sockets: [UInt64: SocketState] = [:]
  /// Open sockets by remote address (`ServerLimits.maxConnectionsPerAddress`).
  private var perAddress: [String: Int] = [:]
  private let limits: ServerLimits
  private let helloTimeout: Duration
  /// Every socket's hello deadline, in the order the sockets opened, which is deadline order
  /// (they all get the same timeout): one timer for the oldest instead of one per socket. A
  /// timer per socket (a dispatch source, a work item, a block) cost about 1 KB of heap while
  /// it ran, and the heap freed behind a burst of connects stayed in the RSS.
  private var helloDeadlines = FIFOQueue<(socketID: UInt64, deadline: Date)>()
  /// Whether the hub has a timer running for `helloDeadlines` (`.helloDeadlines`).
  private var helloTimerRunning = false
  /// Deadlines that fall this close together are enforced by one timer.
  static let helloDeadlineSlack = Duration.milliseconds(100)
  /// Messages a client may send between its hello and its welcome.
  static let maxEarlyMessages = 32

  init(limits: ServerLimits, helloTimeout: Duration) {
    self.limits = limits
    self.helloTimeout = helloTimeout
  }

  var count: Int { sockets.count }
  subscript(id: UInt64) -> SocketState? { table[id] }

  /// `sockets` for a look-up: the map is read out of the property (one access, no call inside
  /// it) and searched after. An access to the property spanning the dictionary's own calls made
  /// every access to it a runtime exclusivity check, the look-up of each message's socket
  /// included; changes go through `changeSockets` for the same reason.
  private var table: [UInt64: SocketState] { sockets }

  /// Changes `sockets` on the map moved out of the property and back (see `table`).
  @discardableResult
  private func changeSockets<Result>(_ change: (inout [UInt64: SocketState]) -> Result) -> Result {
    var map: [UInt64: SocketState] = [:]
    swap(&map, &sockets)
    defer { swap(&map, &sockets) }
    return change(&map)
  }

  /// A new socket: closed at once past the per-address limit (not tracked: its close finds no
  /// state), otherwise tracked with its hello deadline running. `armTimer` is called when no timer
  /// runs for the deadlines: the hub posts `.helloDeadlines` after the given delay.
  func open(
    _ connection: WebSocketConnection, _ request: UpgradeRequest, now: Date, armTimer: (Duration) -> Void
  ) -> Bool {
    let max = limits.maxConnectionsPerAddress
    if max > 0, perAddress[connection.remoteAddress, default: 0] >= max {
      connection.close(code: UInt16(CloseCode.overLimit.rawValue), reason: "more than \(max) sockets from this address")
      return false
    }
    perAddress[connection.remoteAddress, default: 0] += 1
    let state = SocketState(
      connection: connection, headerToken: request.bearerToken, messages: TokenBucket(limits.messageRate, now: now))
    changeSockets { $0[connection.id] = state }
    helloDeadlines.append((connection.id, now.addingTimeInterval(helloTimeout.seconds)))
    if !helloTimerRunning {
      helloTimerRunning = true
      armTimer(helloTimeout)
    }
    return true
  }

  /// The hello timer fired: the sockets whose deadline passed without an accepted hello, and the
  /// delay after which the timer must run again (nil: no deadline left).
  func helloDeadlinesPassed(now: Date) -> (expired: [SocketState], next: Duration?) {
    var expired: [SocketState] = []
    // A millisecond of slack: a timer set for a deadline may run a hair before it in Date terms.
    let horizon = now.addingTimeInterval(0.001)
    while let oldest = helloDeadlines.first, oldest.deadline <= horizon {
      helloDeadlines.popFirst()
      if let state = table[oldest.socketID], !state.helloAccepted, state.session == nil { expired.append(state) }
    }
    // An idle gate keeps no queue storage.
    if helloDeadlines.isEmpty { helloDeadlines = FIFOQueue() }
    guard let next = helloDeadlines.first else {
      helloTimerRunning = false
      return (expired, nil)
    }
    let wait = Duration.seconds(next.deadline.timeIntervalSince(now))
    return (expired, max(wait, Self.helloDeadlineSlack))
  }

  /// The socket closed: its state, if it was tracked.
  func close(_ connection: WebSocketConnection) -> SocketState? {
    guard let state = changeSockets({ $0.removeValue(forKey: connection.id) }) else { return nil }
    let address = connection.remoteAddress
    if let open = perAddress[address] { perAddress[address] = open > 1 ? open - 1 : nil }
    return state
  }

  var helloTimeoutSeconds: Int { Int(helloTimeout.seconds) }

  /// Whether the socket may send this message now. Over its rate the message is answered
  /// `rate-limited` (never silently dropped), and a socket that keeps sending through a whole
  /// burst of refusals is closed.
  func admit(_ bytes: [UInt8], isText: Bool, _ state: SocketState, now: Date) -> Bool {
    guard let wait = state.messages.take(now: now) else {
      state.refusedInARow = 0
      return true
    }
    let rate = limits.messageRate
    state.refusedInARow += 1
    if Double(state.refusedInARow) > rate.burst {
      state.connection.close(
        code: UInt16(CloseCode.overLimit.rawValue), reason: "kept sending over \(Int(rate.perSecond)) messages/s")
      return false
    }
    let error = ServerMessage.error(
      .init(
        replyTo: isText ? MessageCodec.requestID(of: bytes) : nil, code: .rateLimited,
        message: "more than \(Int(rate.perSecond)) messages per second", retryAfterMs: wait.milliseconds))
    if let session = state.session {
      session.deliver(error)
    } else {
      state.connection.send(text: MessageCodec.encode(error, seq: nil))
    }
    return false
  }

  /// A message sent before the welcome waits for it; past the bound the socket closes.
  func holdUntilWelcome(_ bytes: [UInt8], isText: Bool, _ state: SocketState) {
    guard state.early.count < Self.maxEarlyMessages else {
      state.connection.close(
        code: UInt16(CloseCode.overLimit.rawValue),
        reason: "more than \(Self.maxEarlyMessages) messages before the welcome")
      return
    }
    state.early.append((bytes, isText))
  }

  /// Closes every socket (the cluster lost its sessions, or the server stops).
  func closeAll(code: CloseCode, reason: String) {
    for state in table.values { state.connection.close(code: UInt16(code.rawValue), reason: reason) }
  }
}
