/// The request line and header fields of one HTTP/1.1 request (RFC 9112 §3, §5), parsed
/// strictly: whatever two parsers could read differently (a proxy in front and this server) is
/// refused with 400 rather than guessed at.
package struct HTTPRequestHead: Equatable, Sendable {
  /// nil for a method token this server does not serve (answered 405).
  package var method: HTTPMethod?
  package var methodToken: String
  /// The target's path, percent-decoded, with `.`/`..` segments resolved and repeated slashes
  /// collapsed.
  package var path: String
  package var query: [String: String]
  /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and later 1.x).
  package var minorVersion: Int
  /// Every field in order, names lowercased.
  package var fields: [HTTPHeaderField]

  /// The field's value; repeated fields joined with ", " (RFC 9110 §5.3).
  func field(_ name: String) -> String? {
    var joined: String?
    for field in fields where field.name == name {
      joined = joined.map { $0 + ", " + field.value } ?? field.value
    }
    return joined
  }

  func count(of name: String) -> Int { fields.reduce(0) { $0 + ($1.name == name ? 1 : 0) } }

  /// Whether a comma-separated field (`Connection`, `Upgrade`) lists `token`, case-insensitively.
  func lists(_ name: String, _ token: String) -> Bool {
    guard let value = field(name) else { return false }
    return value.split(separator: ",").contains { $0.trimmingHTTPWhitespace.lowercased() == token }
  }

  /// The connection stays open after the answer: HTTP/1.1 unless it says `Connection: close`;
  /// HTTP/1.0 is answered once.
  var keepsAlive: Bool { minorVersion >= 1 && !lists("connection", "close") }

  /// The declared body length (nil: none declared), or the error to answer with (RFC 9112 §6):
  /// only a single `Content-Length` of decimal digits frames a body; no transfer coding is decoded.
  package func bodyLength() -> Result<Int?, HTTPError> {
    let lengths = count(of: "content-length")
    if count(of: "transfer-encoding") > 0 {
      if lengths > 0 { return .failure(.badRequest("both Content-Length and Transfer-Encoding")) }
      return .failure(
        HTTPError(
          status: 501, code: "not-implemented",
          message: "Transfer-Encoding is not supported on requests: send the body with Content-Length"))
    }
    guard lengths > 0 else { return .success(nil) }
    if lengths > 1 { return .failure(.badRequest("more than one Content-Length")) }
    guard let value = field("content-length"), let length = Self.decimalLength(value) else {
      return .failure(.badRequest("Content-Length must be a decimal number of bytes"))
    }
    return .success(length)
  }

  /// `1*DIGIT` with optional surrounding whitespace; no sign, no list, at most 18 digits.
  static func decimalLength(_ value: String) -> Int? {
    let digits = value.utf8.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }
    guard (1...18).contains(digits.count), digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
    return digits.reversed().reduce(0) { $0 * 10 + Int($1 - 0x30) }
  }

  /// The fields `HTTPRequest` and `UpgradeRequest` carry to handlers.
  static let forwardedFields = [
    "authorization", "content-type", "content-length", "origin", "user-agent", "host", "x-forwarded-for",
    "transfer-encoding", "sec-websocket-protocol",
  ]

  var forwardedHeaders: HTTPHeaders {
    var headers = HTTPHeaders()
    for name in Self.forwardedFields {
      if let value = field(name) { headers[name] = value }
    }
    return headers
  }

  // MARK: - Parsing

  /// Parses `lines`: the request line and field lines, each without its line ending.
  static func parse(_ lines: [ArraySlice<UInt8>]) -> Result<HTTPRequestHead, HTTPError> {
    guard let requestLine = lines.first else { return .failure(.badRequest("empty request")) }
    let parts = requestLine.split(separator: 0x20, omittingEmptySubsequences: false)
    guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else {
      return .failure(.badRequest("malformed request line"))
    }
    guard let minor = version(parts[2]) else {
      return .failure(.badRequest("malformed HTTP version"))
    }
    guard minor >= 0 else {
      return .failure(HTTPError(status: 505, code: "version-not-supported", message: "only HTTP/1.x is served"))
    }
    guard let target = HTTPRequestTarget(parts[1]) else {
      return .failure(.badRequest("malformed request target"))
    }
    var fields: [HTTPHeaderField] = []
    for line in lines.dropFirst() {
      switch field(line) {
      case .success(let field): fields.append(field)
      case .failure(let error): return .failure(error)
      }
    }
    let token = String(decoding: parts[0], as: UTF8.self)
    return .success(
      HTTPRequestHead(
        method: HTTPMethod(rawValue: token), methodToken: token, path: target.path, query: target.query,
        minorVersion: minor, fields: fields))
  }

  /// `HTTP/1.x`: x; -1 for another major version; nil when malformed.
  private static func version(_ text: ArraySlice<UInt8>) -> Int? {
    let bytes = Array(text)
    guard bytes.count == 8, bytes.starts(with: Array("HTTP/".utf8)), bytes[6] == 0x2E,
      (0x30...0x39).contains(bytes[5]), (0x30...0x39).contains(bytes[7])
    else { return nil }
    return bytes[5] == 0x31 ? Int(bytes[7] - 0x30) : -1
  }

  private static func field(_ line: ArraySlice<UInt8>) -> Result<HTTPHeaderField, HTTPError> {
    guard let first = line.first, first != 0x20, first != 0x09 else {
      return .failure(.badRequest("a header line starts with whitespace (obs-fold is not accepted)"))
    }
    guard let colon = line.firstIndex(of: 0x3A) else { return .failure(.badRequest("a header line has no colon")) }
    let name = line[line.startIndex..<colon]
    if let last = name.last, last == 0x20 || last == 0x09 {
      let trimmed = String(decoding: name, as: UTF8.self).trimmingHTTPWhitespace
      return .failure(.badRequest("whitespace between the header name \"\(trimmed.lowercased())\" and its colon"))
    }
    guard !name.isEmpty, name.allSatisfy(isTokenByte) else {
      return .failure(.badRequest("malformed header name"))
    }
    let value = line[(colon + 1)...]
    // Field values are visible characters, spaces and tabs (RFC 9110 §5.5): no NUL, no bare CR.
    guard value.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) else {
      return .failure(.badRequest("a control character in a header value"))
    }
    return .success(
      HTTPHeaderField(
        String(decoding: name, as: UTF8.self).lowercased(),
        String(decoding: value, as: UTF8.self).trimmingHTTPWhitespace))
  }

  /// tchar (RFC 9110 §5.6.2).
  static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
      UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
      UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
      return true
    default: return false
    }
  }
}

extension StringProtocol {
  /// Without leading and trailing spaces and tabs (OWS).
  var trimmingHTTPWhitespace: String {
    let scalars = unicodeScalars.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }
    return String(String.UnicodeScalarView(scalars.reversed()))
  }
}
