import DialtoneNet
import DialtoneProtocol
import DialtoneSupport
import Foundation

struct ProbeFailure: Error, CustomStringConvertible {
  let description: String
}

/// A scripted signaling client over a real socket: sends typed messages, and hands back what
/// the server sent, in order, decoded.
final class SignalingProbe: @unchecked Sendable {
  // @unchecked: `connection` is set once, in init (its handler captures self, so it cannot be a `let`).
  private struct Inbox: Sendable {
    var buffer: [Event] = []
    var waiter: CheckedContinuation<Event, Never>?
    var nextID = 0
    var sessionId: String?
    var seqSeen: UInt64 = 0
    /// Every frame received, as its bytes' text, in order (`takeRawFrames`).
    var raw: [String] = []
  }
  private let inbox = Locked(Inbox())
  private(set) var connection: WebSocketClientConnection!

  enum Event: Sendable {
    case opened
    case message(ServerEnvelope)
    case undecodable(String)
    case closed(UInt16?)
    case failed(String)
  }

  init(
    client: WebSocketClient, url: String, headers: [HTTPHeaderField] = [], allowSelfSignedCertificates: Bool = false
  ) throws {
    connection = try client.connect(
      to: url, headers: headers, allowSelfSignedCertificates: allowSelfSignedCertificates
    ) { [weak self] event in
      guard let self else { return }
      switch event {
      case .opened: self.push(.opened)
      case .message(let bytes, _):
        let text = String(decoding: bytes, as: UTF8.self)
        self.inbox.withLock { $0.raw.append(text) }
        if let envelope = try? MessageCodec.decodeServerMessage(bytes) {
          self.push(.message(envelope))
        } else {
          self.push(.undecodable(String(decoding: bytes, as: UTF8.self)))
        }
      case .closed(let code): self.push(.closed(code))
      case .failed(let reason): self.push(.failed(reason))
      }
    }
  }

  private func push(_ event: Event) {
    let resume: CheckedContinuation<Event, Never>? = inbox.withLock { inbox in
      if let waiter = inbox.waiter {
        inbox.waiter = nil
        return waiter
      }
      inbox.buffer.append(event)
      return nil
    }
    resume?.resume(returning: event)
  }

  /// The next event, or a failure after `timeout` (the waiter is released, never leaked).
  func nextEvent(_ what: String, timeout: Double = 10) async throws -> Event {
    let timer = Task { [weak self] in
      try await Task.sleep(for: .seconds(timeout))
      self?.push(.failed("timed out waiting for \(what)"))
    }
    defer { timer.cancel() }
    let event = await withCheckedContinuation { (continuation: CheckedContinuation<Event, Never>) in
      let ready: Event? = inbox.withLock { inbox in
        if !inbox.buffer.isEmpty { return inbox.buffer.removeFirst() }
        inbox.waiter = continuation
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
    if case .failed(let reason) = event, reason.hasPrefix("timed out") { throw ProbeFailure(description: reason) }
    return event
  }

  /// The next server message, skipping the open event.
  func next(_ what: String = "message") async throws -> ServerEnvelope {
    while true {
      switch try await nextEvent(what) {
      case .opened: continue
      case .message(let envelope):
        if let seq = envelope.seq { inbox.withLock { $0.seqSeen = max($0.seqSeen, seq) } }
        return envelope
      case .undecodable(let text): throw ProbeFailure(description: "undecodable server message: \(text)")
      case .closed(let code):
        throw ProbeFailure(
          description: "socket closed (\(code.map(String.init) ?? "no code")) while waiting for \(what)")
      case .failed(let reason): throw ProbeFailure(description: "connect failed (\(reason)) while waiting for \(what)")
      }
    }
  }

  /// Waits for the socket to close and returns the server's close code.
  func closeCode() async throws -> UInt16? {
    while true {
      switch try await nextEvent("close") {
      case .closed(let code): return code
      case .failed(let reason): throw ProbeFailure(description: "connect failed: \(reason)")
      default: continue
      }
    }
  }

  var lastSeq: UInt64 { inbox.withLock { $0.seqSeen } }
  /// The frames received so far, byte for byte (as text), forgotten once taken.
  func takeRawFrames() -> [String] {
    inbox.withLock { inbox in
      defer { inbox.raw = [] }
      return inbox.raw
    }
  }
  var sessionId: String? { inbox.withLock { $0.sessionId } }
  /// Whether something arrived that nobody has read yet.
  var hasUnread: Bool { inbox.withLock { !$0.buffer.isEmpty } }

  func newID() -> String {
    inbox.withLock {
      $0.nextID += 1
      return "r\($0.nextID)"
    }
  }

  func send(_ envelope: ClientEnvelope) { connection.send(text: MessageCodec.encode(envelope)) }
  func sendRaw(_ text: String) { connection.send(text: text) }

  @discardableResult
  func hello(token: String?, resume: ClientMessage.Resume? = nil, features: [String] = []) async throws
    -> ServerMessage.Welcome
  {
    send(ClientEnvelope(id: newID(), message: .hello(.init(token: token, resume: resume, features: features))))
    let envelope = try await next("welcome")
    guard case .welcome(let welcome) = envelope.message else {
      throw ProbeFailure(description: "expected welcome, got \(envelope.message)")
    }
    inbox.withLock { $0.sessionId = welcome.sessionId }
    return welcome
  }

  func ack() { send(ClientEnvelope(id: nil, message: .ack(.init(seq: lastSeq)))) }
  func close() { connection.close() }

  /// Sends a request and returns its answer (ack or error), skipping nothing: the answer must be next.
  @discardableResult
  func request(_ message: ClientMessage) async throws -> ServerMessage {
    let id = newID()
    send(ClientEnvelope(id: id, message: message))
    let envelope = try await next("answer to \(id)")
    guard envelope.message.replyTo == id else {
      throw ProbeFailure(description: "expected the answer to \(id), got \(envelope.message)")
    }
    return envelope.message
  }

  /// The next message, which must be of the given type.
  func expect(_ type: ServerMessageType, _ file: String = #fileID, _ line: Int = #line) async throws -> ServerMessage {
    let envelope = try await next(type.rawValue)
    guard envelope.message.knownType == type else {
      throw ProbeFailure(description: "\(file):\(line): expected \(type.rawValue), got \(envelope.message)")
    }
    return envelope.message
  }
}

extension ServerMessage {
  var errorCode: ErrorCode? {
    if case .error(let e) = self { return e.code }
    return nil
  }
  var isAck: Bool {
    if case .ack = self { return true }
    return false
  }
  var endReason: EndReason? {
    if case .callEnded(let e) = self { return e.reason }
    return nil
  }
}
