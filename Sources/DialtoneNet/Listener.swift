import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The server's listening socket, owned here rather than by lws: lws 4.1 resolves a listen
/// interface through getifaddrs and closes one netlink descriptor twice, which can close another
/// thread's socket. Accepted sockets are handed to the network thread, which adopts them into lws.
///
/// At the descriptor limit (EMFILE/ENFILE) it sheds instead of spinning: the read source is
/// level-triggered, so a pending connection that cannot be accepted would fire it again at once.
/// It frees its reserve descriptor, accepts and closes what is pending (the client sees a close,
/// not a hang), takes the reserve back, and pauses accepting for `exhaustedPause`.
final class Listener: @unchecked Sendable {
  // @unchecked: `fd` is immutable; every other stored property is touched only on `queue`.
  let port: Int
  private let fd: Int32
  private let source: DispatchSourceRead
  private let queue = DispatchQueue(label: "dialtone.listener")
  private let accepted: @Sendable ([Int32]) -> Void
  private let log: NetLogger
  private let exhaustedPause: Double
  private var reserve = DescriptorReserve()
  private var suspended = false
  private var stopped = false
  /// Set from the first EMFILE/ENFILE until an accept succeeds again: one log line per episode.
  private var exhausted = false
  private var shedCount = 0

  /// At most this many accepts per event, so one wake-up cannot starve the queue.
  private static let batchLimit = 256

  init(
    host: String, port: Int, exhaustedPause: Double = 0.1, log: @escaping NetLogger = { _, _ in },
    accepted: @escaping @Sendable ([Int32]) -> Void
  ) throws(NetError) {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(clamping: port).bigEndian)
    let literal = host == "localhost" ? "127.0.0.1" : host
    guard literal.withCString({ inet_pton(AF_INET, $0, &address.sin_addr) }) == 1 else {
      throw .listenFailed("--host must be an IPv4 address (like 127.0.0.1 or 0.0.0.0), got \"\(host)\"")
    }
    let fd = socket(
      AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw .listenFailed("socket(): \(String(cString: strerror(errno)))") }
    var one: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, length) == 0 && listen(fd, 4096) == 0 && getsockname(fd, $0, &length) == 0
      }
    }
    guard ok else {
      let reason = String(cString: strerror(errno))
      close(fd)
      throw .listenFailed("cannot listen on \(host):\(port): \(reason)")
    }
    self.fd = fd
    self.port = Int(UInt16(bigEndian: address.sin_port))
    self.accepted = accepted
    self.log = log
    self.exhaustedPause = exhaustedPause
    source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
    source.setEventHandler { [weak self] in self?.acceptPending() }
    source.setCancelHandler { [weak self] in
      close(fd)
      self?.reserve.release()
    }
    source.resume()
  }

  deinit { reserve.release() }

  /// Stops accepting and closes the listening socket. A paused source must be resumed for its
  /// cancel handler (which closes the socket) to run.
  func stop() {
    queue.sync {
      guard !stopped else { return }
      stopped = true
      source.cancel()
      if suspended {
        suspended = false
        source.resume()
      }
    }
  }

  private func acceptPending() {
    var batch: [Int32] = []
    var atLimit = false
    for _ in 0..<Self.batchLimit {
      let client = accept(fd, nil, nil)
      if client < 0 {
        let error = errno
        if error == EMFILE || error == ENFILE {
          atLimit = true
          shed(error)
          break
        }
        // ECONNABORTED: that one is gone, the next may be fine. EAGAIN and the rest: drained.
        if error == ECONNABORTED || error == EINTR { continue }
        break
      }
      _ = fcntl(client, F_SETFD, FD_CLOEXEC)
      // lws sets TCP_NODELAY only on sockets its own listener accepts. Without it, Nagle holds
      // a relayed message back until the peer acks the previous small write (the ack of the
      // request): ~20 ms per message on loopback.
      var one: Int32 = 1
      _ = setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
      batch.append(client)
    }
    if !batch.isEmpty {
      // The episode ends with an event that accepted without reaching the limit again.
      if exhausted, !atLimit { recovered() }
      accepted(batch)
    }
  }

  /// Accepts with the reserve's slot and closes at once what is waiting, then pauses.
  private func shed(_ error: Int32) {
    if !exhausted {
      exhausted = true
      shedCount = 0
      log(
        .warning,
        "out of file descriptors (\(error == EMFILE ? "EMFILE" : "ENFILE"), limit \(Self.descriptorLimit)):"
          + " closing new connections at once until descriptors are free; existing connections are still served")
    }
    reserve.release()
    for _ in 0..<Self.batchLimit {
      let client = accept(fd, nil, nil)
      if client < 0 { break }
      close(client)
      shedCount += 1
    }
    reserve.reacquire()
    pause()
  }

  /// The source is level-triggered: while connections wait that cannot be accepted it would fire
  /// again at once, so it sleeps for `exhaustedPause` instead.
  private func pause() {
    guard !suspended, !stopped else { return }
    suspended = true
    source.suspend()
    queue.asyncAfter(deadline: .now() + exhaustedPause) { [weak self] in
      guard let self, self.suspended else { return }
      self.suspended = false
      self.source.resume()
    }
  }

  private func recovered() {
    exhausted = false
    log(.info, "file descriptors available again; \(shedCount) connection(s) were closed unserved meanwhile")
  }

  private static var descriptorLimit: String {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return "unknown" }
    return String(limit.rlim_cur)
  }
}
