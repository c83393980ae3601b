import DialtoneAuth
import DialtoneCommandLine
import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import Foundation

/// What a load client needs to know about an incoming message.
enum RelayEvent: Sendable {
  case ready
  case invite(String)
  case accept(String)
  case candidate(UInt64)
  case ended(String)
  case other
}

/// How one relay speaks: Dialtone's protocol, or the bare Node relay's `{"to": ...}` envelope.
protocol SignalingDialect: Sendable {
  func connect(
    _ client: WebSocketClient, user: String, stats: LoadStats,
    onEvent: @escaping @Sendable (RelayEvent, WebSocketClientConnection) -> Void
  ) throws -> WebSocketClientConnection
  func invite(_ callId: String, to: String) -> String
  func accept(_ callId: String, to: String) -> String
  func candidate(_ callId: String, to: String, stamp: UInt64) -> String
  func hangup(_ callId: String, to: String) -> String
}

/// A ~1.4 KB SDP, already escaped for a JSON string (the messages are built by hand).
let benchOffer = String(repeating: #"a=candidate-free-sdp-line-for-size\r\n"#, count: 40)

func monotonicNanos() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

struct DialtoneDialect: SignalingDialect {
  let url: String
  let secret: [UInt8]

  func connect(
    _ client: WebSocketClient, user: String, stats: LoadStats,
    onEvent: @escaping @Sendable (RelayEvent, WebSocketClientConnection) -> Void
  ) throws -> WebSocketClientConnection {
    let token = try DevelopmentTokens.mint(secret: secret, user: user, device: "d", name: nil, ttl: 3600)
    let acker = Acker()
    let connection = try client.connect(to: url) { event, connection in
      guard case .message(let bytes, _) = event else {
        if case .failed = event { stats.failed() }
        return
      }
      guard let envelope = try? MessageCodec.decodeServerMessage(bytes) else { return }
      // A real client acks what it processed: cumulative, every 16 messages.
      if let seq = envelope.seq, acker.shouldAck(seq) { connection.send(text: #"{"type":"ack","seq":\#(seq)}"#) }
      let relay: RelayEvent
      switch envelope.message {
      case .welcome:
        stats.ready()
        relay = .ready
      case .invite(let m): relay = .invite(m.callId)
      case .accept(let m): relay = .accept(m.callId)
      case .candidate(let m):
        relay = .candidate(
          UInt64(
            m.candidate.candidate.split(separator: ":").dropFirst().first.flatMap {
              UInt64($0.split(separator: " ").first ?? "")
            } ?? 0))
      case .callEnded(let m): relay = .ended(m.callId)
      default: relay = .other
      }
      onEvent(relay, connection)
    }
    connection.send(text: #"{"type":"hello","id":"h","version":1,"token":"\#(token)"}"#)
    return connection
  }

  private func id() -> String { String(UInt64.random(in: 0...UInt64.max), radix: 36) }
  func invite(_ callId: String, to: String) -> String {
    #"{"type":"invite","id":"\#(id())","callId":"\#(callId)","to":"\#(to)","video":false,"offer":{"sdp":"\#(benchOffer)"}}"#
  }
  func accept(_ callId: String, to: String) -> String {
    #"{"type":"accept","id":"\#(id())","callId":"\#(callId)","answer":{"sdp":"\#(benchOffer)"}}"#
  }
  func candidate(_ callId: String, to: String, stamp: UInt64) -> String {
    #"{"type":"candidate","id":"\#(id())","callId":"\#(callId)","candidate":{"candidate":"candidate:\#(stamp) 1 udp 2122260223 192.168.1.20 54321 typ host","sdpMid":"0","sdpMLineIndex":0}}"#
  }
  func hangup(_ callId: String, to: String) -> String { #"{"type":"hangup","id":"\#(id())","callId":"\#(callId)"}"# }
}

struct NodeRelayDialect: SignalingDialect {
  let url: String

  func connect(
    _ client: WebSocketClient, user: String, stats: LoadStats,
    onEvent: @escaping @Sendable (RelayEvent, WebSocketClientConnection) -> Void
  ) throws -> WebSocketClientConnection {
    try client.connect(to: url + "?user=\(user)") { event, connection in
      switch event {
      case .opened:
        stats.ready()
        onEvent(.ready, connection)
      case .message(let bytes, _):
        guard case .object(let o)? = JSONValue(parsing: bytes), let type = o["type"]?.stringValue,
          let callId = o["callId"]?.stringValue
        else { return }
        switch type {
        case "invite": onEvent(.invite(callId), connection)
        case "accept": onEvent(.accept(callId), connection)
        case "candidate":
          let text = o["candidate"]?["candidate"]?.stringValue ?? ""
          onEvent(
            .candidate(
              UInt64(
                text.split(separator: ":").dropFirst().first.flatMap { UInt64($0.split(separator: " ").first ?? "") }
                  ?? 0)), connection)
        case "hangup": onEvent(.ended(callId), connection)
        default: onEvent(.other, connection)
        }
      case .failed: stats.failed()
      default: break
      }
    }
  }

  func invite(_ callId: String, to: String) -> String {
    #"{"to":"\#(to)","type":"invite","callId":"\#(callId)","video":false,"offer":{"sdp":"\#(benchOffer)"}}"#
  }
  func accept(_ callId: String, to: String) -> String {
    #"{"to":"\#(to)","type":"accept","callId":"\#(callId)","answer":{"sdp":"\#(benchOffer)"}}"#
  }
  func candidate(_ callId: String, to: String, stamp: UInt64) -> String {
    #"{"to":"\#(to)","type":"candidate","callId":"\#(callId)","candidate":{"candidate":"candidate:\#(stamp) 1 udp 2122260223 192.168.1.20 54321 typ host","sdpMid":"0","sdpMLineIndex":0}}"#
  }
  func hangup(_ callId: String, to: String) -> String { #"{"to":"\#(to)","type":"hangup","callId":"\#(callId)"}"# }
}

/// One caller and one callee running calls back to back. `step()` (driver thread) sends the next
/// paced message; replies to invites are sent from the network thread, as a real client would.
final class CallPair: @unchecked Sendable {
  // @unchecked: `phase`, `sentEach`, `callId` are only touched under `lock`.
  private enum Phase { case idle, inviting, established }
  private let lock = NSLock()
  private var phase = Phase.idle
  private var sentByCaller = 0
  private var sentByCallee = 0
  private var callId = ""
  private var caller: WebSocketClientConnection!
  private var callee: WebSocketClientConnection!
  private let callerName: String
  private let calleeName: String
  private let dialect: any SignalingDialect
  static let candidatesEachWay = 20

  init(index: Int, dialect: any SignalingDialect, client: WebSocketClient, stats: LoadStats) throws {
    callerName = "caller\(index)"
    calleeName = "callee\(index)"
    self.dialect = dialect
    caller = try dialect.connect(client, user: callerName, stats: stats) { [weak self] event, _ in
      guard let self else { return }
      switch event {
      case .accept(let id):
        stats.relayed()
        self.lock.withLock { if id == self.callId { self.phase = .established } }
      case .candidate(let stamp): stats.relayed(latencyNanos: monotonicNanos() &- stamp)
      default: break
      }
    }
    callee = try dialect.connect(client, user: calleeName, stats: stats) { [weak self] event, connection in
      guard let self else { return }
      switch event {
      case .invite(let id):
        stats.relayed()
        connection.send(text: self.dialect.accept(id, to: self.callerName))
      case .candidate(let stamp): stats.relayed(latencyNanos: monotonicNanos() &- stamp)
      case .ended:
        stats.relayed()
        stats.callCompleted()
      default: break
      }
    }
  }

  /// Sends one paced message if this call has one due; false while it waits for the callee.
  func step() -> Bool {
    enum Action {
      case invite(String)
      case callerCandidate(String)
      case calleeCandidate(String)
      case hangup(String)
      case wait
    }
    let action: Action = lock.withLock {
      switch phase {
      case .idle:
        callId = UUID().uuidString
        phase = .inviting
        sentByCaller = 0
        sentByCallee = 0
        return .invite(callId)
      case .inviting:
        return .wait
      case .established:
        if sentByCaller < Self.candidatesEachWay && sentByCaller <= sentByCallee {
          sentByCaller += 1
          return .callerCandidate(callId)
        }
        if sentByCallee < Self.candidatesEachWay {
          sentByCallee += 1
          return .calleeCandidate(callId)
        }
        phase = .idle
        return .hangup(callId)
      }
    }
    switch action {
    case .invite(let id): caller.send(text: dialect.invite(id, to: calleeName))
    case .callerCandidate(let id): caller.send(text: dialect.candidate(id, to: calleeName, stamp: monotonicNanos()))
    case .calleeCandidate(let id): callee.send(text: dialect.candidate(id, to: callerName, stamp: monotonicNanos()))
    case .hangup(let id): caller.send(text: dialect.hangup(id, to: calleeName))
    case .wait: return false
    }
    return true
  }

  func close() {
    caller.close()
    callee.close()
  }
}

/// Counters and latency samples, written from the network thread.
final class LoadStats: @unchecked Sendable {
  // @unchecked: everything is touched under `lock`.
  private let lock = NSLock()
  private var readyCount = 0
  private var failures = 0
  private var measuring = false
  private var relayedCount = 0
  private var calls = 0
  private var samples: [Double] = []

  func ready() { lock.withLock { readyCount += 1 } }
  func failed() { lock.withLock { failures += 1 } }
  func startMeasuring() {
    lock.withLock {
      measuring = true
      relayedCount = 0
      calls = 0
      samples.removeAll()
    }
  }
  func stopMeasuring() { lock.withLock { measuring = false } }
  func relayed(latencyNanos: UInt64? = nil) {
    lock.withLock {
      guard measuring else { return }
      relayedCount += 1
      if let latencyNanos { samples.append(Double(latencyNanos) / 1_000_000) }
    }
  }
  func callCompleted() { lock.withLock { if measuring { calls += 1 } } }
  var relayedMessages: Int { lock.withLock { relayedCount } }
  var completedCalls: Int { lock.withLock { calls } }
  var latencies: [Double] { lock.withLock { samples } }

  func waitForReady(_ target: Int, timeout: Double) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while lock.withLock({ readyCount }) < target {
      if lock.withLock({ failures }) > 0 { throw ArgumentError(message: "\(failures) connections failed") }
      guard Date() < deadline else {
        throw ArgumentError(message: "only \(lock.withLock { readyCount }) of \(target) connections ready")
      }
      try await Task.sleep(for: .milliseconds(10))
    }
  }
}

/// Cumulative acks every 16 messages.
final class Acker: @unchecked Sendable {
  // @unchecked: `count` is only touched under `lock`.
  private let lock = NSLock()
  private var count = 0
  func shouldAck(_ seq: UInt64) -> Bool {
    lock.withLock {
      count += 1
      return count % 16 == 0
    }
  }
}
