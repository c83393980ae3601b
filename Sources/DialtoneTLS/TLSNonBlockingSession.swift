import COpenSSL
import DialtoneSupport

#if canImport(Glibc)
  import Glibc
#endif

/// TLS over a non-blocking socket that an event loop owns: every call returns at once, saying
/// whether it needs the socket readable or writable first. The server's certificate is checked
/// against the context's CAs and the host name (or IP address), and the context's ALPN protocol
/// must be the one selected. It does not own the socket (the caller closes it after `free`).
/// One thread at a time.
public final class TLSNonBlockingSession {
  /// What a call needs before it can go on.
  public enum Wait: Sendable, Equatable { case readable, writable }
  /// What a read or a write did: moved `count` bytes (> 0), or must wait.
  public enum Progress: Sendable, Equatable {
    case moved(Int)
    case wait(Wait)
  }

  private let ssl: OpaquePointer
  private let context: TLSClientContext
  private var freed = false

  public init(context: TLSClientContext, descriptor: Int32, host: String) throws(TLSError) {
    guard let ssl = SSL_new(context.context) else { throw .badSettings(TLSErrorText.last()) }
    self.ssl = ssl
    self.context = context
    SSL_set_fd(ssl, descriptor)
    if IPAddressLiteral.matches(host) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
    } else {
      _ = dt_ssl_set_sni(ssl, host)
      SSL_set1_host(ssl, host)
    }
    SSL_set_connect_state(ssl)
  }

  deinit { free() }

  /// Takes the handshake a step further: nil when it is done (certificate and ALPN checked),
  /// else what it waits for.
  public func handshake() throws(TLSError) -> Wait? {
    ERR_clear_error()
    let result = SSL_do_handshake(ssl)
    if result == 1 {
      if let required = context.requiredALPN {
        var selected: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &selected, &length)
        let name = selected.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(length)), as: UTF8.self) }
        guard name == required else {
          throw .handshakeFailed("the server did not select ALPN \(required) (it selected \(name ?? "none"))")
        }
      }
      return nil
    }
    switch SSL_get_error(ssl, result) {
    case SSL_ERROR_WANT_READ: return .readable
    case SSL_ERROR_WANT_WRITE: return .writable
    default:
      let verify = SSL_get_verify_result(ssl)
      throw .handshakeFailed(
        verify != X509_V_OK
          ? String(cString: X509_verify_cert_error_string(verify))
          : TLSErrorText.last(or: "the server closed the connection"))
    }
  }

  /// Reads up to `buffer.count` bytes into its start: the count read (> 0), or what it waits
  /// for. Throws `.closed` at the end of the stream or on an error.
  public func read(into buffer: inout [UInt8]) throws(TLSError) -> Progress {
    ERR_clear_error()
    let count = buffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32(clamping: $0.count)) }
    if count > 0 { return .moved(Int(count)) }
    return .wait(try wait(count))
  }

  /// Writes `bytes[offset...]`: the count written (> 0), or what it waits for. After a wait the
  /// same bytes must be offered again (OpenSSL's rule for a retried SSL_write).
  public func write(_ bytes: [UInt8], from offset: Int) throws(TLSError) -> Progress {
    ERR_clear_error()
    let count = bytes.withUnsafeBytes { raw in
      SSL_write(ssl, raw.baseAddress.map { $0 + offset }, Int32(clamping: raw.count - offset))
    }
    if count > 0 { return .moved(Int(count)) }
    return .wait(try wait(count))
  }

  /// Whether decrypted or read-ahead bytes wait inside OpenSSL (a `poll` would not see them).
  public var hasBufferedBytes: Bool { !freed && SSL_has_pending(ssl) == 1 }

  /// Frees the TLS state (no close_notify: the connection is being dropped or already gone).
  public func free() {
    guard !freed else { return }
    freed = true
    SSL_free(ssl)
  }

  private func wait(_ result: Int32) throws(TLSError) -> Wait {
    let code = errno
    switch SSL_get_error(ssl, result) {
    case SSL_ERROR_WANT_READ: return .readable
    case SSL_ERROR_WANT_WRITE: return .writable
    case SSL_ERROR_ZERO_RETURN: throw .closed("the server closed the connection")
    case SSL_ERROR_SYSCALL where code == EAGAIN || code == EWOULDBLOCK: return .readable
    case SSL_ERROR_SYSCALL:
      throw .closed(code == 0 ? "the server closed the connection" : String(cString: strerror(code)))
    default: throw .closed(TLSErrorText.last(or: "TLS error"))
    }
  }
}
