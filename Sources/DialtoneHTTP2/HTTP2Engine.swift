import DialtoneSupport
import DialtoneTLS
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The one thread that owns every connection of an `HTTP2Client`: other threads queue requests
/// and wake it through a pipe. Per loop turn it takes all queued requests, opens them as
/// streams (up to each server's SETTINGS_MAX_CONCURRENT_STREAMS, the rest wait in a bounded
/// queue), writes each connection's frames in one go, and sleeps in `poll` on its sockets.
final class HTTP2Engine: @unchecked Sendable {
  // @unchecked: everything but `inbox` and the pipe is confined to the engine thread; `inbox`
  // is locked; the pipe's descriptors never change.
  private struct Inbox {
    var requests: [HTTP2Stream] = []
    var resolved: [(serial: UInt64, result: Result<[SocketAddress], HTTP2Error>)] = []
    var stopped = false
  }
  private let inbox = Locked(Inbox())
  private let wake: WakePipe
  private let configuration: HTTP2Client.Configuration
  private let context: TLSClientContext
  private let outcomes = HTTP2Outcomes()
  private var origins: [HTTP2Origin: HTTP2OriginQueue] = [:]
  private var queued = 0
  private var nextSerial: UInt64 = 0
  /// No request's deadline is before this (it may be earlier than the true earliest).
  private var earliestDeadline: ContinuousClock.Instant?
  /// A GOAWAY or a refusal may send a request elsewhere this many times before it fails (a
  /// server that refuses everything must not keep a request going round).
  static let maxAttempts = 5

  init(configuration: HTTP2Client.Configuration, context: TLSClientContext) throws(HTTP2Error) {
    self.configuration = configuration
    self.context = context
    guard let wake = WakePipe() else { throw HTTP2Error("pipe failed: \(String(cString: strerror(errno)))") }
    self.wake = wake
    _ = WorkerThread(name: "dialtone-http2") { [self] in run() }
  }

  func submit(_ request: HTTP2Request, completion: @escaping HTTP2Stream.Completion) {
    let stream = HTTP2Stream(request: request, completion: completion)
    let limit = configuration.maxQueuedRequests
    let accepted = inbox.withLock { inbox -> Result<Bool, HTTP2Error> in
      guard !inbox.stopped else { return .failure(HTTP2Error("the HTTP/2 client is shut down")) }
      guard inbox.requests.count < limit else {
        return .failure(HTTP2Error("the HTTP/2 client's queue is full (\(limit) requests)"))
      }
      inbox.requests.append(stream)
      return .success(inbox.requests.count == 1)
    }
    switch accepted {
    case .failure(let error): stream.finish(.failure(error))
    // The engine takes the whole inbox once awake: only the first request of a batch wakes it.
    case .success(let first): if first { wake.wake() }
    }
  }

  func stop() {
    inbox.withLock { $0.stopped = true }
    wake.wake()
  }

  // MARK: - The engine thread

  private func run() {
    var fds: [pollfd] = []
    var polled: [HTTP2Connection] = []
    while true {
      wake.drain()
      let taken = inbox.withLock { inbox -> Inbox in
        defer {
          inbox.requests.removeAll(keepingCapacity: true)
          inbox.resolved.removeAll()
        }
        return inbox
      }
      if taken.stopped {
        shutDown(taken.requests)
        return
      }
      for (serial, result) in taken.resolved { connection(serial)?.resolved(result) }
      for stream in taken.requests { enqueue(stream) }
      expireIfDue()
      checkHealth()
      // Refused requests go back to their queue and out again in the same turn.
      for _ in 0..<Self.maxAttempts {
        service()
        guard settle() else { break }
      }

      fds.removeAll(keepingCapacity: true)
      polled.removeAll(keepingCapacity: true)
      fds.append(pollfd(fd: wake.descriptor, events: Int16(POLLIN), revents: 0))
      var readAgain = false
      for queue in origins.values {
        for connection in [queue.active].compactMap({ $0 }) + queue.draining {
          guard let events = connection.pollEvents else { continue }
          fds.append(pollfd(fd: connection.socket, events: events, revents: 0))
          polled.append(connection)
          readAgain = readAgain || connection.readAgain
        }
      }
      let ready = poll(&fds, nfds_t(fds.count), readAgain ? 0 : pollTimeoutMilliseconds())
      if ready > 0 || readAgain {
        for index in 1..<fds.count {
          let connection = polled[index - 1]
          let events = fds[index].revents | (connection.readAgain ? Int16(POLLIN) : 0)
          if events != 0 { connection.handle(events) }
        }
      }
    }
  }

  private func enqueue(_ stream: HTTP2Stream) {
    guard queued < configuration.maxQueuedRequests else {
      return stream.finish(
        .failure(HTTP2Error("the HTTP/2 client's queue is full (\(configuration.maxQueuedRequests) requests)")))
    }
    let queue = origins[stream.request.origin] ?? HTTP2OriginQueue()
    origins[stream.request.origin] = queue
    queue.pending.append(stream)
    queued += 1
    if earliestDeadline.map({ stream.deadline < $0 }) ?? true { earliestDeadline = stream.deadline }
  }

  /// Per origin: drops closed connections, opens one if requests wait, gives the open one as
  /// many waiting requests as the server allows, and writes every connection's frames.
  private func service() {
    for queue in origins.values {
      queue.draining.removeAll { connection in
        if connection.streams.isEmpty, connection.state != .closed { connection.close("drained after GOAWAY") }
        return connection.state == .closed
      }
      if let active = queue.active {
        if active.state == .closed {
          queue.active = nil
          // Requests that waited for a connection that never opened fail with its reason.
          if !active.wasOpen { failPending(queue, active.closeReason) }
        } else if active.goingAway {
          queue.draining.append(active)
          queue.active = nil
        }
      }
      if queue.active == nil, !queue.pending.isEmpty, let origin = queue.pending.first?.request.origin {
        queue.active = open(origin)
      }
      if let active = queue.active, !queue.pending.isEmpty {
        let count = min(active.capacity, queue.pending.count)
        if count > 0 {
          for stream in queue.pending[0..<count] { active.submit(stream) }
          queue.pending.removeFirst(count)
          queued -= count
        }
      }
      queue.active?.flush()
      for connection in queue.draining { connection.flush() }
    }
  }

  /// Completes what connections finished and requeues what servers refused; true if any was
  /// requeued (the caller services the queues again).
  private func settle() -> Bool {
    let finished = outcomes.finished
    let refused = outcomes.refused
    outcomes.finished.removeAll(keepingCapacity: true)
    outcomes.refused.removeAll(keepingCapacity: true)
    var requeued = false
    for stream in refused.reversed() {
      stream.attempts += 1
      guard stream.attempts < Self.maxAttempts, let queue = origins[stream.request.origin] else {
        stream.finish(.failure(HTTP2Error("\(stream.request.origin) refused the request \(stream.attempts) times")))
        continue
      }
      queue.pending.insert(stream, at: 0)
      queued += 1
      requeued = true
    }
    for (stream, result) in finished { stream.finish(result) }
    return requeued
  }

  private func open(_ origin: HTTP2Origin) -> HTTP2Connection {
    nextSerial += 1
    let connection = HTTP2Connection(
      serial: nextSerial, origin: origin, context: context, outcomes: outcomes,
      maxBodyBytes: configuration.maxResponseBodyBytes,
      connectTimeout: .milliseconds(Int64(configuration.connectTimeoutSeconds * 1000)),
      pingInterval: .milliseconds(Int64(configuration.pingIntervalSeconds * 1000)),
      pingTimeout: .milliseconds(Int64(configuration.pingTimeoutSeconds * 1000)))
    if IPAddressLiteral.matches(origin.host) {
      connection.resolved(SocketAddress.resolve(host: origin.host, port: origin.port, numericOnly: true))
    } else {
      // A DNS lookup may block for seconds: never on this thread.
      let serial = nextSerial
      DispatchQueue.global().async { [self] in
        let result = SocketAddress.resolve(host: origin.host, port: origin.port, numericOnly: false)
        inbox.withLock { $0.resolved.append((serial, result)) }
        wake.wake()
      }
    }
    return connection
  }

  private func connection(_ serial: UInt64) -> HTTP2Connection? {
    for queue in origins.values {
      if let active = queue.active, active.serial == serial { return active }
    }
    return nil
  }

  private func failPending(_ queue: HTTP2OriginQueue, _ why: String) {
    let failed = queue.pending
    queue.pending.removeAll()
    queued -= failed.count
    for stream in failed { stream.finish(.failure(HTTP2Error(why))) }
  }

  // MARK: - Deadlines

  /// Each connection's PING schedule (`HTTP2Connection.checkHealth`).
  private func checkHealth() {
    let now = ContinuousClock.now
    for queue in origins.values {
      for connection in [queue.active].compactMap({ $0 }) + queue.draining { connection.checkHealth(now: now) }
    }
  }

  private func nextDeadline() -> ContinuousClock.Instant? {
    var next = earliestDeadline
    func consider(_ deadline: ContinuousClock.Instant?) {
      if let deadline, next.map({ deadline < $0 }) ?? true { next = deadline }
    }
    for queue in origins.values {
      if let active = queue.active, active.state != .open { consider(active.connectDeadline) }
      for connection in [queue.active].compactMap({ $0 }) + queue.draining { consider(connection.healthDeadline) }
    }
    return next
  }

  private func pollTimeoutMilliseconds() -> Int32 {
    guard let deadline = nextDeadline() else { return -1 }
    let left = ContinuousClock.now.duration(to: deadline)
    let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
    return Int32(max(0, min(60_000, milliseconds + 1)))
  }

  /// Fails requests past their deadline (a stream in flight is reset) and connections not open
  /// within the connect timeout.
  private func expireIfDue() {
    let now = ContinuousClock.now
    for queue in origins.values {
      if let active = queue.active, active.state != .open, active.state != .closed, active.connectDeadline <= now {
        active.close(
          "cannot connect to \(active.origin) within \(configuration.connectTimeoutSeconds) s (TCP and TLS)")
      }
    }
    guard let earliest = earliestDeadline, earliest <= now else { return }
    var next: ContinuousClock.Instant?
    func keep(_ deadline: ContinuousClock.Instant) { if next.map({ deadline < $0 }) ?? true { next = deadline } }
    for queue in origins.values {
      let before = queue.pending.count
      queue.pending.removeAll { stream in
        guard stream.deadline <= now else {
          keep(stream.deadline)
          return false
        }
        outcomes.finished.append((stream, .failure(timedOut(stream))))
        return true
      }
      queued -= before - queue.pending.count
      for connection in [queue.active].compactMap({ $0 }) + queue.draining {
        for (id, stream) in connection.streams {
          guard stream.deadline <= now else {
            keep(stream.deadline)
            continue
          }
          connection.cancel(id)
          outcomes.finished.append((stream, .failure(timedOut(stream))))
        }
      }
    }
    earliestDeadline = next
  }

  private func timedOut(_ stream: HTTP2Stream) -> HTTP2Error {
    HTTP2Error("no answer from \(stream.request.origin) within \(stream.request.timeoutSeconds) s")
  }

  private func shutDown(_ batch: [HTTP2Stream]) {
    let why = HTTP2Error("the HTTP/2 client is shut down")
    for stream in batch { stream.finish(.failure(why)) }
    for queue in origins.values {
      for stream in queue.pending { stream.finish(.failure(why)) }
      for connection in [queue.active].compactMap({ $0 }) + queue.draining { connection.close("shut down") }
    }
    origins.removeAll()
    for (stream, _) in outcomes.finished { stream.finish(.failure(why)) }
    outcomes.finished.removeAll()
    for stream in outcomes.refused { stream.finish(.failure(why)) }
    outcomes.refused.removeAll()
    wake.close()
  }
}
