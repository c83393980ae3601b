import DialtoneTLS

/// An HTTP/2-over-TLS client of our own (nghttp2 for the framing, OpenSSL for TLS) for the APNs
/// provider API: one long-lived connection per origin, every request a stream on it, all driven
/// by one thread. It exists because libcurl's multi interface re-checks every transfer's socket
/// on every socket event, which made it most of a push's CPU (docs/benchmarks.md, issue 40).
public final class HTTP2Client: Sendable {
  public struct Configuration: Sendable {
    /// PEM bundle to trust instead of the system's (for test servers with self-signed certs).
    public var caFile: String?
    /// Requests waiting for a stream (beyond the servers' concurrency limits); more fail at once.
    public var maxQueuedRequests: Int
    /// A larger answer fails the request (APNs answers with at most a short JSON reason).
    public var maxResponseBodyBytes: Int
    /// For TCP and TLS together.
    public var connectTimeoutSeconds: Double
    /// A connection that has received nothing for this long is sent a PING, so that one which
    /// died silently (a NAT mapping dropped, a peer gone) is found before a push needs it, and
    /// middleboxes keep the idle one open.
    public var pingIntervalSeconds: Double
    /// A PING unanswered this long closes its connection: requests in flight on it fail at once
    /// (instead of at their own timeout) and the next one reconnects. A request sent on a
    /// connection that has been quiet this long goes with a PING of its own.
    public var pingTimeoutSeconds: Double

    public init(
      caFile: String? = nil, maxQueuedRequests: Int = 10_000, maxResponseBodyBytes: Int = 65_536,
      connectTimeoutSeconds: Double = 5, pingIntervalSeconds: Double = 60, pingTimeoutSeconds: Double = 5
    ) {
      self.caFile = caFile
      self.maxQueuedRequests = maxQueuedRequests
      self.maxResponseBodyBytes = maxResponseBodyBytes
      self.connectTimeoutSeconds = connectTimeoutSeconds
      self.pingIntervalSeconds = pingIntervalSeconds
      self.pingTimeoutSeconds = pingTimeoutSeconds
    }
  }

  private let engine: HTTP2Engine

  /// Fails if the CA file cannot be used.
  public init(configuration: Configuration = Configuration()) throws(HTTP2Error) {
    let context: TLSClientContext
    do {
      context = try TLSClientContext(settings: TLSClientSettings(caFile: configuration.caFile), alpn: "h2")
    } catch {
      throw HTTP2Error(error.description)
    }
    engine = try HTTP2Engine(configuration: configuration, context: context)
  }

  /// Sends one request; many may be in flight at once. Fails only on transport errors (no
  /// connection, TLS, protocol, timeout, a full queue): every HTTP status is a response.
  public func send(_ request: HTTP2Request) async throws(HTTP2Error) -> HTTP2Response {
    let result: Result<HTTP2Response, HTTP2Error> = await withCheckedContinuation { continuation in
      engine.submit(request) { continuation.resume(returning: $0) }
    }
    return try result.get()
  }

  /// Fails requests still queued or in flight and stops the thread.
  public func shutdown() { engine.stop() }
}
