import DialtoneAuth
import DialtoneBenchSlices
import DialtoneCommandLine
import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneSupport
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
  // @unchecked: `caller` and `callee` are set once, in init (their handlers capture self, so they cannot be `let`).
  private enum Phase: Sendable { case idle, inviting, established }
  private struct Call: Sendable {
    var phase = Phase.idle
    var sentByCaller = 0
    var sentByCallee = 0
    var callId = ""
  }
  private let state = Locked(Call())
  private var caller: WebSocketClientConnection!
  private var callee: WebSocketClientConnection!
  private let callerName: String
  private let calleeName: String
  private let dialect: any SignalingDialect
  private let candidatesEachWay: Int

  /// `calleeDialect`: where the callee connects, when not where the caller does (another node).
  init(
    index: Int, dialect: any SignalingDialect, calleeDialect: (any SignalingDialect)? = nil, candidates: Int = 20,
    client: WebSocketClient, stats: LoadStats
  ) throws {
    candidatesEachWay = candidates
    callerName = "caller\(index)"
    calleeName = "callee\(index)"
    self.dialect = dialect
    caller = try dialect.connect(client, user: callerName, stats: stats) { [weak self] event, _ in
      guard let self else { return }
      switch event {
      case .accept(let id):
        stats.relayed()
        self.state.withLock { if id == $0.callId { $0.phase = .established } }
      case .candidate(let stamp): stats.relayed(latencyNanos: monotonicNanos() &- stamp)
      default: break
      }
    }
    callee = try (calleeDialect ?? dialect).connect(client, user: calleeName, stats: stats) {
      [weak self] event, connection in
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
    let action: Action = state.withLock { call in
      switch call.phase {
      case .idle:
        call.callId = UUID().uuidString
        call.phase = .inviting
        call.sentByCaller = 0
        call.sentByCallee = 0
        return .invite(call.callId)
      case .inviting:
        return .wait
      case .established:
        if call.sentByCaller < self.candidatesEachWay && call.sentByCaller <= call.sentByCallee {
          call.sentByCaller += 1
          return .callerCandidate(call.callId)
        }
        if call.sentByCallee < self.candidatesEachWay {
          call.sentByCallee += 1
          return .calleeCandidate(call.callId)
        }
        call.phase = .idle
        return .hangup(call.callId)
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
final class LoadStats: Sendable {
  private struct Counts: Sendable {
    var readyCount = 0
    var failures = 0
    var measuring = false
    var relayedCount = 0
    var calls = 0
    var samples: [Double] = []
  }
  private let counts = Locked(Counts())

  func ready() { counts.withLock { $0.readyCount += 1 } }
  func failed() { counts.withLock { $0.failures += 1 } }
  func startMeasuring() {
    counts.withLock {
      $0.measuring = true
      $0.relayedCount = 0
      $0.calls = 0
      $0.samples.removeAll()
    }
  }
  func stopMeasuring() { counts.withLock { $0.measuring = false } }
  func relayed(latencyNanos: UInt64? = nil) {
    counts.withLock {
      guard $0.measuring else { return }
      $0.relayedCount += 1
      if let latencyNanos { $0.samples.append(Double(latencyNanos) / 1_000_000) }
    }
  }
  func callCompleted() { counts.withLock { if $0.measuring { $0.calls += 1 } } }
  var relayedMessages: Int { counts.withLock { $0.relayedCount } }
  var completedCalls: Int { counts.withLock { $0.calls } }
  var latencies: [Double] { counts.withLock { $0.samples } }

  /// The relay latency (ms) below which a fraction `p` of the samples lie (NaN without samples),
  /// computed as every other figure of the bench's is (`Quantile`).
  func latencyPercentiles() -> (Double) -> Double {
    let latencies = self.latencies.sorted()
    return { p in Quantile.of(latencies, p) }
  }

  func waitForReady(_ target: Int, timeout: Double) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while counts.withLock({ $0.readyCount }) < target {
      let failures = counts.withLock { $0.failures }
      if failures > 0 { throw ArgumentError(message: "\(failures) connections failed") }
      guard Date() < deadline else {
        throw ArgumentError(message: "only \(counts.withLock { $0.readyCount }) of \(target) connections ready")
      }
      try await Task.sleep(for: .milliseconds(10))
    }
  }
}

/// Cumulative acks every 16 messages.
final class Acker: Sendable {
  private let count = Locked(0)
  func shouldAck(_ seq: UInt64) -> Bool {
    count.withLock {
      $0 += 1
      return $0 % 16 == 0
    }
  }
}
