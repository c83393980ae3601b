/// Quantiles of sorted values, interpolated between the two nearest ranks.
package enum Quantile {
  package static func of(_ sorted: [Double], _ q: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let position = Double(sorted.count - 1) * min(max(q, 0), 1)
    let low = Int(position.rounded(.down))
    let high = min(low + 1, sorted.count - 1)
    return sorted[low] + (sorted[high] - sorted[low]) * (position - Double(low))
  }
}
