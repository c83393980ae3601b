import COpenSSL

/// An OpenSSL client context made once for many connections: the CA bundle loaded once (the
/// system's is a few hundred certificates) and the ALPN protocols this client offers.
public final class TLSClientContext: @unchecked Sendable {
  // @unchecked: the SSL_CTX is configured in init and only read after (SSL_new is thread-safe).
  let context: OpaquePointer
  /// The ALPN protocol the server must pick (nil: none offered).
  let requiredALPN: String?

  /// - Parameter alpn: the one protocol to offer (e.g. "h2"); the handshake fails when the
  ///   server does not select it.
  /// - Parameter nonBlocking: for `TLSNonBlockingSession`s: OpenSSL reads ahead (one `read`
  ///   takes every record waiting, instead of two per record) and writes may be partial.
  public init(settings: TLSClientSettings, alpn: String?, nonBlocking: Bool = true) throws(TLSError) {
    guard let context = SSL_CTX_new(TLS_client_method()) else { throw .badSettings(TLSErrorText.last()) }
    _ = dt_ssl_ctx_min_tls12(context)
    if nonBlocking {
      dt_ssl_ctx_read_ahead(context)
      dt_ssl_ctx_nonblocking_writes(context)
    }
    do {
      try TLSClientStream.configure(context, settings)
    } catch {
      SSL_CTX_free(context)
      throw error
    }
    if let alpn {
      // The wire format: each protocol name prefixed by its length.
      let wire = [UInt8(alpn.utf8.count)] + Array(alpn.utf8)
      // SSL_CTX_set_alpn_protos returns 0 on success (unlike the rest of OpenSSL).
      guard SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) == 0 else {
        SSL_CTX_free(context)
        throw .badSettings("cannot offer ALPN \(alpn)")
      }
    }
    self.context = context
    self.requiredALPN = alpn
  }

  deinit { SSL_CTX_free(context) }
}

/// OpenSSL's error queue as text (safe to log).
enum TLSErrorText {
  static func last(or fallback: String = "unknown OpenSSL error") -> String {
    let code = ERR_get_error()
    guard code != 0 else { return fallback }
    var buffer = [CChar](repeating: 0, count: 256)
    ERR_error_string_n(code, &buffer, buffer.count)
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}
