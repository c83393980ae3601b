import DialtoneRedis
import Testing

/// Passes time over a test's Redis keys instead of waiting for it: each key's TTL drops by the
/// time passed, and a key whose TTL runs out is deleted, as Redis would expire it. So a test of
/// what expires and what a refresh keeps does not race the wall clock (a busy machine pausing the
/// test longer than a short TTL); the real expiry is Redis's, tested by its own suite.
struct KeyClock {
  let redis: any RedisClient

  /// The keys matching `pattern` (use a `{tag}` so a Redis Cluster answers from every shard).
  func keys(_ pattern: String) throws -> [String] {
    try redis.command(["KEYS", .string(pattern)]).elements?.compactMap(\.string).sorted() ?? []
  }

  /// Each key's remaining TTL in milliseconds, as PTTL answers: -1 for a key that has none (it
  /// would never go), -2 for a key that is gone.
  func ttls(_ keys: [String]) throws -> [String: Int64] {
    let replies = try redis.pipeline(keys.map { ["PTTL", .string($0)] })
    var ttls: [String: Int64] = [:]
    for (key, reply) in zip(keys, replies) { ttls[key] = reply.integer ?? -2 }
    return ttls
  }

  /// Lets `duration` pass for `keys`. A key without a TTL is recorded as an issue: it would never
  /// expire. Keys already gone stay gone.
  func advance(_ duration: Duration, over keys: [String]) throws {
    let elapsed = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    for (key, ttl) in try ttls(keys) where ttl != -2 {
      guard ttl >= 0 else {
        Issue.record("\(key) has no expiry")
        continue
      }
      if ttl <= elapsed {
        try redis.command(["DEL", .string(key)])
      } else {
        try redis.command(["PEXPIRE", .string(key), .integer(ttl - elapsed)])
      }
    }
  }
}
