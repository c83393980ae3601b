import DialtoneCluster
import DialtoneMetrics
import DialtoneProtocol
import Foundation

/// Every metric the server exposes at `/metrics`, registered once. Label values come only from
/// closed sets (message types, end reasons, route patterns, push kinds): never a user, device
/// or call id.
final class ServerMetrics: Sendable {
  let registry = MetricsRegistry()

  // Sockets and sessions (gauges are set from the hub's state when scraped).
  let socketsOpen: Gauge
  let socketsOpened: Counter
  let sessionsConnected: Gauge
  let sessionsResumable: Gauge
  /// `kind`: new, resumed, resync (a resume that could not be honoured).
  let sessionsStarted: MetricFamily<Counter>
  let messagesReceived: MetricFamily<Counter>
  let messagesSent: Counter
  let messagesRefused: MetricFamily<Counter>
  /// Receipt of a relayed message (offer, answer, candidate, …) to its copy's write to the peer's socket.
  let relayLatency: Histogram

  // Calls.
  let callsLive: Gauge
  let groupCallsLive: Gauge
  let callsStarted: MetricFamily<Counter>
  let callsEnded: MetricFamily<Counter>
  /// The invite's arrival to each callee device's `ringing`: how fast a phone rings.
  let ringTime: Histogram
  /// The invite's arrival to the accept (a person's time to answer).
  let answerTime: Histogram
  let callDuration: Histogram
  let groupCallsStarted: Counter
  let groupCallsEnded: MetricFamily<Counter>

  // Quality reports from clients.
  let qualityReports: MetricFamily<Counter>
  /// A final report's accept to first audio or video, per role.
  let setupTime: MetricFamily<Histogram>
  /// Final reports by media path: relay (either side's selected candidate is a TURN relay) or direct.
  let mediaPaths: MetricFamily<Counter>
  let roundTripTime: Histogram
  let packetLoss: Histogram
  let iceRestarts: Counter

  // Pushes, ICE servers, HTTP.
  let pushRequests: MetricFamily<Counter>
  let pushTokensRemoved: MetricFamily<Counter>
  let iceServerRequests: MetricFamily<Counter>
  let turnCredentialsIssued: Counter
  let httpRequests: MetricFamily<Counter>
  let httpDuration: MetricFamily<Histogram>

  /// A cluster's node (all zero on a single server).
  let cluster: ClusterMetrics

  let buildInfo: MetricFamily<Gauge>
  let startTime: Gauge

  private static let latencyBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]
  private static let ringBuckets = [0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 45]
  private static let answerBuckets = [1.0, 2, 5, 10, 15, 20, 30, 45, 60]
  /// The buckets of the admin page's set-up time plot too.
  static let setupBuckets = [0.1, 0.25, 0.5, 1, 2, 5, 10]

  init(version: String, startedAt: Date) {
    let r = registry
    socketsOpen = r.gauge("dialtone_websocket_connections", "Open signaling sockets (any state).").unlabelled
    socketsOpened = r.counter("dialtone_websocket_connections_total", "Signaling sockets accepted.").unlabelled
    sessionsConnected =
      r.gauge("dialtone_sessions_connected", "Signaling sessions with a socket attached.")
      .unlabelled
    sessionsResumable =
      r.gauge(
        "dialtone_sessions_detached", "Signaling sessions without a socket, still resumable."
      ).unlabelled
    sessionsStarted = r.counter(
      "dialtone_sessions_total", "Sessions opened by hello: kind new, resumed, or resync (resume refused).",
      labels: ["kind"])
    messagesReceived = r.counter(
      "dialtone_messages_received_total", "Client messages received, by type (invalid: not decodable).",
      labels: ["type"])
    messagesSent =
      r.counter("dialtone_messages_sent_total", "Session messages sent: numbered, and candidate acks without a seq.")
      .unlabelled
    messagesRefused = r.counter(
      "dialtone_messages_refused_total", "Client messages answered with an error, by error code.", labels: ["code"])
    relayLatency =
      r.histogram(
        "dialtone_relay_latency_seconds", "A relayed message's receipt to its copy's write to the peer.",
        buckets: Self.latencyBuckets
      ).unlabelled

    callsLive = r.gauge("dialtone_calls_live", "1:1 calls ringing or connected.").unlabelled
    groupCallsLive = r.gauge("dialtone_group_calls_live", "Group calls in progress.").unlabelled
    callsStarted = r.counter("dialtone_calls_started_total", "1:1 calls that started ringing.", labels: ["video"])
    callsEnded = r.counter("dialtone_calls_ended_total", "1:1 calls ended, by end reason.", labels: ["reason"])
    ringTime =
      r.histogram(
        "dialtone_call_ring_seconds", "Invite to a callee device's ringing.", buckets: Self.ringBuckets
      ).unlabelled
    answerTime =
      r.histogram(
        "dialtone_call_answer_seconds", "Invite to accept, for answered calls.", buckets: Self.answerBuckets
      ).unlabelled
    callDuration =
      r.histogram(
        "dialtone_call_duration_seconds", "Accept to end, for answered calls.",
        buckets: [10, 30, 60, 300, 900, 1800, 3600, 7200]
      ).unlabelled
    groupCallsStarted = r.counter("dialtone_group_calls_started_total", "Group calls started.").unlabelled
    groupCallsEnded = r.counter(
      "dialtone_group_calls_ended_total", "Group calls ended, by end reason.", labels: ["reason"])

    qualityReports = r.counter(
      "dialtone_quality_reports_total", "Call-quality reports stored, by final (true/false).", labels: ["final"])
    setupTime = r.histogram(
      "dialtone_call_setup_seconds", "Accept to first audio or video, from clients' final quality reports.",
      buckets: Self.setupBuckets, labels: ["role"])
    mediaPaths = r.counter(
      "dialtone_call_media_path_total", "Final quality reports by media path (relay: through TURN; direct).",
      labels: ["path"])
    roundTripTime =
      r.histogram(
        "dialtone_call_rtt_seconds", "Round-trip time from final quality reports.",
        buckets: [0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1]
      ).unlabelled
    packetLoss =
      r.histogram(
        "dialtone_call_packet_loss_ratio", "Received packets lost, from final quality reports.",
        buckets: [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2]
      ).unlabelled
    iceRestarts =
      r.counter("dialtone_call_ice_restarts_total", "ICE restarts reported in final quality reports.")
      .unlabelled

    pushRequests = r.counter(
      "dialtone_push_requests_total",
      "Push attempts by provider (apns, fcm), token kind and result (delivered, invalid_token, failed, retryable).",
      labels: ["provider", "kind", "result"])
    pushTokensRemoved = r.counter(
      "dialtone_push_tokens_removed_total", "Dead push tokens removed after the provider rejected them.",
      labels: ["provider"])
    iceServerRequests = r.counter(
      "dialtone_ice_server_requests_total", "ICE server lists handed out, by where (welcome, http).",
      labels: ["source"])
    turnCredentialsIssued =
      r.counter(
        "dialtone_turn_credentials_issued_total", "TURN credentials issued (one per ICE server list with TURN)."
      )
      .unlabelled
    httpRequests = r.counter(
      "dialtone_http_requests_total", "HTTP requests by method, route pattern and status.",
      labels: ["method", "route", "status"], maxSeries: 256)
    httpDuration = r.histogram(
      "dialtone_http_request_duration_seconds", "HTTP request handling time by route pattern.",
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5], labels: ["route"])

    cluster = ClusterMetrics(registry: r)

    buildInfo = r.gauge("dialtone_build_info", "The server's version (always 1).", labels: ["version"])
    startTime = r.gauge("process_start_time_seconds", "Start time of the process since the Unix epoch.").unlabelled
    buildInfo.labels(version).set(1)
    startTime.set(startedAt.timeIntervalSince1970)
  }

  var text: String { PrometheusTextFormat.render(registry) }
}
