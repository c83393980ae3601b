import CLibWebSockets

/// Service-thread state of one HTTP request/response on a connection.
final class HTTPExchange {
  let id: UInt64
  let wsi: OpaquePointer
  var request: HTTPRequest
  var expectedLength: Int?
  var bodyTooLarge = false
  /// Handed to the router: at most once, since its answer is matched to the connection, and
  /// a second one would answer whatever request comes next on it.
  var dispatched = false
  private var response: HTTPResponse?
  private var headersSent = false
  private var bodyOffset = 0
  /// Set when the request body was not read (early error): the connection cannot be reused.
  var closeAfterResponse = false

  init(id: UInt64, wsi: OpaquePointer, request: HTTPRequest) {
    self.id = id
    self.wsi = wsi
    self.request = request
  }

  var hasResponse: Bool { response != nil }

  func setResponse(_ response: HTTPResponse) {
    guard self.response == nil else { return }
    self.response = response
    lws_callback_on_writable(wsi)
  }

  enum WriteResult { case more, done, failed }

  /// Writes headers, then the body in chunks, one lws write per writable callback.
  func writeNext(on loop: ServiceLoop) -> WriteResult {
    guard let response else { return .more }
    let isHead = request.method == .HEAD
    if !headersSent {
      headersSent = true
      guard writeHeaders(response, bodyLength: response.body.count) else { return .failed }
      if response.body.isEmpty || isHead || response.hasNoContent { return .done }
      lws_callback_on_writable(wsi)
      return .more
    }
    let chunk = 32 * 1024
    let end = min(bodyOffset + chunk, response.body.count)
    let final = end == response.body.count
    guard loop.write(wsi, response.body[bodyOffset..<end], final ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) else {
      return .failed
    }
    bodyOffset = end
    if final { return .done }
    lws_callback_on_writable(wsi)
    return .more
  }

  private func writeHeaders(_ response: HTTPResponse, bodyLength: Int) -> Bool {
    let capacity = 4096
    let preamble = Int(dt_lws_pre())
    var buffer = [UInt8](repeating: 0, count: preamble + capacity)
    return buffer.withUnsafeMutableBufferPointer { b -> Bool in
      guard let base = b.baseAddress else { return false }
      let start = base + preamble
      let end = start + capacity - 1
      var cursor: UnsafeMutablePointer<UInt8>? = start
      let failed: Bool
      if response.hasNoContent {
        // RFC 9110 §8.6 and §15.3.5: a 204 (or 304) carries no Content-Length and no body, so
        // no content type either; lws's common headers would add both.
        failed = lws_add_http_header_status(wsi, UInt32(response.status), &cursor, end) != 0
      } else {
        failed = response.contentType.withCString { type in
          lws_add_http_common_headers(wsi, UInt32(response.status), type, lws_filepos_t(bodyLength), &cursor, end)
            != 0
        }
      }
      if failed { return false }
      for field in response.headers + [HTTPHeaderField("cache-control", "no-store")] {
        guard field.append(to: wsi, cursor: &cursor, end: end) else { return false }
      }
      return lws_finalize_write_http_header(wsi, start, &cursor, end) == 0
    }
  }
}

extension HTTPHeaderField {
  /// Appends `name: value` to a header block lws is building (server responses, client upgrades).
  func append(to wsi: OpaquePointer, cursor: inout UnsafeMutablePointer<UInt8>?, end: UnsafeMutablePointer<UInt8>)
    -> Bool
  {
    let nameBytes = Array((name.lowercased() + ":").utf8) + [0]
    let valueBytes = Array(value.utf8)
    return nameBytes.withUnsafeBufferPointer { n in
      valueBytes.withUnsafeBufferPointer { v in
        lws_add_http_header_by_name(wsi, n.baseAddress, v.baseAddress, Int32(v.count), &cursor, end) == 0
      }
    }
  }
}
