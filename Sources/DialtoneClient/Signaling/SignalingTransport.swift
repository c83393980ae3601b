import Foundation

/// A WebSocket as the signaling client needs it. Apple platforms implement it with
/// URLSessionWebSocketTask; Linux with `DialtoneNet`'s libwebsockets client
/// (`DialtoneClientLinux`), because URLSession's WebSocket does not work there.
public protocol SignalingTransport: Sendable {
  /// Starts connecting; events arrive on the socket's stream, in order.
  func open(url: String, bearerToken: String?) -> any SignalingSocket
}

public protocol SignalingSocket: Sendable {
  var events: AsyncStream<SignalingSocketEvent> { get }
  func send(_ text: String)
  func close(code: Int)
}

public enum SignalingSocketEvent: Sendable, Equatable {
  case opened
  case text(String)
  /// The socket is gone: the server's close code if it sent one, nil for a drop or failed connect.
  case closed(code: Int?)
}
