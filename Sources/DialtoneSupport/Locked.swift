import Foundation

/// A value behind a lock, for state that synchronous callers on several threads share (PushKit's
/// delegate method cannot await an actor; the network thread cannot either), or a resource that
/// is not thread-safe (a database connection) used by one thread at a time. The project's one
/// lock: no raw `NSLock` beside it.
///
/// Like the standard library's `Mutex`, the value need not be `Sendable`: it is only reached
/// under the lock. What a body returns must not keep a reference into a non-`Sendable` value.
public final class Locked<Value>: @unchecked Sendable {
  // @unchecked: `value` is only touched under `lock`.
  @usableFromInline let lock = NSLock()
  @usableFromInline var value: Value

  public init(_ value: Value) { self.value = value }

  /// Inlinable so callers on hot paths (the network loop's inbox) get it specialised, without
  /// a call into this module per message.
  @inlinable
  public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure)
    -> Result
  {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }

  @inlinable
  public var current: Value { withLock { $0 } }
}

extension Locked where Value == Void {
  public convenience init() { self.init(()) }

  /// Runs `body` alone (for code whose shared state lives elsewhere, a C handle's calls).
  @inlinable
  public func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
    try withLock { (_: inout Void) throws(Failure) in try body() }
  }
}
