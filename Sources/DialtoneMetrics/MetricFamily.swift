import DialtoneSupport

/// One metric name and its series, one per set of label values. The number of series is
/// capped: values past the cap share one series labelled `other`, so that no input can grow
/// the exposition without bound (label values must come from closed sets anyway).
public final class MetricFamily<Metric: Sendable>: Sendable {
  public enum Kind: String, Sendable {
    case counter, gauge, histogram
  }

  public let name: String
  public let help: String
  public let kind: Kind
  public let labelNames: [String]
  private let maxSeries: Int
  private let make: @Sendable () -> Metric
  private let series = Locked<[MetricLabels: Metric]>([:])

  init(
    name: String, help: String, kind: Kind, labelNames: [String], maxSeries: Int,
    make: @escaping @Sendable () -> Metric
  ) {
    self.name = name
    self.help = help
    self.kind = kind
    self.labelNames = labelNames
    self.maxSeries = maxSeries
    self.make = make
    if labelNames.isEmpty { _ = labels() }
  }

  /// The series of these label values (as many as the family has label names), made on first use.
  public func labels(_ values: String...) -> Metric { labels(values) }

  public func labels(_ values: [String]) -> Metric {
    precondition(values.count == labelNames.count, "\(name) takes \(labelNames.count) label values")
    var key = MetricLabels(values)
    return series.withLock { series in
      if let existing = series[key] { return existing }
      if series.count >= maxSeries { key = MetricLabels(values.map { _ in "other" }) }
      if let existing = series[key] { return existing }
      let made = make()
      series[key] = made
      return made
    }
  }

  /// The family's only series, for a family without labels.
  public var unlabelled: Metric { labels([]) }

  /// Every series, ordered by its label values.
  public var allSeries: [(MetricLabels, Metric)] {
    series.current.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
  }
}
