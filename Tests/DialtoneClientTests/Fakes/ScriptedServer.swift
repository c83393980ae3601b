import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// A signaling server played by the test, as a `SignalingTransport`: it welcomes every
/// connection, records every message the client sends, answers each request with `ack`
/// (carrying the call id) unless `onRequest` answers it otherwise, and sends the server
/// messages the test pushes. For rules whose server side cannot run here (group calls need an
/// SFU).
final class ScriptedServer: SignalingTransport, Sendable {
  typealias Reply = @Sendable (_ message: ClientMessage, _ id: String) -> ServerMessage?

  let userId: String
  let deviceId: String
  private struct State {
    var socket: ScriptedSocket?
    var received: [ClientMessage] = []
    var reply: Reply?
    var seq: UInt64 = 0
    var connections = 0
    var welcomed = 0
    var silent = false
    var held: [(id: String, callId: CallID?)] = []
  }
  private let state = Locked(State())

  init(userId: String, deviceId: String) {
    self.userId = userId
    self.deviceId = deviceId
  }

  func open(url: String, bearerToken: String?) -> any SignalingSocket {
    let socket = ScriptedSocket(server: self)
    state.withLock {
      $0.socket = socket
      $0.connections += 1
    }
    return socket
  }

  /// Answers requests (nil from the handler: the default `ack`).
  func onRequest(_ reply: @escaping Reply) { state.withLock { $0.reply = reply } }

  /// From now on requests are recorded but never answered (a server behind a congested link).
  func stopAnswering() { state.withLock { $0.silent = true } }

  /// Answers (`ack`) every request held since `stopAnswering()`, and answers again from now on.
  func answerHeld() {
    let held = state.withLock { state in
      state.silent = false
      defer { state.held.removeAll() }
      return state.held
    }
    for request in held { push(.ack(.init(replyTo: request.id, callId: request.callId))) }
  }

  /// Every message the client sent but `hello` and `ack`, in order.
  var received: [ClientMessage] { state.withLock { $0.received } }
  var connections: Int { state.withLock { $0.connections } }
  /// How many connections were welcomed (a pushed message reaches only a welcomed one in order).
  var welcomed: Int { state.withLock { $0.welcomed } }

  func saw(_ type: ClientMessageType, _ callId: CallID? = nil) -> Bool {
    received.contains { $0.type == type && (callId == nil || $0.callId == callId) }
  }

  func count(_ type: ClientMessageType) -> Int { received.count { $0.type == type } }

  /// Sends a server message on the current connection, with the next sequence number. Numbered
  /// and delivered under one lock: the test and the client's own thread push concurrently, and a
  /// frame overtaken by a higher number would be dropped as a duplicate.
  func push(_ message: ServerMessage) {
    state.withLock {
      $0.seq += 1
      $0.socket?.deliver(MessageCodec.encodeString(message, seq: $0.seq))
    }
  }

  fileprivate func received(_ text: String, on socket: ScriptedSocket) {
    guard let envelope = try? MessageCodec.decodeClientMessage(text) else { return }
    switch envelope.message {
    case .hello:
      let welcome = ServerMessage.welcome(
        .init(
          replyTo: envelope.id ?? "", sessionId: "s-\(connections)", userId: userId, deviceId: deviceId,
          resumed: false, resync: false, iceServers: []))
      socket.deliver(MessageCodec.encodeString(welcome, seq: nil))
      state.withLock { $0.welcomed += 1 }
    case .ack:
      return
    default:
      let reply: Reply?? = state.withLock {
        $0.received.append(envelope.message)
        guard $0.silent else { return .some($0.reply) }
        if let id = envelope.id { $0.held.append((id, envelope.message.callId)) }
        return .none
      }
      guard let reply, let id = envelope.id else { return }
      push(
        reply?(envelope.message, id) ?? .ack(.init(replyTo: id, callId: envelope.message.callId)))
    }
  }
}

final class ScriptedSocket: SignalingSocket, Sendable {
  let events: AsyncStream<SignalingSocketEvent>
  private let sink: AsyncStream<SignalingSocketEvent>.Continuation
  private let server: ScriptedServer

  fileprivate init(server: ScriptedServer) {
    self.server = server
    (events, sink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    sink.yield(.opened)
  }

  func send(_ text: String) { server.received(text, on: self) }

  func close(code: Int) {
    sink.yield(.closed(code: code))
    sink.finish()
  }

  fileprivate func deliver(_ text: String) { sink.yield(.text(text)) }
}
