/// Where requests go: one TLS connection (HTTP/2, ALPN "h2") per origin.
public struct HTTP2Origin: Hashable, Sendable, CustomStringConvertible {
  public let host: String
  public let port: Int

  public init(host: String, port: Int = 443) {
    self.host = host
    self.port = port
  }

  /// Parses `https://host[:port][/path]` into the origin and the path (without a trailing
  /// slash; "" for none). Only https: this client speaks HTTP/2 over TLS only.
  public static func parse(url: String) throws(HTTP2Error) -> (origin: HTTP2Origin, path: String) {
    let scheme = "https://"
    guard url.lowercased().hasPrefix(scheme) else { throw HTTP2Error("\(url): only https:// URLs are supported") }
    let rest = url.dropFirst(scheme.count)
    let authority = rest.prefix { $0 != "/" }
    var path = String(rest.dropFirst(authority.count))
    while path.hasSuffix("/") { path.removeLast() }
    var host = Substring(authority)
    var port = 443
    // "[v6]:port", "host:port" or "host".
    if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
      let after = host[host.index(after: close)...]
      if after.hasPrefix(":") {
        guard let number = Int(after.dropFirst()) else { throw HTTP2Error("\(url): bad port") }
        port = number
      } else if !after.isEmpty {
        throw HTTP2Error("\(url): bad authority")
      }
      host = host[host.index(after: host.startIndex)..<close]
    } else if let colon = host.lastIndex(of: ":") {
      guard let number = Int(host[host.index(after: colon)...]) else { throw HTTP2Error("\(url): bad port") }
      port = number
      host = host[..<colon]
    }
    guard !host.isEmpty, (1...65_535).contains(port) else { throw HTTP2Error("\(url): bad host or port") }
    return (HTTP2Origin(host: String(host), port: port), path)
  }

  /// The :authority pseudo-header.
  var authority: String {
    let name = host.contains(":") ? "[\(host)]" : host
    return port == 443 ? name : "\(name):\(port)"
  }

  public var description: String { "\(host):\(port)" }
}

public struct HTTP2Request: Sendable {
  public var origin: HTTP2Origin
  public var method: String
  /// Starts with "/".
  public var path: String
  public var headers: [(name: String, value: String)]
  public var body: [UInt8]
  public var timeoutSeconds: Double

  public init(
    origin: HTTP2Origin, method: String = "POST", path: String, headers: [(name: String, value: String)] = [],
    body: [UInt8] = [], timeoutSeconds: Double = 10
  ) {
    self.origin = origin
    self.method = method
    self.path = path
    self.headers = headers
    self.body = body
    self.timeoutSeconds = timeoutSeconds
  }
}

public struct HTTP2Response: Sendable {
  public var status: Int
  /// Lowercase names (HTTP/2 sends them so); the last value wins.
  public var headers: [String: String]
  public var body: [UInt8]
}

/// A transport failure (no connection, TLS, protocol, timeout, a full queue); every HTTP status
/// is a response instead. The text is safe to log.
public struct HTTP2Error: Error, Sendable, CustomStringConvertible {
  public let description: String
  public init(_ description: String) { self.description = description }
}
