import Foundation

public struct HTTPClientRequest: Sendable {
  public var method: String
  public var url: String
  public var headers: [(name: String, value: String)]
  public var body: [UInt8]
  public var timeoutSeconds: Double

  public init(
    method: String = "POST", url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
    timeoutSeconds: Double = 10
  ) {
    self.method = method
    self.url = url
    self.headers = headers
    self.body = body
    self.timeoutSeconds = timeoutSeconds
  }
}

public struct HTTPClientResponse: Sendable {
  public var status: Int
  /// Lowercased names; the last value wins.
  public var headers: [String: String]
  public var body: [UInt8]
  /// 2 for HTTP/2, 1 for HTTP/1.x.
  public var httpVersion: Int
}

public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
  public let description: String
  public init(_ description: String) { self.description = description }
}

/// An HTTP client over libcurl's multi interface: one thread, requests multiplexed as HTTP/2
/// streams over at most `maxConnectionsPerHost` connections per host (APNs wants one long-lived
/// connection; a connect storm gets a provider throttled).
public final class HTTPClient: Sendable {
  public struct Configuration: Sendable {
    /// PEM bundle to trust instead of the system's (for test servers with self-signed certs).
    public var caFile: String?
    public var maxConnectionsPerHost: Int
    public var http2: Bool

    public init(caFile: String? = nil, maxConnectionsPerHost: Int = 1, http2: Bool = true) {
      self.caFile = caFile
      self.maxConnectionsPerHost = maxConnectionsPerHost
      self.http2 = http2
    }
  }

  private let engine: CurlEngine

  public init(configuration: Configuration = Configuration()) {
    engine = CurlEngine(configuration: configuration)
  }

  /// Sends one request; many may be in flight at once. Fails only on transport errors (no
  /// connection, TLS, timeout): every HTTP status is a response.
  public func send(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientResponse {
    let result: Result<HTTPClientResponse, HTTPClientError> = await withCheckedContinuation { continuation in
      engine.submit(request) { continuation.resume(returning: $0) }
    }
    return try result.get()
  }

  /// Fails requests still in flight and stops the thread.
  public func shutdown() { engine.stop() }
}
