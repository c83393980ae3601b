import CCurl
import DialtoneSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Owns the curl multi handle and the only thread that touches it. Other threads queue
/// transfers and wake it through a pipe.
///
/// The thread drives curl through its socket interface (`curl_multi_socket_action`): it polls
/// the few sockets curl asks it to watch (one per connection) and tells curl which one is ready.
/// `curl_multi_perform` would instead look at every transfer's socket on every pass, with a
/// `poll` call each: with 200 pushes in flight on one HTTP/2 connection, that was most of the
/// CPU a push cost (docs/benchmarks.md, "bench-push", issue 40).
final class CurlEngine: @unchecked Sendable {
  // @unchecked: `multi`, `watched`, `deadline` and `transfers` are confined to the engine thread;
  // `inbox` is locked; the pipe's descriptors never change.
  /// Transfers queued by other threads, and whether the engine stopped.
  private let inbox = Locked<(pending: [Transfer], stopped: Bool)>(([], false))
  private let multi: UnsafeMutableRawPointer
  /// Wakes the engine from its `poll`.
  private let wake: WakePipe
  /// The sockets curl wants watched, with `poll` events.
  private var watched: [curl_socket_t: Int16] = [:]
  /// When curl wants to be called for its timeouts (nil: no timer).
  private var deadline: ContinuousClock.Instant?
  private var transfers: [ObjectIdentifier: Transfer] = [:]
  /// Easy handles of finished transfers, reset, for the next ones (creating and destroying one
  /// per request was a tenth of a push's CPU).
  private var spareHandles: [UnsafeMutableRawPointer] = []
  private static let maxSpareHandles = 256
  private let configuration: HTTPClient.Configuration

  private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

  init(configuration: HTTPClient.Configuration) {
    _ = Self.globalInit
    self.configuration = configuration
    guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
    self.multi = multi
    guard let wake = WakePipe() else { fatalError("pipe failed: \(errno)") }
    self.wake = wake
    _ = dt_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
    _ = dt_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
    _ = dt_curl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 1000)
    // The engine outlives the multi handle (its thread holds it until `curl_multi_cleanup`).
    let me = Unmanaged.passUnretained(self).toOpaque()
    _ = dt_curl_multi_setopt_socket_cb(multi, curlSocketCallback)
    _ = dt_curl_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
    _ = dt_curl_multi_setopt_timer_cb(multi, curlTimerCallback)
    _ = dt_curl_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
    _ = WorkerThread(name: "dialtone-http-client") { [self] in run() }
  }

  func submit(
    _ request: HTTPClientRequest, completion: @escaping @Sendable (Result<HTTPClientResponse, HTTPClientError>) -> Void
  ) {
    let transfer = Transfer(request: request, completion: completion)
    let accepted = inbox.withLock { inbox -> Bool? in
      guard !inbox.stopped else { return nil }
      inbox.pending.append(transfer)
      return inbox.pending.count == 1
    }
    guard let first = accepted else {
      return completion(.failure(HTTPClientError("the HTTP client is shut down")))
    }
    // The engine takes the whole inbox once awake: only the first transfer of a batch wakes it.
    if first { wake.wake() }
  }

  func stop() {
    inbox.withLock { $0.stopped = true }
    wake.wake()
  }

  // MARK: - The engine thread

  private func run() {
    var fds: [pollfd] = []
    while true {
      wake.drain()
      let (batch, stopping) = inbox.withLock { inbox -> ([Transfer], Bool) in
        defer { inbox.pending.removeAll() }
        return (inbox.pending, inbox.stopped)
      }
      if stopping {
        finishAll(batch)
        return
      }
      for transfer in batch {
        guard let easy = spareHandles.popLast() ?? curl_easy_init() else {
          transfer.finish(.failure(HTTPClientError("curl_easy_init failed: out of memory")))
          continue
        }
        guard transfer.configure(configuration, easy: easy) else {
          transfer.finish(.failure(HTTPClientError("invalid request for \(transfer.request.url)")))
          continue
        }
        transfers[ObjectIdentifier(transfer)] = transfer
        curl_multi_add_handle(multi, easy)  // sets a timer of 0: handled below
      }
      runTimerIfDue()
      // A transfer can finish inside that call: curl sends a request on a kept-alive connection
      // and reads an answer that is already there, or fails at once. Nothing would wake `poll`
      // for it (curl no longer watches its socket and sets no timer), so it is collected now.
      collectFinished()
      fds.removeAll(keepingCapacity: true)
      fds.append(pollfd(fd: wake.descriptor, events: Int16(POLLIN), revents: 0))
      for (socket, events) in watched { fds.append(pollfd(fd: socket, events: events, revents: 0)) }
      let ready = poll(&fds, nfds_t(fds.count), pollTimeoutMilliseconds())
      if ready > 0 {
        for index in 1..<fds.count where fds[index].revents != 0 {
          let revents = fds[index].revents
          var action: Int32 = 0
          if revents & Int16(POLLIN) != 0 { action |= CURL_CSELECT_IN }
          if revents & Int16(POLLOUT) != 0 { action |= CURL_CSELECT_OUT }
          if revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { action |= CURL_CSELECT_ERR }
          var running: Int32 = 0
          curl_multi_socket_action(multi, fds[index].fd, action, &running)
        }
      }
      runTimerIfDue()
      collectFinished()
    }
  }

  /// Curl's timer fired (or was set to 0): it handles its timeouts and new transfers.
  private func runTimerIfDue() {
    // Bounded: curl may ask for 0 again, but never needs more than a few rounds in a row.
    for _ in 0..<8 {
      guard let deadline, deadline <= .now else { return }
      self.deadline = nil
      var running: Int32 = 0
      curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
    }
  }

  /// Without a curl timer the engine sleeps until a socket or the wake pipe is ready: a cap
  /// would only turn a transfer nobody collected into a late one instead of a hung one.
  private func pollTimeoutMilliseconds() -> Int32 {
    guard let deadline else { return -1 }
    let left = ContinuousClock.now.duration(to: deadline)
    let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
    return Int32(max(0, min(1000, milliseconds + 1)))
  }

  private func collectFinished() {
    var queued: Int32 = 0
    while let message = curl_multi_info_read(multi, &queued) {
      guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
      let code = message.pointee.data.result
      var raw: UnsafeMutableRawPointer?
      _ = dt_curl_getinfo_ptr(easy, CURLINFO_PRIVATE, &raw)
      curl_multi_remove_handle(multi, easy)
      guard let raw else { continue }
      let transfer = Unmanaged<Transfer>.fromOpaque(raw).takeUnretainedValue()
      transfers.removeValue(forKey: ObjectIdentifier(transfer))
      let result: Result<HTTPClientResponse, HTTPClientError> =
        code == CURLE_OK
        ? .success(transfer.response()) : .failure(HTTPClientError(String(cString: curl_easy_strerror(code))))
      if let handle = transfer.releaseHandle() {
        if spareHandles.count < Self.maxSpareHandles { spareHandles.append(handle) } else { curl_easy_cleanup(handle) }
      }
      transfer.finish(result)
    }
  }

  private func finishAll(_ batch: [Transfer]) {
    for transfer in batch { transfer.finish(.failure(HTTPClientError("the HTTP client is shut down"))) }
    for transfer in transfers.values {
      if let easy = transfer.easy { curl_multi_remove_handle(multi, easy) }
      transfer.finish(.failure(HTTPClientError("the HTTP client is shut down")))
    }
    transfers.removeAll()
    for handle in spareHandles { curl_easy_cleanup(handle) }
    spareHandles.removeAll()
    curl_multi_cleanup(multi)
    wake.close()
  }

  // MARK: - Curl's callbacks (on the engine thread, inside curl_multi_socket_action)

  fileprivate func watch(_ socket: curl_socket_t, _ what: Int32) {
    switch what {
    case CURL_POLL_IN: watched[socket] = Int16(POLLIN)
    case CURL_POLL_OUT: watched[socket] = Int16(POLLOUT)
    case CURL_POLL_INOUT: watched[socket] = Int16(POLLIN | POLLOUT)
    default: watched.removeValue(forKey: socket)
    }
  }

  fileprivate func setTimer(_ milliseconds: Int) {
    deadline = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
  }
}

private let curlSocketCallback: dt_curl_socket_cb = { _, socket, what, user, _ in
  guard let user else { return 0 }
  Unmanaged<CurlEngine>.fromOpaque(user).takeUnretainedValue().watch(socket, what)
  return 0
}

private let curlTimerCallback: dt_curl_timer_cb = { _, milliseconds, user in
  guard let user else { return 0 }
  Unmanaged<CurlEngine>.fromOpaque(user).takeUnretainedValue().setTimer(milliseconds)
  return 0
}
