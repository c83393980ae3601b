/// The bytes of a response head (RFC 9112 §4): status line, fields, blank line.
enum HTTPResponseHead {
  /// `closing` adds `Connection: close` (the connection ends after this response); a status that
  /// never has content (204, 304, 1xx) carries no length and no type (RFC 9110 §8.6, §15.3.5).
  static func bytes(for response: HTTPResponse, bodyLength: Int, closing: Bool) -> [UInt8] {
    var head = "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n"
    if !response.hasNoContent {
      head += "content-type: \(clean(response.contentType))\r\ncontent-length: \(bodyLength)\r\n"
    }
    for field in response.headers + [HTTPHeaderField("cache-control", "no-store")] {
      head += "\(clean(field.name).lowercased()): \(clean(field.value))\r\n"
    }
    if closing { head += "connection: close\r\n" }
    head += "\r\n"
    return Array(head.utf8)
  }

  /// What answers an `Expect: 100-continue` before the body is sent (RFC 9110 §10.1.1).
  static let continueBytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

  /// Without CR, LF and NUL: a field cannot end early or smuggle another.
  private static func clean(_ text: String) -> String {
    guard text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else { return text }
    return String(text.unicodeScalars.filter { $0 != "\r" && $0 != "\n" && $0 != "\0" })
  }

  static func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 100: return "Continue"
    case 101: return "Switching Protocols"
    case 200: return "OK"
    case 201: return "Created"
    case 202: return "Accepted"
    case 204: return "No Content"
    case 301: return "Moved Permanently"
    case 302: return "Found"
    case 304: return "Not Modified"
    case 400: return "Bad Request"
    case 401: return "Unauthorized"
    case 403: return "Forbidden"
    case 404: return "Not Found"
    case 405: return "Method Not Allowed"
    case 408: return "Request Timeout"
    case 409: return "Conflict"
    case 410: return "Gone"
    case 413: return "Content Too Large"
    case 415: return "Unsupported Media Type"
    case 422: return "Unprocessable Content"
    case 426: return "Upgrade Required"
    case 429: return "Too Many Requests"
    case 431: return "Request Header Fields Too Large"
    case 500: return "Internal Server Error"
    case 501: return "Not Implemented"
    case 502: return "Bad Gateway"
    case 503: return "Service Unavailable"
    case 504: return "Gateway Timeout"
    case 505: return "HTTP Version Not Supported"
    default: return "Status"
    }
  }
}
