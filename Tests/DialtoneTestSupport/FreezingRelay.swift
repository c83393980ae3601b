import DialtoneSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A TCP relay on 127.0.0.1 in front of another loopback port. `freeze()` stops it relaying for
/// every connection it carries at that moment, both ways, without closing any: what their ends
/// write is accepted by the kernel and goes nowhere, as on a TCP connection whose retransmission
/// timer has backed off to many seconds on a congested link. Connections accepted later relay
/// normally. Every connection and thread ends with `stop()`.
public final class FreezingRelay: Sendable {
  public let port: Int
  private let listener: Int32
  private let targetPort: Int

  private struct State {
    /// Connections accepted before the latest `freeze()` are frozen.
    var frozenBelow = 0
    var accepted = 0
    var stopped = false
    var descriptors: [Int32] = []
    var threads: [WorkerThread] = []
  }
  private let state = Locked(State())

  public struct Failure: Error, CustomStringConvertible {
    public let description: String
  }

  public init(to targetPort: Int) throws {
    self.targetPort = targetPort
    (listener, port) = try LoopbackListener.listeningSocket()
    let accepting = WorkerThread(name: "relay-accept") { [self] in acceptLoop() }
    state.withLock { $0.threads.append(accepting) }
  }

  /// How many connections the relay accepted so far.
  public var accepted: Int { state.withLock { $0.accepted } }

  /// Freezes every connection relayed now.
  public func freeze() { state.withLock { $0.frozenBelow = $0.accepted } }

  public func stop() {
    let threads = state.withLock {
      $0.stopped = true
      return $0.threads
    }
    for thread in threads { thread.wait() }
    state.withLock {
      for fd in $0.descriptors { close(fd) }
      $0.descriptors = []
    }
    close(listener)
  }

  private var stopped: Bool { state.withLock { $0.stopped } }

  private func acceptLoop() {
    while !stopped {
      guard Self.readable(listener) else { continue }
      let client = accept(listener, nil, nil)
      guard client >= 0 else { continue }
      guard let server = connectLoopback(port: targetPort) else {
        close(client)
        continue
      }
      let number = state.withLock {
        $0.accepted += 1
        $0.descriptors += [client, server]
        return $0.accepted
      }
      let up = WorkerThread(name: "relay-up") { [self] in pump(from: client, to: server, connection: number) }
      let down = WorkerThread(name: "relay-down") { [self] in pump(from: server, to: client, connection: number) }
      state.withLock { $0.threads += [up, down] }
    }
  }

  /// Copies `source` to `target` until either ends, the connection freezes (then it only waits
  /// for `stop()`, reading nothing more) or the relay stops.
  private func pump(from source: Int32, to target: Int32, connection: Int) {
    var buffer = [UInt8](repeating: 0, count: 16_384)
    while true {
      let (halted, frozen) = state.withLock { ($0.stopped, connection <= $0.frozenBelow) }
      if halted { return }
      if frozen {
        usleep(20_000)
        continue
      }
      guard Self.readable(source) else { continue }
      let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
      guard count > 0 else {
        shutdown(target, Int32(SHUT_WR))
        return
      }
      // Read before the freeze, written after it: held, like the rest.
      if state.withLock({ connection <= $0.frozenBelow }) { continue }
      var sent = 0
      while sent < count {
        let wrote = buffer.withUnsafeBytes { bytes -> Int in
          guard let base = bytes.baseAddress else { return -1 }
          return send(target, base + sent, count - sent, Int32(MSG_NOSIGNAL))
        }
        guard wrote > 0 else { return }
        sent += wrote
      }
    }
  }

  /// Whether `fd` has something to read (or ended) within 20 ms.
  private static func readable(_ fd: Int32) -> Bool {
    var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    return poll(&entry, 1, 20) > 0
  }
}
