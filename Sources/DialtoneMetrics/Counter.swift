import DialtoneSupport

/// A value that only goes up (Prometheus `counter`); its family's name ends in `_total`.
public final class Counter: Sendable {
  private let value = Locked<Double>(0)

  init() {}

  public func increment(by amount: Double = 1) {
    guard amount > 0, amount.isFinite else { return }
    value.withLock { $0 += amount }
  }

  public var current: Double { value.current }
}
