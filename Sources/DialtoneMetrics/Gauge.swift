import DialtoneSupport

/// A value that is set to what something is now (Prometheus `gauge`).
public final class Gauge: Sendable {
  private let value = Locked<Double>(0)

  init() {}

  public func set(_ newValue: Double) { value.withLock { $0 = newValue } }
  public func set(_ newValue: Int) { set(Double(newValue)) }
  public func add(_ amount: Double) { value.withLock { $0 += amount } }

  public var current: Double { value.current }
}
