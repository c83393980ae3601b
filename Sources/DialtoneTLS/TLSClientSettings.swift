/// How a TLS client checks the server and shows itself: the CA to trust (nil: the system's), an
/// optional client certificate and key (PEM files), and the name the server's certificate must
/// carry (nil: the host connected to; an IP address is matched against the certificate's IP
/// addresses).
public struct TLSClientSettings: Sendable, Equatable {
  public var caFile: String?
  public var certificateFile: String?
  public var keyFile: String?
  public var serverName: String?

  public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil, serverName: String? = nil)
  {
    self.caFile = caFile
    self.certificateFile = certificateFile
    self.keyFile = keyFile
    self.serverName = serverName
  }
}

/// Why a TLS connection failed; every message is safe to log (no key material, no data).
public enum TLSError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The TCP connection could not be made (or the name not resolved).
  case connectFailed(String)
  /// The handshake failed: the server's certificate is not trusted or not for this name, or the
  /// server refused this client's certificate.
  case handshakeFailed(String)
  /// A file of the settings could not be used.
  case badSettings(String)
  /// Nothing could be read or written within the I/O timeout.
  case timeout
  /// The peer closed the connection, or it failed.
  case closed(String)

  public var description: String {
    switch self {
    case .connectFailed(let why): "TLS: cannot connect: \(why)"
    case .handshakeFailed(let why): "TLS handshake failed: \(why)"
    case .badSettings(let why): "TLS settings: \(why)"
    case .timeout: "TLS: timed out"
    case .closed(let why): "TLS connection closed: \(why)"
    }
  }
}
