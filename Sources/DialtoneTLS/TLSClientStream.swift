import COpenSSL
import DialtoneSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A blocking TLS client connection (OpenSSL's libssl) for a thread that owns it: connect with a
/// timeout, the server's certificate checked against the CA and the host name, then reads and
/// writes that each give up after the I/O timeout. It hides every pointer; one thread at a time.
public final class TLSClientStream {
  private let context: OpaquePointer
  private let ssl: OpaquePointer
  /// The socket, for a caller that waits for it to become readable (`poll`).
  public let descriptor: Int32
  private var isClosed = false

  public init(host: String, port: Int, settings: TLSClientSettings, connectTimeout: Duration, ioTimeout: Duration)
    throws(TLSError)
  {
    guard let context = SSL_CTX_new(TLS_client_method()) else { throw .badSettings(TLSErrorText.last()) }
    _ = dt_ssl_ctx_min_tls12(context)
    do {
      try Self.configure(context, settings)
    } catch {
      SSL_CTX_free(context)
      throw error
    }
    let descriptor: Int32
    do {
      descriptor = try Self.connect(host: host, port: port, timeout: connectTimeout, ioTimeout: ioTimeout)
    } catch {
      SSL_CTX_free(context)
      throw error
    }
    guard let ssl = SSL_new(context) else {
      Glibc.close(descriptor)
      SSL_CTX_free(context)
      throw .badSettings(TLSErrorText.last())
    }
    self.context = context
    self.ssl = ssl
    self.descriptor = descriptor
    SSL_set_fd(ssl, descriptor)
    let name = settings.serverName ?? host
    if IPAddressLiteral.matches(name) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name)
    } else {
      _ = dt_ssl_set_sni(ssl, name)
      SSL_set1_host(ssl, name)
    }
    ERR_clear_error()
    guard SSL_connect(ssl) == 1 else {
      let verify = SSL_get_verify_result(ssl)
      let why =
        verify != X509_V_OK
        ? String(cString: X509_verify_cert_error_string(verify)) : TLSErrorText.last(or: "the server closed it")
      close()
      throw .handshakeFailed(why)
    }
  }

  deinit { close() }

  /// Writes all of `bytes`.
  public func write(_ bytes: [UInt8]) throws(TLSError) {
    guard !isClosed else { throw .closed("already closed") }
    var offset = 0
    while offset < bytes.count {
      ERR_clear_error()
      let written = bytes.withUnsafeBytes { raw in
        SSL_write(ssl, raw.baseAddress.map { $0 + offset }, Int32(clamping: bytes.count - offset))
      }
      guard written > 0 else { throw failure(written) }
      offset += Int(written)
    }
  }

  /// Reads what is available, at least one byte, waiting up to the I/O timeout; appends it to
  /// `buffer`. Throws `.closed` at the end of the stream.
  public func read(appendingTo buffer: inout [UInt8], maximum: Int = 16_384) throws(TLSError) {
    guard !isClosed else { throw .closed("already closed") }
    var chunk = [UInt8](repeating: 0, count: maximum)
    ERR_clear_error()
    let count = chunk.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32(clamping: maximum)) }
    guard count > 0 else { throw failure(count) }
    buffer.append(contentsOf: chunk[0..<Int(count)])
  }

  /// Whether decrypted bytes wait inside OpenSSL (a `poll` on the socket would not see them).
  public var hasBufferedBytes: Bool { !isClosed && SSL_pending(ssl) > 0 }

  /// Sends close_notify (best effort) and closes the socket; later calls fail.
  public func close() {
    guard !isClosed else { return }
    isClosed = true
    SSL_shutdown(ssl)
    SSL_free(ssl)
    SSL_CTX_free(context)
    Glibc.close(descriptor)
  }

  private func failure(_ result: Int32) -> TLSError {
    let code = errno
    switch SSL_get_error(ssl, result) {
    case SSL_ERROR_ZERO_RETURN: return .closed("the server closed the connection")
    case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .timeout
    case SSL_ERROR_SYSCALL where code == EAGAIN || code == EWOULDBLOCK: return .timeout
    case SSL_ERROR_SYSCALL:
      return .closed(code == 0 ? "the server closed the connection" : String(cString: strerror(code)))
    default: return .closed(TLSErrorText.last(or: "TLS error"))
    }
  }

  static func configure(_ context: OpaquePointer, _ settings: TLSClientSettings) throws(TLSError) {
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
    if let caFile = settings.caFile {
      guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
        throw .badSettings("cannot load the CA file \(caFile): \(TLSErrorText.last())")
      }
    } else {
      guard SSL_CTX_set_default_verify_paths(context) == 1 else {
        throw .badSettings("cannot load the system's CAs: \(TLSErrorText.last())")
      }
    }
    switch (settings.certificateFile, settings.keyFile) {
    case (nil, nil): break
    case (let certificate?, let key?):
      guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
        throw .badSettings("cannot load the client certificate \(certificate): \(TLSErrorText.last())")
      }
      guard SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1, SSL_CTX_check_private_key(context) == 1
      else { throw .badSettings("cannot load the client key \(key) (or it does not match the certificate)") }
    default: throw .badSettings("a client certificate needs both its certificate and its key file")
    }
  }

  /// A blocking socket connected within `timeout`, whose reads and writes time out after
  /// `ioTimeout`.
  private static func connect(host: String, port: Int, timeout: Duration, ioTimeout: Duration) throws(TLSError)
    -> Int32
  {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var found: UnsafeMutablePointer<addrinfo>?
    let status = getaddrinfo(host, String(port), &hints, &found)
    guard status == 0, let first = found else {
      throw .connectFailed("cannot resolve \(host): \(String(cString: gai_strerror(status)))")
    }
    defer { freeaddrinfo(found) }
    var lastError = "no address for \(host)"
    var candidate: UnsafeMutablePointer<addrinfo>? = first
    while let address = candidate {
      candidate = address.pointee.ai_next
      let descriptor = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
      guard descriptor >= 0 else { continue }
      if let error = connect(descriptor, address.pointee, timeout: timeout) {
        lastError = error
        Glibc.close(descriptor)
        continue
      }
      var interval = timeval(
        tv_sec: Int(ioTimeout.components.seconds), tv_usec: Int(ioTimeout.components.attoseconds / 1_000_000_000_000))
      setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
      setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
      var on: Int32 = 1
      setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
      return descriptor
    }
    throw .connectFailed("\(host):\(port): \(lastError)")
  }

  /// Connects without blocking for longer than `timeout`; nil on success, else why not.
  private static func connect(_ descriptor: Int32, _ address: addrinfo, timeout: Duration) -> String? {
    let flags = fcntl(descriptor, F_GETFL)
    _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
    defer { _ = fcntl(descriptor, F_SETFL, flags) }
    if Glibc.connect(descriptor, address.ai_addr, address.ai_addrlen) == 0 { return nil }
    guard errno == EINPROGRESS else { return String(cString: strerror(errno)) }
    var waiting = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
    let milliseconds = Int32(
      clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
    let ready = poll(&waiting, 1, milliseconds)
    guard ready > 0 else { return ready == 0 ? "no answer within \(timeout)" : String(cString: strerror(errno)) }
    var error: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
    return error == 0 ? nil : String(cString: strerror(error))
  }
}
