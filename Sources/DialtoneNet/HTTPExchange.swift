/// Service-thread state of one HTTP request/response on a connection.
final class HTTPExchange {
  let id: UInt64
  var request: HTTPRequest
  /// The body still to read before the request goes to the router (nil: none).
  var awaitingBody: Int?
  /// Handed to the router: at most once, since its answer is matched to the connection, and
  /// a second one would answer whatever request comes next on it.
  var dispatched = false
  private var response: HTTPResponse?
  /// The response's bytes not yet handed to the socket: the head, then the body.
  private var pending: [[UInt8]] = []
  private var offset = 0
  /// The connection closes after this response (an early refusal whose body was not read,
  /// `Connection: close`, HTTP/1.0, a draining server).
  var closeAfterResponse = false

  init(id: UInt64, request: HTTPRequest) {
    self.id = id
    self.request = request
  }

  var hasResponse: Bool { response != nil }

  func setResponse(_ response: HTTPResponse, draining: Bool) {
    guard self.response == nil else { return }
    self.response = response
    if draining { closeAfterResponse = true }
    let isHead = request.method == .HEAD
    let head = HTTPResponseHead.bytes(
      for: response, bodyLength: response.body.count, closing: closeAfterResponse)
    let body = isHead || response.hasNoContent ? [] : response.body
    // A small body shares the head's write.
    pending = body.count <= 16 * 1024 ? [head + body] : [head, body]
  }

  enum WriteResult { case more, done, failed }

  /// Hands the response to the socket in chunks, while lws takes them without holding bytes back.
  func write(to wsi: OpaquePointer, on loop: ServiceLoop, flushed: () -> Bool) -> WriteResult {
    guard response != nil else { return .more }
    let chunk = 64 * 1024
    while let current = pending.first, flushed() {
      let end = min(offset + chunk, current.count)
      let written = current.withUnsafeBytes { loop.writeRaw(wsi, UnsafeRawBufferPointer(rebasing: $0[offset..<end])) }
      guard written else { return .failed }
      offset = end
      if offset == current.count {
        pending.removeFirst()
        offset = 0
      }
    }
    return pending.isEmpty ? .done : .more
  }
}
