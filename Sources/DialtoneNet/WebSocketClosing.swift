/// How a server WebSocket ends (RFC 6455 §7.1), without losing what was sent before the end.
///
/// - **This side closes** (a handler's close, 4429, 1001 on drain, a protocol failure): what is
///   queued leaves first, then the close frame. Once all of it has left, the socket half-closes
///   (on plain TCP; on TLS it just stops writing) and keeps reading, discarding everything but
///   the peer's close frame, until that frame, end-of-stream or `lingerSeconds`; only then is
///   the TCP connection closed. Closing at once while the peer's data sat unread would make the
///   kernel answer with a reset, and the peer would lose the close frame and every answer
///   before it (issue 35).
/// - **The peer closes first**: what is queued is dropped, the close is answered with the code
///   the peer sent (or none), and the connection closes once the answer has left.
///
/// Both waits are bounded: the close frame (and what is queued before it) has
/// `flushSeconds` to leave a peer that does not read, and the linger lasts `lingerSeconds`.
/// This value only decides; `ServerWebSocket` writes, half-closes and arms the timeouts.
struct WebSocketClosing: Equatable {
  static let flushSeconds: Int32 = 3
  static let lingerSeconds: Int32 = 2

  enum State: Equatable {
    case open
    /// This side closes: the frame leaves after what is queued.
    case closing(code: UInt16, reason: [UInt8])
    /// Our close frame is written; it may still sit in the transport's buffer.
    case closeWritten
    /// Our close has left and the socket is half-closed: waiting for the peer's close.
    case lingering
    /// The peer closed first (or while our close waited): this frame answers it.
    case answering(code: UInt16?, reason: [UInt8])
    /// The answer is written: the connection closes once it has left.
    case answerWritten
  }

  enum Step: Equatable {
    case nothing
    /// Write this close frame now.
    case writeClose(code: UInt16?, reason: [UInt8])
    /// Everything has left: half-close and linger (`lingerSeconds`).
    case halfClose
    /// Close the TCP connection now.
    case closeNow
  }

  private(set) var state = State.open

  var isOpen: Bool { state == .open }

  /// This side closes; false when the socket was already closing.
  mutating func close(code: UInt16, reason: [UInt8]) -> Bool {
    guard state == .open else { return false }
    state = .closing(code: code, reason: Array(reason.prefix(123)))
    return true
  }

  /// The peer's close frame arrived. True when what is queued must be dropped (it would follow
  /// the peer's close, which ends what it reads). The next `step` says what to do.
  mutating func peerClosed(code: UInt16?) -> Bool {
    switch state {
    case .open:
      state = .answering(code: code, reason: [])
      return true
    case .closing(let ours, let reason):
      // Our close, not yet written, answers theirs.
      state = .answering(code: ours, reason: reason)
      return true
    case .closeWritten, .lingering:
      // The closing handshake is complete: TCP closes once our frame has left.
      state = .answerWritten
      return false
    case .answering, .answerWritten:
      return false
    }
  }

  /// What to do now, given whether data is still queued ahead of a close frame and whether
  /// everything written has left (nothing held in the transport's buffer).
  mutating func step(queueEmpty: Bool, flushed: Bool) -> Step {
    switch state {
    case .open, .lingering:
      return .nothing
    case .closing(let code, let reason):
      guard queueEmpty, flushed else { return .nothing }
      state = .closeWritten
      return .writeClose(code: code, reason: reason)
    case .answering(let code, let reason):
      guard flushed else { return .nothing }
      state = .answerWritten
      return .writeClose(code: code, reason: reason)
    case .closeWritten:
      guard flushed else { return .nothing }
      state = .lingering
      return .halfClose
    case .answerWritten:
      return flushed ? .closeNow : .nothing
    }
  }

  /// While lingering, the peer's close or anything unreadable ends the wait.
  var isLingering: Bool { state == .lingering }
}
