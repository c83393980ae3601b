import DialtoneTLS

#if canImport(Glibc)
  import Glibc
#endif

/// One TLS connection to an origin and its HTTP/2 session, on the engine thread: connect,
/// handshake, then streams in and frames out. Everything pending goes out in one buffer per
/// loop turn; what arrives is read in large chunks, each fed to nghttp2 once.
final class HTTP2Connection: NGHTTP2SessionDelegate {
  enum State { case resolving, connecting, handshaking, open, closed }

  let serial: UInt64
  let origin: HTTP2Origin
  private(set) var state: State = .resolving
  /// Until then it must be open, or it gives up.
  let connectDeadline: ContinuousClock.Instant
  /// Set by a GOAWAY: no new streams; the engine opens another connection.
  private(set) var goingAway = false
  /// Why it closed (for the requests that waited for it).
  private(set) var closeReason = ""
  private(set) var wasOpen = false
  private(set) var streams: [Int32: HTTP2Stream] = [:]
  /// Streams wait for the server's first SETTINGS: a server that allows fewer than nghttp2's
  /// assumed 100 (APNs may start low) would reset the excess.
  private var knowsLimits = false
  /// The health check (`HTTP2Client.Configuration.pingIntervalSeconds`): when the server last
  /// sent anything, and when the PING now awaiting its acknowledgement went out.
  private var lastReceived: ContinuousClock.Instant = .now
  private var pingSent: ContinuousClock.Instant?
  private let pingInterval: Duration
  private let pingTimeout: Duration

  private let context: TLSClientContext
  private let outcomes: HTTP2Outcomes
  private let maxBodyBytes: Int
  private var addresses: [SocketAddress] = []
  private var descriptor: Int32 = -1
  private var tls: TLSNonBlockingSession?
  private var session: NGHTTP2Session?
  /// What the handshake or the last write waits for.
  private var waitingFor: TLSNonBlockingSession.Wait?
  private var output: [UInt8] = []
  private var written = 0
  private var input = [UInt8](repeating: 0, count: 65_536)

  init(
    serial: UInt64, origin: HTTP2Origin, context: TLSClientContext, outcomes: HTTP2Outcomes, maxBodyBytes: Int,
    connectTimeout: Duration, pingInterval: Duration, pingTimeout: Duration
  ) {
    self.serial = serial
    self.origin = origin
    self.context = context
    self.outcomes = outcomes
    self.maxBodyBytes = maxBodyBytes
    self.pingInterval = pingInterval
    self.pingTimeout = pingTimeout
    connectDeadline = .now + connectTimeout
  }

  /// Streams it can take now (0 until open, and after a GOAWAY).
  var capacity: Int {
    guard state == .open, knowsLimits, !goingAway, let session else { return 0 }
    return max(0, session.remoteMaxConcurrentStreams - streams.count)
  }

  /// The `poll` events it waits for (nil: no socket).
  var pollEvents: Int16? {
    switch state {
    case .resolving, .closed: return nil
    case .connecting: return Int16(POLLOUT)
    case .handshaking: return waitingFor == .writable ? Int16(POLLOUT) : Int16(POLLIN)
    case .open:
      let writing = written < output.count || waitingFor == .writable
      return Int16(POLLIN) | (writing ? Int16(POLLOUT) : 0)
    }
  }

  var socket: Int32 { descriptor }

  /// A read stopped at its bound with bytes left inside OpenSSL: read again without waiting.
  private(set) var readAgain = false

  // MARK: - Connecting

  func resolved(_ result: Result<[SocketAddress], HTTP2Error>) {
    guard state == .resolving else { return }
    switch result {
    case .success(let found):
      addresses = found
      connectNext(after: "no address")
    case .failure(let error): close(error.description)
    }
  }

  private func connectNext(after lastError: String) {
    var why = lastError
    while !addresses.isEmpty {
      switch addresses.removeFirst().startConnect() {
      case .success(let socket):
        descriptor = socket
        state = .connecting
        return
      case .failure(let error): why = error.description
      }
    }
    close("cannot connect to \(origin): \(why)")
  }

  private func connected() {
    if let error = SocketAddress.pendingError(descriptor) {
      Glibc.close(descriptor)
      descriptor = -1
      return connectNext(after: error)
    }
    do {
      tls = try TLSNonBlockingSession(context: context, descriptor: descriptor, host: origin.host)
    } catch {
      return close(error.description)
    }
    state = .handshaking
    handshake()
  }

  private func handshake() {
    guard let tls else { return }
    do {
      waitingFor = try tls.handshake()
      guard waitingFor == nil else { return }
      session = try NGHTTP2Session(delegate: self)
    } catch {
      return close("\(origin): \(error)")
    }
    state = .open
    wasOpen = true
    lastReceived = .now
    // The server's SETTINGS may have come with the handshake's last read: poll would not say so.
    readAvailable()
  }

  // MARK: - Streams

  func submit(_ stream: HTTP2Stream) {
    guard let session else { return outcomes.refused.append(stream) }
    // A connection quiet for a while may be dead without knowing it: the PING finds out within
    // `pingTimeout`, long before the request's own timeout would.
    if pingSent == nil, lastReceived.duration(to: .now) >= pingTimeout { ping() }
    let request = stream.request
    var headers: [(name: String, value: String)] = [
      (":method", request.method), (":scheme", "https"), (":authority", origin.authority), (":path", request.path),
    ]
    headers.append(contentsOf: request.headers)
    if !request.body.isEmpty { headers.append(("content-length", String(request.body.count))) }
    do {
      let id = try session.submitRequest(headers: headers, body: request.body)
      streams[id] = stream
    } catch {
      outcomes.finished.append((stream, .failure(error)))
    }
  }

  /// Gives up on a stream (timed out): reset, and no answer expected any more.
  func cancel(_ id: Int32) {
    guard streams.removeValue(forKey: id) != nil else { return }
    session?.cancel(stream: id)
  }

  // MARK: - Health

  /// Sends a PING once the connection has been quiet for `pingInterval`, and closes it when a
  /// PING goes unanswered for `pingTimeout`.
  func checkHealth(now: ContinuousClock.Instant) {
    guard state == .open else { return }
    if let sent = pingSent {
      if sent.duration(to: now) >= pingTimeout { close("no answer to a PING within \(pingTimeout)") }
    } else if lastReceived.duration(to: now) >= pingInterval {
      ping()
    }
  }

  /// When `checkHealth` next has something to do (nil: not open).
  var healthDeadline: ContinuousClock.Instant? {
    guard state == .open else { return nil }
    return pingSent.map { $0 + pingTimeout } ?? lastReceived + pingInterval
  }

  private func ping() {
    guard let session else { return }
    do { try session.submitPing() } catch { return close(error.description) }
    pingSent = .now
  }

  // MARK: - I/O

  /// The socket is ready for `events` (poll's revents).
  func handle(_ events: Int16) {
    switch state {
    case .resolving, .closed: return
    case .connecting: connected()
    case .handshaking: handshake()
    case .open:
      if events & Int16(POLLIN | POLLERR | POLLHUP) != 0 { readAvailable() }
      if state == .open, events & Int16(POLLOUT) != 0 { flush() }
    }
  }

  /// Reads until the socket has nothing more (bounded per turn, so one busy connection cannot
  /// starve the rest), each chunk fed to nghttp2 once.
  private func readAvailable() {
    readAgain = false
    guard let tls, let session else { return }
    for _ in 0..<32 {
      do {
        switch try tls.read(into: &input) {
        case .moved(let count):
          lastReceived = .now
          try session.receive(input, count: count)
        case .wait(let wait):
          if wait == .writable { waitingFor = .writable }
          return
        }
      } catch {
        return close("\(error)")
      }
      guard state == .open else { return }
    }
    readAgain = tls.hasBufferedBytes
  }

  /// Serializes every pending frame and writes as much of it as the socket takes.
  func flush() {
    guard state == .open, let tls, let session else { return }
    if written == output.count {
      output.removeAll(keepingCapacity: true)
      written = 0
      do { try session.serialize(into: &output) } catch { return close(error.description) }
    }
    waitingFor = nil
    while written < output.count {
      do {
        switch try tls.write(output, from: written) {
        case .moved(let count): written += count
        case .wait(let wait):
          waitingFor = wait
          return
        }
      } catch {
        return close(error.description)
      }
    }
    if streams.isEmpty, !session.isAlive { close("the server ended the session") }
  }

  /// Closes the socket; streams in flight fail with `why`.
  func close(_ why: String) {
    guard state != .closed else { return }
    state = .closed
    closeReason = why
    session = nil
    tls?.free()
    tls = nil
    if descriptor >= 0 { Glibc.close(descriptor) }
    descriptor = -1
    let lost = streams.values
    streams.removeAll()
    for stream in lost {
      outcomes.finished.append((stream, .failure(HTTP2Error("HTTP/2 connection to \(origin) lost: \(why)"))))
    }
  }

  // MARK: - NGHTTP2SessionDelegate (inside `session.receive`)

  func responseHeader(stream id: Int32, name: String, value: String) {
    guard let stream = streams[id] else { return }
    if name == ":status" {
      stream.status = Int(value) ?? 0
    } else if stream.headers.count < 64 {  // APNs sends a handful; a bound for any other server
      stream.headers[name] = value
    }
  }

  func responseData(stream id: Int32, bytes: UnsafeRawBufferPointer) {
    guard let stream = streams[id], !stream.bodyTooLarge else { return }
    guard stream.body.count + bytes.count <= maxBodyBytes else {
      stream.bodyTooLarge = true
      session?.cancel(stream: id)
      return
    }
    stream.body.append(contentsOf: bytes)
  }

  func streamClosed(stream id: Int32, errorCode: UInt32) {
    guard let stream = streams.removeValue(forKey: id) else { return }
    if stream.bodyTooLarge {
      outcomes.finished.append(
        (stream, .failure(HTTP2Error("the response from \(origin) is larger than \(maxBodyBytes) bytes"))))
    } else if errorCode == 0, stream.status > 0 {
      outcomes.finished.append((stream, .success(stream.response)))
    } else if errorCode == NGHTTP2Session.refusedStream, stream.status == 0 {
      // Not processed (RFC 9113 §8.7): safe to send again on another connection.
      stream.resetAnswer()
      outcomes.refused.append(stream)
    } else {
      outcomes.finished.append(
        (stream, .failure(HTTP2Error("\(origin) reset the stream (HTTP/2 error code \(errorCode))"))))
    }
  }

  func settingsReceived() { knowsLimits = true }

  func pingAcknowledged() { pingSent = nil }

  func goAway(lastStreamID: Int32, errorCode: UInt32) {
    // nghttp2 closes the streams above lastStreamID as refused right after this.
    goingAway = true
  }
}
