import DialtoneClient
import Foundation

/// The signaling transport on Apple platforms, over `URLSessionWebSocketTask`.
///
/// The bearer token goes in the upgrade request's `Authorization` header (protocol.md
/// section 3), never in the URL. Each `open` makes its own `URLSession` so a socket's delegate
/// callbacks (open, close, failure) are its own; the session is invalidated when the socket
/// ends, which releases the delegate.
public struct URLSessionSignalingTransport: SignalingTransport {
  private let configuration: URLSessionConfiguration

  /// - Parameter configuration: copied for every socket. The default has no cache and no
  ///   cookies: signaling needs neither.
  public init(configuration: URLSessionConfiguration = URLSessionSignalingTransport.defaultConfiguration) {
    self.configuration = configuration
  }

  public static var defaultConfiguration: URLSessionConfiguration {
    let c = URLSessionConfiguration.ephemeral
    // A WebSocket task's request timeout is its idle timeout: it must outlast the heartbeat's
    // pings and their answers (the client detects a dead socket itself, `pingTimeout`).
    c.timeoutIntervalForRequest = TimeInterval(SignalingClient.transportIdleTimeout().components.seconds)
    c.waitsForConnectivity = false  // the SignalingClient backs off and retries itself
    c.httpShouldSetCookies = false
    return c
  }

  public func open(url: String, bearerToken: String?) -> any SignalingSocket {
    URLSessionSignalingSocket(url: url, bearerToken: bearerToken, configuration: configuration)
  }
}

/// One WebSocket. Events are yielded in order: `.opened`, then `.text`…, then exactly one
/// `.closed`, after which the stream finishes.
final class URLSessionSignalingSocket: NSObject, SignalingSocket, URLSessionWebSocketDelegate, @unchecked Sendable {
  let events: AsyncStream<SignalingSocketEvent>
  private let sink: AsyncStream<SignalingSocketEvent>.Continuation
  // `lock` guards `session`, `task` and `finished`.
  private let lock = NSLock()
  private var session: URLSession?
  private var task: URLSessionWebSocketTask?
  private var finished = false

  init(url: String, bearerToken: String?, configuration: URLSessionConfiguration) {
    (events, sink) = AsyncStream<SignalingSocketEvent>.makeStream(bufferingPolicy: .unbounded)
    super.init()
    guard let target = URL(string: url), let scheme = target.scheme?.lowercased(), scheme == "wss" || scheme == "ws"
    else {
      finish(code: nil)
      return
    }
    var request = URLRequest(url: target)
    if let bearerToken { request.setValue("Bearer \(bearerToken)", forHTTPHeaderField: "Authorization") }
    // A serial delegate queue keeps open → messages → close in order.
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    queue.name = "dialtone.signaling.socket"
    let session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
    let task = session.webSocketTask(with: request)
    // protocol.md section 2: frames are at most 64 KiB; leave headroom for future servers.
    task.maximumMessageSize = 1 << 20
    lock.withLock {
      self.session = session
      self.task = task
    }
    task.resume()
  }

  func send(_ text: String) {
    guard let task = lock.withLock({ finished ? nil : self.task }) else { return }
    // URLSessionWebSocketTask sends in call order. A failed send means the socket is gone;
    // the receive loop or the delegate reports the close.
    task.send(.string(text)) { [weak self] error in
      if error != nil { self?.abort() }
    }
  }

  func close(code: Int) {
    guard let task = lock.withLock({ finished ? nil : self.task }) else { return }
    let closeCode = URLSessionWebSocketTask.CloseCode(rawValue: code) ?? .normalClosure
    task.cancel(with: closeCode, reason: nil)
  }

  // MARK: Receiving

  private func receiveNext() {
    guard let task = lock.withLock({ finished ? nil : self.task }) else { return }
    task.receive { [weak self] result in
      guard let self else { return }
      switch result {
      case .success(.string(let text)):
        self.yield(.text(text))
        self.receiveNext()
      case .success(.data):
        // Binary frames are not part of the protocol: ignore them.
        self.receiveNext()
      case .success:
        self.receiveNext()
      case .failure:
        // The delegate usually reports the close code first; if it does not, this is a drop.
        self.finish(code: task.closeCode == .invalid ? nil : task.closeCode.rawValue)
      }
    }
  }

  private func abort() {
    let task = lock.withLock { self.task }
    task?.cancel()
    finish(code: nil)
  }

  // MARK: URLSessionWebSocketDelegate

  func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol protocol: String?)
  {
    yield(.opened)
    receiveNext()
  }

  func urlSession(
    _ session: URLSession, webSocketTask: URLSessionWebSocketTask,
    didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?
  ) {
    finish(code: closeCode == .invalid ? nil : closeCode.rawValue)
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    // A failed connect (DNS, TLS, HTTP 401 on the upgrade) or a dropped connection.
    // An HTTP 401 is reported as close 4401 so the client treats it like the `unauthorized`
    // error + close 4401 path (protocol.md section 3).
    if let http = task.response as? HTTPURLResponse, http.statusCode == 401 {
      finish(code: 4401)
    } else {
      finish(code: nil)
    }
  }

  // MARK: Helpers

  private func yield(_ event: SignalingSocketEvent) {
    let open = lock.withLock { !finished }
    if open { sink.yield(event) }
  }

  /// Reports the close once, finishes the stream and releases the session (a URLSession
  /// retains its delegate until invalidated).
  private func finish(code: Int?) {
    let (first, session): (Bool, URLSession?) = lock.withLock {
      if finished { return (false, nil) }
      finished = true
      let s = self.session
      self.session = nil
      self.task = nil
      return (true, s)
    }
    guard first else { return }
    sink.yield(.closed(code: code))
    sink.finish()
    session?.invalidateAndCancel()
  }
}
