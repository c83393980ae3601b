import DialtoneMetrics
import Testing

@Suite struct PrometheusTextFormatTests {
  @Test func countersAndGaugesRenderWithHelpTypeAndSortedLabels() {
    let registry = MetricsRegistry()
    let ended = registry.counter("dialtone_calls_ended_total", "Calls ended, by reason.", labels: ["reason"])
    let open = registry.gauge("dialtone_sockets_open", "Open sockets.")
    ended.labels("missed").increment()
    ended.labels("hangup").increment(by: 2)
    open.unlabelled.set(3)
    #expect(
      PrometheusTextFormat.render(registry) == """
        # HELP dialtone_calls_ended_total Calls ended, by reason.
        # TYPE dialtone_calls_ended_total counter
        dialtone_calls_ended_total{reason="hangup"} 2
        dialtone_calls_ended_total{reason="missed"} 1
        # HELP dialtone_sockets_open Open sockets.
        # TYPE dialtone_sockets_open gauge
        dialtone_sockets_open 3

        """)
  }

  @Test func histogramsAreCumulativeWithInfSumAndCount() {
    let registry = MetricsRegistry()
    let ring = registry.histogram("dialtone_ring_seconds", "Ring time.", buckets: [0.5, 0.1, 1])
    for value in [0.05, 0.2, 0.7, 5] { ring.unlabelled.observe(value) }
    ring.unlabelled.observe(.nan)
    #expect(
      PrometheusTextFormat.render(registry) == """
        # HELP dialtone_ring_seconds Ring time.
        # TYPE dialtone_ring_seconds histogram
        dialtone_ring_seconds_bucket{le="0.1"} 1
        dialtone_ring_seconds_bucket{le="0.5"} 2
        dialtone_ring_seconds_bucket{le="1"} 3
        dialtone_ring_seconds_bucket{le="+Inf"} 4
        dialtone_ring_seconds_sum 5.95
        dialtone_ring_seconds_count 4

        """)
    #expect(ring.unlabelled.snapshot.upperBound(ofQuantile: 0.5) == 0.5)
    #expect(ring.unlabelled.snapshot.upperBound(ofQuantile: 0.99) == .infinity)
  }

  @Test func labelValuesAreEscaped() {
    let registry = MetricsRegistry()
    registry.counter("x_total", "Back\\slash\nnewline.", labels: ["v"]).labels("a\"b\\c\nd").increment()
    let text = PrometheusTextFormat.render(registry)
    #expect(text.contains(#"# HELP x_total Back\\slash\nnewline."#))
    #expect(text.contains(#"x_total{v="a\"b\\c\nd"} 1"#))
  }

  @Test func seriesPastTheCapShareOneOtherSeries() {
    let registry = MetricsRegistry()
    let family = registry.counter("requests_total", "Requests.", labels: ["route", "status"], maxSeries: 2)
    family.labels("/a", "200").increment()
    family.labels("/b", "200").increment()
    family.labels("/c", "200").increment()
    family.labels("/d", "404").increment()
    #expect(family.allSeries.count == 3)
    #expect(family.labels("other", "other").current == 2)
    #expect(family.labels("/a", "200").current == 1)
  }

  @Test func countersIgnoreNegativeAndNonFiniteAmounts() {
    let registry = MetricsRegistry()
    let counter = registry.counter("c_total", "C.").unlabelled
    counter.increment(by: -1)
    counter.increment(by: .infinity)
    counter.increment()
    #expect(counter.current == 1)
  }
}
