import DialtoneNet
import DialtoneSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif
#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

struct TimeoutError: Error, CustomStringConvertible {
  let what: String
  var description: String { "timed out waiting for \(what)" }
}

/// Fails instead of hanging; never used to assert speed.
func withDeadline<T: Sendable>(_ seconds: Double = 10, _ what: String, _ body: @escaping @Sendable () async throws -> T)
  async throws -> T
{
  try await withThrowingTaskGroup(of: T.self) { group in
    group.addTask { try await body() }
    group.addTask {
      try await Task.sleep(for: .seconds(seconds))
      throw TimeoutError(what: what)
    }
    guard let first = try await group.next() else { throw TimeoutError(what: what) }
    group.cancelAll()
    return first
  }
}

/// An unbounded FIFO that one consumer awaits.
final class EventQueue<Element: Sendable>: Sendable {
  private struct Queue: Sendable {
    var buffer: [Element] = []
    var waiter: CheckedContinuation<Element, Never>?
  }
  private let queue = Locked(Queue())

  func push(_ element: Element) {
    let resume: CheckedContinuation<Element, Never>? = queue.withLock { queue in
      if let waiter = queue.waiter {
        queue.waiter = nil
        return waiter
      }
      queue.buffer.append(element)
      return nil
    }
    resume?.resume(returning: element)
  }

  func next() async -> Element {
    await withCheckedContinuation { continuation in
      let ready: Element? = queue.withLock { queue in
        if !queue.buffer.isEmpty { return queue.buffer.removeFirst() }
        queue.waiter = continuation
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }
}

/// A client connection whose events arrive in order.
final class ClientProbe: Sendable {
  let connection: WebSocketClientConnection
  private let events = EventQueue<WebSocketClientEvent>()

  init(client: WebSocketClient, url: String, headers: [HTTPHeaderField] = [], allowSelfSigned: Bool = false) throws {
    let events = self.events
    connection = try client.connect(to: url, headers: headers, allowSelfSignedCertificates: allowSelfSigned) { event in
      events.push(event)
    }
  }

  func next(_ what: String = "event") async throws -> WebSocketClientEvent {
    let events = self.events
    return try await withDeadline(10, what) { await events.next() }
  }

  func nextText() async throws -> String {
    while true {
      let event = try await next("text message")
      switch event {
      case .message(let bytes, _): return String(decoding: bytes, as: UTF8.self)
      case .opened: continue
      default: throw TimeoutError(what: "text message, got \(event)")
      }
    }
  }
}

struct HTTPResult: Sendable {
  let status: Int
  let body: String
  var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] }
  var errorCode: String? { (json?["error"] as? [String: Any])?["code"] as? String }
}

func http(_ method: String, _ url: String, body: [UInt8]? = nil, headers: [String: String] = [:]) async throws
  -> HTTPResult
{
  var request = URLRequest(url: URL(string: url)!)
  request.httpMethod = method
  for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
  if let body { request.httpBody = Data(body) }
  let (data, response) = try await URLSession.shared.data(for: request)
  return HTTPResult(
    status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: String(decoding: data, as: UTF8.self))
}

/// Polls `condition` until it holds; fails (never hangs) after `seconds`.
func eventually(_ what: String, seconds: Double = 15, _ condition: @escaping @Sendable () -> Bool) async throws {
  let deadline = Date().addingTimeInterval(seconds)
  while !condition() {
    guard Date() < deadline else { throw TimeoutError(what: what) }
    try await Task.sleep(for: .milliseconds(10))
  }
}
