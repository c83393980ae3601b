/// The Prometheus text exposition format, version 0.0.4: `# HELP`, `# TYPE`, then one line per
/// sample; histograms as cumulative `_bucket{le=…}` series with `_sum` and `_count`.
public enum PrometheusTextFormat {
  public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

  public static func render(_ registry: MetricsRegistry) -> String {
    var out = ""
    for entry in registry.registered {
      switch entry {
      case .counter(let family):
        header(family, into: &out)
        for (labels, counter) in family.allSeries {
          sample(family.name, family.labelNames, labels.values, counter.current, into: &out)
        }
      case .gauge(let family):
        header(family, into: &out)
        for (labels, gauge) in family.allSeries {
          sample(family.name, family.labelNames, labels.values, gauge.current, into: &out)
        }
      case .histogram(let family):
        header(family, into: &out)
        for (labels, histogram) in family.allSeries {
          let snapshot = histogram.snapshot
          var cumulative: UInt64 = 0
          let names = family.labelNames + ["le"]
          for (index, bound) in snapshot.bounds.enumerated() {
            cumulative += snapshot.counts[index]
            sample(family.name + "_bucket", names, labels.values + [number(bound)], Double(cumulative), into: &out)
          }
          sample(family.name + "_bucket", names, labels.values + ["+Inf"], Double(snapshot.count), into: &out)
          sample(family.name + "_sum", family.labelNames, labels.values, snapshot.sum, into: &out)
          sample(family.name + "_count", family.labelNames, labels.values, Double(snapshot.count), into: &out)
        }
      }
    }
    return out
  }

  private static func header<Metric>(_ family: MetricFamily<Metric>, into out: inout String) {
    out += "# HELP \(family.name) \(escapeHelp(family.help))\n# TYPE \(family.name) \(family.kind.rawValue)\n"
  }

  private static func sample(
    _ name: String, _ labelNames: [String], _ values: [String], _ value: Double, into out: inout String
  ) {
    out += name
    if !labelNames.isEmpty {
      out += "{"
      out += zip(labelNames, values).map { "\($0)=\"\(escapeLabel($1))\"" }.joined(separator: ",")
      out += "}"
    }
    out += " " + number(value) + "\n"
  }

  /// Integers without a fraction (counts read better), the rest as Swift prints doubles.
  static func number(_ value: Double) -> String {
    if value.isNaN { return "NaN" }
    if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return String(value)
  }

  private static func escapeLabel(_ value: String) -> String {
    var out = ""
    for character in value {
      switch character {
      case "\\": out += "\\\\"
      case "\"": out += "\\\""
      case "\n": out += "\\n"
      default: out.append(character)
      }
    }
    return out
  }

  private static func escapeHelp(_ value: String) -> String {
    var out = ""
    for character in value {
      switch character {
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      default: out.append(character)
      }
    }
    return out
  }
}
