import Foundation

/// A value behind a lock, for state that synchronous callers on several threads share (PushKit's
/// delegate method cannot await an actor; the network thread cannot either).
public final class Locked<Value: Sendable>: @unchecked Sendable {
  // @unchecked: `value` is only touched under `lock`.
  @usableFromInline let lock = NSLock()
  @usableFromInline var value: Value

  public init(_ value: Value) { self.value = value }

  /// Inlinable so callers on hot paths (the network loop's inbox) get it specialised, without
  /// a call into this module per message.
  @inlinable
  public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }

  @inlinable
  public var current: Value { withLock { $0 } }
}
