import CLibWebSockets

/// Reading the request line and headers out of lws's header table (valid only during the callbacks
/// that deliver a request).
extension ServerRole {
  private static let methodTokens: [(HTTPMethod, lws_token_indexes)] = [
    (.GET, WSI_TOKEN_GET_URI), (.POST, WSI_TOKEN_POST_URI), (.PUT, WSI_TOKEN_PUT_URI),
    (.PATCH, WSI_TOKEN_PATCH_URI), (.DELETE, WSI_TOKEN_DELETE_URI), (.OPTIONS, WSI_TOKEN_OPTIONS_URI),
    (.HEAD, WSI_TOKEN_HEAD_URI),
  ]

  private static let headerTokens: [(String, lws_token_indexes)] = [
    ("authorization", WSI_TOKEN_HTTP_AUTHORIZATION), ("content-type", WSI_TOKEN_HTTP_CONTENT_TYPE),
    ("content-length", WSI_TOKEN_HTTP_CONTENT_LENGTH), ("origin", WSI_TOKEN_ORIGIN),
    ("user-agent", WSI_TOKEN_HTTP_USER_AGENT), ("host", WSI_TOKEN_HOST),
    ("x-forwarded-for", WSI_TOKEN_X_FORWARDED_FOR), ("transfer-encoding", WSI_TOKEN_HTTP_TRANSFER_ENCODING),
    ("sec-websocket-protocol", WSI_TOKEN_PROTOCOL),
  ]

  func requestMethod(_ wsi: OpaquePointer) -> HTTPMethod? {
    Self.methodTokens.first { lws_hdr_total_length(wsi, $0.1) > 0 }?.0
  }

  func requestTarget(_ wsi: OpaquePointer) -> (path: String, query: [String: String]) {
    var path = ""
    for (_, token) in Self.methodTokens where lws_hdr_total_length(wsi, token) > 0 {
      path = header(wsi, token) ?? ""
      break
    }
    return (path, queryArguments(wsi))
  }

  func readHeaders(_ wsi: OpaquePointer) -> HTTPHeaders {
    var headers = HTTPHeaders()
    for (name, token) in Self.headerTokens {
      if let value = header(wsi, token) { headers[name] = value }
    }
    return headers
  }

  func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
    let length = Int(lws_hdr_total_length(wsi, token))
    guard length > 0 else { return nil }
    var buffer = [CChar](repeating: 0, count: length + 1)
    let bufferCount = Int32(buffer.count)
    let copied = buffer.withUnsafeMutableBufferPointer { b -> Int32 in
      guard let base = b.baseAddress else { return -1 }
      return lws_hdr_copy(wsi, base, bufferCount, token)
    }
    guard copied >= 0 else { return nil }
    return String(decoding: buffer.prefix(Int(copied)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// lws stores `?a=1&b=2` as separate, already-unescaped fragments of one token.
  private func queryArguments(_ wsi: OpaquePointer) -> [String: String] {
    var result: [String: String] = [:]
    var index: Int32 = 0
    while index < 64 {
      let length = Int(lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_URI_ARGS, index))
      guard length > 0 else { break }
      var buffer = [CChar](repeating: 0, count: length + 1)
      let bufferCount = Int32(buffer.count)
      let copied = buffer.withUnsafeMutableBufferPointer { b -> Int32 in
        guard let base = b.baseAddress else { return -1 }
        return lws_hdr_copy_fragment(wsi, base, bufferCount, WSI_TOKEN_HTTP_URI_ARGS, index)
      }
      if copied > 0 {
        let text = String(decoding: buffer.prefix(Int(copied)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if let eq = text.firstIndex(of: "=") {
          result[String(text[..<eq])] = String(text[text.index(after: eq)...])
        } else {
          result[text] = ""
        }
      }
      index += 1
    }
    return result
  }
}
