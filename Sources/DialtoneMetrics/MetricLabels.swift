/// The label values of one series, in the order of its family's label names.
public struct MetricLabels: Sendable, Hashable, Comparable {
  public let values: [String]

  public init(_ values: [String]) { self.values = values }

  public static func < (a: MetricLabels, b: MetricLabels) -> Bool { a.values.lexicographicallyPrecedes(b.values) }
}
