import DialtoneSupport

/// The metrics of one process, rendered together by `PrometheusTextFormat`. Families are
/// registered once at start-up; updating a series afterwards takes only that series' lock.
public final class MetricsRegistry: Sendable {
  enum Entry: Sendable {
    case counter(MetricFamily<Counter>)
    case gauge(MetricFamily<Gauge>)
    case histogram(MetricFamily<Histogram>)
  }

  private let entries = Locked<[Entry]>([])

  public init() {}

  public func counter(_ name: String, _ help: String, labels: [String] = [], maxSeries: Int = 64)
    -> MetricFamily<Counter>
  {
    precondition(name.hasSuffix("_total"), "counter names end in _total: \(name)")
    let family = MetricFamily(
      name: name, help: help, kind: .counter, labelNames: labels, maxSeries: maxSeries, make: { Counter() })
    entries.withLock { $0.append(.counter(family)) }
    return family
  }

  public func gauge(_ name: String, _ help: String, labels: [String] = [], maxSeries: Int = 64)
    -> MetricFamily<Gauge>
  {
    let family = MetricFamily(
      name: name, help: help, kind: .gauge, labelNames: labels, maxSeries: maxSeries, make: { Gauge() })
    entries.withLock { $0.append(.gauge(family)) }
    return family
  }

  public func histogram(
    _ name: String, _ help: String, buckets: [Double], labels: [String] = [], maxSeries: Int = 32
  ) -> MetricFamily<Histogram> {
    let family = MetricFamily(
      name: name, help: help, kind: .histogram, labelNames: labels, maxSeries: maxSeries,
      make: { Histogram(bounds: buckets) })
    entries.withLock { $0.append(.histogram(family)) }
    return family
  }

  var registered: [Entry] { entries.current }
}
