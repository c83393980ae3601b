import DialtoneRedis

/// One node owns each live call: it runs the call's state machine and fires its ring timeouts
/// and grace windows, so each fires exactly once in the cluster. Ownership is a lease the owner
/// renews; when the owner dies the lease expires and another node claims the call (its timers
/// with it) instead of two nodes both firing them.
///
/// Blocking calls: run them off the cooperative pool.
public final class CallOwnership: Sendable {
  private let redis: RedisConnection
  /// How long a claim holds without renewal: the longest a dead owner's calls wait for a new one.
  public let leaseDuration: Duration

  public init(_ redis: RedisConnection, leaseDuration: Duration) {
    self.redis = redis
    self.leaseDuration = leaseDuration
  }

  /// Takes the call for `node` if nobody holds it: whether `node` holds it now (true also when it
  /// already did, renewing the lease).
  public func claim(_ callId: String, for node: String) throws(RedisError) -> Bool {
    let key = Self.key(callId)
    if try redis.acquireLease(key, holder: .string(node), duration: leaseDuration) { return true }
    return try redis.extendLease(key, holder: .string(node), duration: leaseDuration)
  }

  /// Renews the leases `node` holds; the calls it lost (taken over after a pause longer than the
  /// lease) come back so that it stops running them.
  public func renew(_ callIds: [String], for node: String) throws(RedisError) -> [String] {
    var lost: [String] = []
    for callId in callIds where try !redis.extendLease(Self.key(callId), holder: .string(node), duration: leaseDuration)
    {
      lost.append(callId)
    }
    return lost
  }

  /// The call ended or its node is draining: another node may claim it at once.
  @discardableResult
  public func release(_ callId: String, by node: String) throws(RedisError) -> Bool {
    try redis.releaseLease(Self.key(callId), holder: .string(node))
  }

  /// The node running the call, if any holds it.
  public func owner(of callId: String) throws(RedisError) -> String? {
    try redis.get(Self.key(callId)).map { String(decoding: $0, as: UTF8.self) }
  }

  static func key(_ callId: String) -> RedisArgument { .string("dt:call-owner:{\(callId)}") }
}
