import CLibWebSockets

#if canImport(Glibc)
  import Glibc
#endif

/// Service-thread state of an accepted socket while it speaks HTTP/1.1: the bytes not yet read
/// as a request, the exchange being answered (requests are answered one at a time, in order),
/// and, once the connection is to end, the wait for the peer to finish.
final class HTTPConnection {
  let id: UInt64
  let wsi: OpaquePointer
  let isTLS: Bool
  var reader: HTTPRequestReader
  var exchange: HTTPExchange?
  /// Requests answered on this connection: a later one came after them (kept alive or pipelined).
  private(set) var answered = 0
  /// The last response has been handed over and the connection ends once it has left: then it
  /// half-closes and discards what still arrives until end-of-stream or the linger bound, so
  /// that unread request bytes (an unread body, say) do not turn the close into a reset that
  /// destroys the response.
  private(set) var ending = false
  private var halfClosed = false
  private var readingPaused = false

  /// How long the next request's head may take (RFC 9112 §9.5: a server may close idle connections).
  static let headSeconds: Int32 = 10
  /// How long a kept-alive connection may sit idle between requests.
  static let keepAliveSeconds: Int32 = 5
  /// How long a declared body may take to arrive.
  static let bodySeconds: Int32 = 20
  /// Pipelined bytes buffered while a request is being answered, beyond which reading pauses.
  static let pipelineLimit = 64 * 1024

  init(id: UInt64, wsi: OpaquePointer, isTLS: Bool, maxHeadBytes: Int) {
    self.id = id
    self.wsi = wsi
    self.isTLS = isTLS
    reader = HTTPRequestReader(maxHeadBytes: maxHeadBytes)
  }

  var flushed: Bool { lws_partial_buffered(wsi) == 0 }

  /// What the connection waits for, each with its bound: armed when the wait starts, not
  /// re-armed by every read (a head trickled in a byte at a time still has 10 s).
  enum Wait {
    case nothing, head, idle, body

    var timeout: (reason: pending_timeout, seconds: Int32)? {
      switch self {
      case .nothing: return nil
      case .head: return (PENDING_TIMEOUT_HTTP_CONTENT, HTTPConnection.headSeconds)
      case .idle: return (PENDING_TIMEOUT_HTTP_KEEPALIVE_IDLE, HTTPConnection.keepAliveSeconds)
      case .body: return (PENDING_TIMEOUT_HTTP_CONTENT, HTTPConnection.bodySeconds)
      }
    }
  }
  private var waiting = Wait.nothing

  func wait(for wait: Wait) {
    guard wait != waiting else { return }
    waiting = wait
    if let timeout = wait.timeout {
      lws_set_timeout(wsi, timeout.reason, timeout.seconds)
    } else {
      lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
    }
  }

  /// No timeout while the router works on a request.
  func disarm() { wait(for: .nothing) }

  private func arm(_ reason: pending_timeout, _ seconds: Int32) {
    waiting = .nothing
    lws_set_timeout(wsi, reason, seconds)
  }

  func answeredOne() {
    answered += 1
    exchange = nil
  }

  /// The connection ends after what was written: reads are discarded from now on.
  func end() {
    ending = true
    reader = HTTPRequestReader(maxHeadBytes: reader.maxHeadBytes)
    arm(PENDING_TIMEOUT_CLOSE_SEND, WebSocketClosing.flushSeconds)
  }

  /// Once everything has left: half-close and linger (see `ending`).
  func finishIfFlushed() {
    guard ending, !halfClosed, flushed else { return }
    halfClosed = true
    if !isTLS { shutdown(lws_get_socket_fd(wsi), Int32(SHUT_WR)) }
    arm(PENDING_TIMEOUT_CLOSE_ACK, WebSocketClosing.lingerSeconds)
    resumeReading()
  }

  /// While lws holds unsent bytes it reads nothing from a raw socket that stays readable (the
  /// loop would spin), and pipelined requests beyond `pipelineLimit` must wait: reading pauses.
  func pauseReading() {
    guard !readingPaused else { return }
    readingPaused = true
    lws_rx_flow_control(wsi, 0)
  }

  func resumeReading() {
    guard readingPaused else { return }
    readingPaused = false
    lws_rx_flow_control(wsi, 1)
  }
}
