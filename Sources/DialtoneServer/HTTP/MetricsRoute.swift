import DialtoneMetrics
import DialtoneNet

/// `GET /metrics`: the Prometheus text exposition, on the public port or on a listener of its
/// own (`--metrics-listen`). Holds only aggregates: no user, device or call id.
struct MetricsRoute {
  let hub: SignalingHub
  let observations: Observations

  func register(in router: inout Router) {
    router.add(.GET, "/metrics") { _ in
      await hub.refreshGauges()
      return .text(observations.metrics.text, contentType: PrometheusTextFormat.contentType)
    }
  }
}
