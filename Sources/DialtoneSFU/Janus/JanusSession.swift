import DialtoneCrypto
import DialtoneHTTPClient
import DialtoneJSON
import Foundation

/// One session on Janus's HTTP API (`/janus`): requests, the long poll that brings Janus's
/// events, and the keepalive. A request Janus acknowledges with `ack` completes when its event
/// (same transaction) arrives on the long poll.
///
/// The session is lost when the long poll or a keepalive fails (Janus died, or restarted and
/// forgot the session: error 458): every pending request fails and `onLost` runs once.
package actor JanusSession {
  package struct Reply: Sendable {
    /// `plugindata.data` of a plugin reply; the whole message otherwise.
    package var data: JSONValue
    package var jsep: JSONValue?
  }

  /// An event no request waits for (`webrtcup`, `hangup`, `trickle`, plugin events, ...).
  package struct Event: Sendable {
    package var handle: UInt64?
    package var message: JSONValue
  }

  private let baseURL: String
  private let apiSecret: String?
  private let http: HTTPClient
  private let keepaliveInterval: Duration
  private let requestTimeout: Double
  private var sessionId: UInt64?
  private var pending: [String: CheckedContinuation<Reply, any Error>] = [:]
  private var poller: Task<Void, Never>?
  private var keeper: Task<Void, Never>?
  private var lost = false
  private var onEvent: @Sendable (Event) -> Void = { _ in }
  private var onLost: @Sendable (String) -> Void = { _ in }

  package init(
    baseURL: String, apiSecret: String?, http: HTTPClient, keepaliveInterval: Duration = .seconds(20),
    requestTimeout: Double = 10
  ) {
    self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
    self.apiSecret = apiSecret
    self.http = http
    self.keepaliveInterval = keepaliveInterval
    self.requestTimeout = requestTimeout
  }

  package var isLost: Bool { lost }

  /// Creates the session and starts polling.
  package func open(onEvent: @escaping @Sendable (Event) -> Void, onLost: @escaping @Sendable (String) -> Void)
    async throws
  {
    self.onEvent = onEvent
    self.onLost = onLost
    let reply = try await post(path: "", ["janus": "create"])
    guard let id = reply.data["data"]?["id"]?.integerValue, id > 0 else {
      throw JanusError.protocolViolation("create: no session id")
    }
    sessionId = UInt64(id)
    poller = Task { await self.poll() }
    keeper = Task { await self.keepAlive() }
  }

  /// Attaches the VideoRoom plugin: a new handle.
  package func attach() async throws -> UInt64 {
    let reply = try await post(path: try sessionPath(), ["janus": "attach", "plugin": "janus.plugin.videoroom"])
    guard let id = reply.data["data"]?["id"]?.integerValue, id > 0 else {
      throw JanusError.protocolViolation("attach: no handle id")
    }
    return UInt64(id)
  }

  package func detach(_ handle: UInt64) async {
    guard let path = try? sessionPath() else { return }
    _ = try? await post(path: path + "/\(handle)", ["janus": "detach"])
  }

  /// A plugin request; waits for the plugin's answer (synchronous or through the long poll).
  /// A plugin-level error (`error_code`) throws.
  package func message(_ handle: UInt64, _ body: JSONValue, jsep: JSONValue? = nil) async throws -> Reply {
    var request: [String: JSONValue] = ["janus": "message", "body": body]
    if let jsep { request["jsep"] = jsep }
    let reply = try await post(path: try sessionPath() + "/\(handle)", .object(request))
    if let code = reply.data["error_code"]?.integerValue {
      throw JanusError.plugin(code: Int(code), reply.data["error"]?.stringValue ?? "error \(code)")
    }
    return reply
  }

  /// A trickled candidate (`{candidate, sdpMid, sdpMLineIndex}`) or `{completed: true}`.
  package func trickle(_ handle: UInt64, _ candidate: JSONValue) async throws {
    _ = try await post(
      path: try sessionPath() + "/\(handle)", ["janus": "trickle", "candidate": candidate], ackIsFinal: true)
  }

  /// Destroys the session on Janus and stops polling.
  package func close() async {
    guard !lost else { return }
    lost = true
    poller?.cancel()
    keeper?.cancel()
    if let path = try? sessionPath() { _ = try? await send(path: path, ["janus": "destroy"], transaction: "close") }
    failPending(JanusError.sessionLost("closed"))
  }

  // MARK: - Transport

  private func sessionPath() throws -> String {
    guard let sessionId, !lost else { throw JanusError.sessionLost("no session") }
    return "/\(sessionId)"
  }

  /// Posts a request and waits for its final answer: the HTTP reply itself, or, for `ack`, the
  /// event with the same transaction.
  /// `ackIsFinal`: Janus answers keepalives and trickles with a bare `ack` and nothing after.
  private func post(path: String, _ body: JSONValue, ackIsFinal: Bool = false) async throws -> Reply {
    let transaction = SecureRandom.token(byteCount: 9)
    return try await withCheckedThrowingContinuation { continuation in
      // Registered before sending: the event may come on the long poll before the ack.
      pending[transaction] = continuation
      Task { await self.transmit(path: path, body, transaction: transaction, ackIsFinal: ackIsFinal) }
    }
  }

  private func transmit(path: String, _ body: JSONValue, transaction: String, ackIsFinal: Bool) async {
    do {
      let reply = try await send(path: path, body, transaction: transaction)
      switch reply["janus"]?.stringValue {
      case "ack":
        // Otherwise the answer comes on the long poll.
        if ackIsFinal { resolve(transaction, .success(Self.reply(reply))) }
      case "success":
        resolve(transaction, .success(Self.reply(reply)))
      case "error":
        let code = reply["error"]?["code"]?.integerValue ?? 0
        let reason = reply["error"]?["reason"]?.stringValue ?? "error \(code)"
        resolve(
          transaction, .failure(code == 458 ? JanusError.sessionLost(reason) : JanusError.janus(Int(code), reason)))
        if code == 458 { loseSession("Janus no longer knows the session (\(reason))") }
      default:
        resolve(transaction, .failure(JanusError.protocolViolation("unexpected reply \(reply.serializedString)")))
      }
    } catch {
      resolve(transaction, .failure(error))
      if error is HTTPClientError { loseSession("Janus unreachable: \(error)") }
    }
  }

  private func send(path: String, _ body: JSONValue, transaction: String) async throws -> JSONValue {
    guard case .object(var object) = body else { throw JanusError.protocolViolation("request is not an object") }
    object["transaction"] = .string(transaction)
    if let apiSecret { object["apisecret"] = .string(apiSecret) }
    let response = try await http.send(
      HTTPClientRequest(
        method: "POST", url: baseURL + path, headers: [("Content-Type", "application/json")],
        body: JSONValue.object(object).serialized, timeoutSeconds: requestTimeout))
    guard response.status == 200, let json = JSONValue(parsing: response.body) else {
      throw JanusError.protocolViolation("HTTP \(response.status) from Janus")
    }
    return json
  }

  private static func reply(_ message: JSONValue) -> Reply {
    Reply(data: message["plugindata"]?["data"] ?? message, jsep: message["jsep"])
  }

  private func resolve(_ transaction: String, _ result: Result<Reply, any Error>) {
    pending.removeValue(forKey: transaction)?.resume(with: result)
  }

  private func failPending(_ error: any Error) {
    let waiting = pending
    pending.removeAll()
    for continuation in waiting.values { continuation.resume(throwing: error) }
  }

  private func loseSession(_ reason: String) {
    guard !lost else { return }
    lost = true
    poller?.cancel()
    keeper?.cancel()
    failPending(JanusError.sessionLost(reason))
    onLost(reason)
  }

  // MARK: - Long poll and keepalive

  private func poll() async {
    while !lost, !Task.isCancelled, let path = try? sessionPath() {
      var url = baseURL + path + "?maxev=16"
      if let apiSecret {
        url += "&apisecret=" + (apiSecret.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
      }
      do {
        // Janus answers an idle poll after 30 s with a keepalive.
        let response = try await http.send(HTTPClientRequest(method: "GET", url: url, timeoutSeconds: 45))
        guard response.status == 200, let json = JSONValue(parsing: response.body) else {
          loseSession("the long poll got HTTP \(response.status)")
          return
        }
        for message in json.arrayValue ?? [json] { dispatch(message) }
      } catch {
        if Task.isCancelled { return }
        loseSession("the long poll failed: \(error)")
        return
      }
    }
  }

  private func dispatch(_ message: JSONValue) {
    switch message["janus"]?.stringValue {
    case "keepalive":
      return
    case "error":
      let code = message["error"]?["code"]?.integerValue ?? 0
      if code == 458 { return loseSession("Janus no longer knows the session") }
    case "timeout":
      return loseSession("Janus timed the session out")
    default:
      break
    }
    if let transaction = message["transaction"]?.stringValue, pending[transaction] != nil,
      message["janus"]?.stringValue == "event"
    {
      return resolve(transaction, .success(Self.reply(message)))
    }
    onEvent(Event(handle: message["sender"]?.integerValue.map { UInt64($0) }, message: message))
  }

  private func keepAlive() async {
    while !lost, !Task.isCancelled {
      try? await Task.sleep(for: keepaliveInterval)
      guard !Task.isCancelled, !lost, let path = try? sessionPath() else { return }
      do {
        _ = try await post(path: path, ["janus": "keepalive"], ackIsFinal: true)
      } catch {
        // post already declared the session lost for transport and 458 failures.
        if case JanusError.sessionLost = error { return }
      }
    }
  }
}

package enum JanusError: Error, CustomStringConvertible {
  case sessionLost(String)
  case janus(Int, String)
  case plugin(code: Int, String)
  case protocolViolation(String)

  package var description: String {
    switch self {
    case .sessionLost(let reason): return "Janus session lost: \(reason)"
    case .janus(let code, let reason): return "Janus error \(code): \(reason)"
    case .plugin(let code, let reason): return "VideoRoom error \(code): \(reason)"
    case .protocolViolation(let reason): return "unexpected answer from Janus: \(reason)"
    }
  }
}
