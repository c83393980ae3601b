import Foundation

/// A value behind a lock, for the few places a synchronous caller on another thread must read
/// or change state (PushKit's delegate method cannot await an actor).
public final class Locked<Value: Sendable>: @unchecked Sendable {
  // @unchecked: `value` is only touched under `lock`.
  private let lock = NSLock()
  private var value: Value

  public init(_ value: Value) { self.value = value }

  public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }

  public var current: Value { withLock { $0 } }
}
