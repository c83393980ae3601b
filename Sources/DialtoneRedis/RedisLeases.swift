/// A lease is a key whose value names its holder and which expires unless renewed: the call's
/// owner node holds its timers under one. Only the holder may extend or release it, checked and
/// done in one script so that a lease taken over meanwhile is never touched.
extension RedisConnection {
  static let extendLeaseScript = RedisScript(
    """
    if redis.call('GET', KEYS[1]) == ARGV[1] then
      return redis.call('PEXPIRE', KEYS[1], ARGV[2])
    end
    return 0
    """)

  static let releaseLeaseScript = RedisScript(
    """
    if redis.call('GET', KEYS[1]) == ARGV[1] then
      return redis.call('DEL', KEYS[1])
    end
    return 0
    """)
}

extension RedisClient {
  /// Takes the lease when nobody holds it: whether `holder` now does.
  public func acquireLease(_ key: RedisArgument, holder: RedisArgument, duration: Duration) throws(RedisError) -> Bool {
    try set(key, holder, expiresIn: duration, onlyIfAbsent: true)
  }

  /// Renews the lease for `duration` from now if `holder` still holds it: whether it did.
  public func extendLease(_ key: RedisArgument, holder: RedisArgument, duration: Duration) throws(RedisError) -> Bool {
    let reply = try eval(
      RedisConnection.extendLeaseScript, keys: [key],
      arguments: [holder, try .milliseconds(duration)])
    guard let value = reply.integer else { throw .unexpectedReply(reply) }
    return value == 1
  }

  /// Deletes the lease if `holder` still holds it: whether it did.
  public func releaseLease(_ key: RedisArgument, holder: RedisArgument) throws(RedisError) -> Bool {
    let reply = try eval(RedisConnection.releaseLeaseScript, keys: [key], arguments: [holder])
    guard let value = reply.integer else { throw .unexpectedReply(reply) }
    return value == 1
  }
}
