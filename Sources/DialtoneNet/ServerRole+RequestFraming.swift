import CLibWebSockets

/// How long a request's body is (RFC 9112 §6), checked strictly before anything reads it: where
/// two parsers could disagree on where a request ends (a proxy in front and lws), the bytes one
/// calls a body the other may run as a second request.
///
/// lws 4.1 frames the body itself from `atoll(Content-Length)` (a POST without one is read to the
/// end of the connection) and decodes no transfer coding on requests, so anything this does not
/// accept is answered here, before the body is read, and the connection is closed.
extension ServerRole {
  /// The declared body length (nil: none declared), or the error to answer with.
  func requestBodyLength(_ wsi: OpaquePointer) -> Result<Int?, HTTPError> {
    if let name = Self.framingHeaderWithSpaceBeforeColon(wsi) {
      return .failure(.badRequest("whitespace between the header name \"\(name)\" and its colon"))
    }
    let hasLength = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0
    if lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0 {
      if hasLength { return .failure(.badRequest("both Content-Length and Transfer-Encoding")) }
      return .failure(
        HTTPError(
          status: 501, code: "not-implemented",
          message: "Transfer-Encoding is not supported on requests: send the body with Content-Length"))
    }
    guard hasLength else { return .success(nil) }
    // A repeated header is kept as a second fragment of the same token.
    if lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, 1) > 0 {
      return .failure(.badRequest("more than one Content-Length"))
    }
    guard let value = header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH), let length = Self.decimalLength(value) else {
      return .failure(.badRequest("Content-Length must be a decimal number of bytes"))
    }
    return .success(length)
  }

  /// `1*DIGIT` with optional surrounding whitespace; no sign, no list, at most 18 digits (so it
  /// fits, and agrees with the atoll() lws frames the body by).
  static func decimalLength(_ value: String) -> Int? {
    let digits = value.utf8.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }
    guard (1...18).contains(digits.count), digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
    return digits.reversed().reduce(0) { $0 * 10 + Int($1 - 0x30) }
  }

  /// lws matches a known header by its name including the colon, so `Content-Length : 5` is not
  /// Content-Length to it but an unknown header named `content-length :`; a proxy in front may
  /// read it as the framing header (RFC 9112 §5.1 makes it a 400). lws 4.1 cannot list unknown
  /// headers, only look one up by exact (lowercased) name, so the framing headers are probed with
  /// up to four spaces or tabs before the colon.
  private static func framingHeaderWithSpaceBeforeColon(_ wsi: OpaquePointer) -> String? {
    for name in ["content-length", "transfer-encoding"] {
      for spelling in spacedSpellings(of: name) {
        let bytes = Array(spelling.utf8)
        let found = bytes.withUnsafeBufferPointer { buffer -> Bool in
          guard let base = buffer.baseAddress else { return false }
          return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
            lws_hdr_custom_length(wsi, $0, Int32(bytes.count)) >= 0
          }
        }
        if found { return name }
      }
    }
    return nil
  }

  private static let whitespaceRuns: [String] = {
    var runs = [""]
    var all: [String] = []
    for _ in 1...4 {
      runs = runs.flatMap { [$0 + " ", $0 + "\t"] }
      all += runs
    }
    return all
  }()

  private static func spacedSpellings(of name: String) -> [String] {
    whitespaceRuns.map { name + $0 + ":" }
  }
}
