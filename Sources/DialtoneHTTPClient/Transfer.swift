import CCurl
import Foundation

/// One request/response on the engine thread: its easy handle, headers list and buffers. The
/// easy handle comes from the engine's pool and goes back there when the transfer is done.
final class Transfer {
  let request: HTTPClientRequest
  private(set) var easy: UnsafeMutableRawPointer?
  private var headerList: UnsafeMutablePointer<curl_slist>?
  private var body: [UInt8] = []
  private var responseHeaders: [String: String] = [:]
  private var completion: (@Sendable (Result<HTTPClientResponse, HTTPClientError>) -> Void)?

  init(
    request: HTTPClientRequest, completion: @escaping @Sendable (Result<HTTPClientResponse, HTTPClientError>) -> Void
  ) {
    self.request = request
    self.completion = completion
  }

  deinit {
    curl_slist_free_all(headerList)
    if let easy { curl_easy_cleanup(easy) }
  }

  /// Hands the easy handle back (reset, for the next transfer); the transfer cannot be used after.
  func releaseHandle() -> UnsafeMutableRawPointer? {
    defer { easy = nil }
    guard let easy else { return nil }
    curl_easy_reset(easy)
    return easy
  }

  /// Sets the request's options on `easy`, which the transfer owns from now on.
  func configure(_ configuration: HTTPClient.Configuration, easy: UnsafeMutableRawPointer) -> Bool {
    self.easy = easy
    guard dt_curl_setopt_ptr(easy, CURLOPT_URL, request.url) == CURLE_OK else { return false }
    // Only HTTP(S): a configured URL (Janus, LiveKit, a push service) must never read a file.
    _ = dt_curl_setopt_ptr(easy, CURLOPT_PROTOCOLS_STR, "http,https")
    let version =
      configuration.http2
      ? (request.url.hasPrefix("https") ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1)
      : CURL_HTTP_VERSION_1_1
    _ = dt_curl_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(version))
    // Join the h2 connection rather than open another; HTTP/1.1 requests each need a connection.
    if configuration.http2 { _ = dt_curl_setopt_long(easy, CURLOPT_PIPEWAIT, 1) }
    _ = dt_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
    _ = dt_curl_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(request.timeoutSeconds * 1000))
    _ = dt_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, 5000)
    if let caFile = configuration.caFile { _ = dt_curl_setopt_ptr(easy, CURLOPT_CAINFO, caFile) }
    _ = dt_curl_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, request.method)
    if request.method != "GET" {
      _ = dt_curl_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count))
      _ = request.body.withUnsafeBytes {
        dt_curl_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
      }
    }
    for header in request.headers + [(name: "expect", value: "")] {
      headerList = curl_slist_append(headerList, "\(header.name): \(header.value)")
    }
    _ = dt_curl_setopt_ptr(easy, CURLOPT_HTTPHEADER, headerList)
    let me = Unmanaged.passUnretained(self).toOpaque()
    _ = dt_curl_setopt_ptr(easy, CURLOPT_PRIVATE, me)
    _ = dt_curl_setopt_cb(easy, CURLOPT_WRITEFUNCTION, transferBodyCallback)
    _ = dt_curl_setopt_ptr(easy, CURLOPT_WRITEDATA, me)
    _ = dt_curl_setopt_cb(easy, CURLOPT_HEADERFUNCTION, transferHeaderCallback)
    _ = dt_curl_setopt_ptr(easy, CURLOPT_HEADERDATA, me)
    return true
  }

  fileprivate func appendBody(_ bytes: UnsafeRawBufferPointer) { body.append(contentsOf: bytes) }

  fileprivate func appendHeader(_ line: String) {
    if line.hasPrefix("HTTP/") {
      responseHeaders.removeAll()
      return
    }  // a new response (after 100/redirect)
    guard let colon = line.firstIndex(of: ":") else { return }
    let name = line[..<colon].lowercased()
    let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
    responseHeaders[name] = value
  }

  func response() -> HTTPClientResponse {
    var status = 0
    var version = 0
    if let easy {
      _ = dt_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
      _ = dt_curl_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
    }
    return HTTPClientResponse(
      status: status, headers: responseHeaders, body: body,
      httpVersion: version == Int(CURL_HTTP_VERSION_2_0) ? 2 : 1)
  }

  func finish(_ result: Result<HTTPClientResponse, HTTPClientError>) {
    let completion = self.completion
    self.completion = nil
    completion?(result)
  }
}

private let transferBodyCallback: dt_curl_data_cb = { data, size, count, user in
  guard let user else { return 0 }
  let transfer = Unmanaged<Transfer>.fromOpaque(user).takeUnretainedValue()
  if let data { transfer.appendBody(UnsafeRawBufferPointer(start: data, count: size * count)) }
  return size * count
}

private let transferHeaderCallback: dt_curl_data_cb = { data, size, count, user in
  guard let user, let data else { return size * count }
  let transfer = Unmanaged<Transfer>.fromOpaque(user).takeUnretainedValue()
  let bytes = UnsafeRawBufferPointer(start: data, count: size * count)
  transfer.appendHeader(String(decoding: bytes, as: UTF8.self))
  return size * count
}
