import DialtoneRedis

/// The effects that must happen once in the cluster whichever node notices first: a push per
/// device per ring, a missed-call alert, one accept winning. The first node to mark an effect
/// does it; the mark outlives any node that could still race for it and then expires.
///
/// Blocking calls: run them off the cooperative pool.
public final class EffectOnce: Sendable {
  private let redis: any RedisClient
  /// Longer than any window in which two nodes could both notice the same effect.
  public let memory: Duration

  public init(_ redis: any RedisClient, memory: Duration) {
    self.redis = redis
    self.memory = memory
  }

  /// Whether `node` is the first to claim `effect` (and so the one that performs it).
  public func first(_ effect: String, by node: String) throws(RedisError) -> Bool {
    try redis.set(Self.key(effect), .string(node), expiresIn: memory, onlyIfAbsent: true)
  }

  /// Which node claimed the effect, while it is remembered.
  public func claimant(of effect: String) throws(RedisError) -> String? {
    try redis.get(Self.key(effect)).map { String(decoding: $0, as: UTF8.self) }
  }

  /// The key of a push for one device in one ring of a call (a re-ring is another ring).
  public static func push(callId: String, userId: String, deviceId: String, ring: Int) -> String {
    "push:" + [callId, String(ring), userId, deviceId].map { "\($0.utf8.count):\($0)" }.joined()
  }

  static func key(_ effect: String) -> RedisArgument { .string("dt:once:{\(effect)}") }
}
