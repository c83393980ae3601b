import DialtoneClient
import DialtoneNet
import Foundation

/// The signaling transport on Linux, over `DialtoneNet`'s libwebsockets client.
public struct LWSSignalingTransport: SignalingTransport {
  private let client: WebSocketClient

  public init(client: WebSocketClient) { self.client = client }

  public func open(url: String, bearerToken: String?) -> any SignalingSocket {
    LWSSignalingSocket(client: client, url: url, bearerToken: bearerToken)
  }
}

final class LWSSignalingSocket: SignalingSocket {
  let events: AsyncStream<SignalingSocketEvent>
  private let connection: WebSocketClientConnection?

  init(client: WebSocketClient, url: String, bearerToken: String?) {
    let (stream, sink) = AsyncStream<SignalingSocketEvent>.makeStream()
    events = stream
    let headers = bearerToken.map { [HTTPHeaderField("Authorization", "Bearer \($0)")] } ?? []
    connection = try? client.connect(to: url, headers: headers) { event in
      switch event {
      case .opened: sink.yield(.opened)
      case .message(let bytes, _): sink.yield(.text(String(decoding: bytes, as: UTF8.self)))
      case .closed(let code):
        sink.yield(.closed(code: code.map(Int.init)))
        sink.finish()
      case .failed:
        sink.yield(.closed(code: nil))
        sink.finish()
      }
    }
    if connection == nil {
      sink.yield(.closed(code: nil))
      sink.finish()
    }
  }

  func send(_ text: String) { connection?.send(text: text) }
  func close(code: Int) { connection?.close(code: UInt16(clamping: code)) }
}
