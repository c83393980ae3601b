import DialtoneRedis

/// The ledger's steps, each one script so that no other node's step lands in the middle.
/// KEYS are always the session's meta hash, its log (a sorted set scored by seq), its replies
/// (a hash) and their order (a list). Entries are "seq:bytes"; `#` is a byte length in Lua.
extension SessionLedger {
  /// ARGV: user, device, node, expiry ms.
  static let openScript = RedisScript(
    """
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
    redis.call('HSET', KEYS[1], 'user', ARGV[1], 'device', ARGV[2], 'owner', ARGV[3],
      'epoch', 1, 'last', 0, 'dropped', 0, 'bytes', 0)
    redis.call('PEXPIRE', KEYS[1], ARGV[4])
    return 1
    """)

  /// ARGV: epoch, seq, message, capacity, max bytes, expiry ms.
  /// Returns {0, count} stored, {1, 0} fenced, {2, last} out of order, {3, 0} gone.
  static let appendScript = RedisScript(
    """
    if redis.call('EXISTS', KEYS[1]) == 0 then return {3, 0} end
    local meta = redis.call('HMGET', KEYS[1], 'epoch', 'last', 'bytes')
    if tonumber(meta[1]) ~= tonumber(ARGV[1]) then return {1, 0} end
    local last = tonumber(meta[2])
    local seq = tonumber(ARGV[2])
    if seq ~= last + 1 then return {2, last} end
    redis.call('ZADD', KEYS[2], seq, ARGV[2] .. ':' .. ARGV[3])
    local bytes = tonumber(meta[3]) + #ARGV[3]
    local count = redis.call('ZCARD', KEYS[2])
    local dropped = false
    while count > tonumber(ARGV[4]) or (bytes > tonumber(ARGV[5]) and count > 1) do
      local oldest = redis.call('ZPOPMIN', KEYS[2])
      bytes = bytes - (#oldest[1] - string.find(oldest[1], ':', 1, true))
      dropped = oldest[2]
      count = count - 1
    end
    redis.call('HSET', KEYS[1], 'last', ARGV[2], 'bytes', bytes)
    if dropped then redis.call('HSET', KEYS[1], 'dropped', dropped) end
    redis.call('PEXPIRE', KEYS[1], ARGV[6])
    redis.call('PEXPIRE', KEYS[2], ARGV[6])
    return {0, count}
    """)

  /// ARGV: seq. Acknowledgements come from the client, so they are not fenced: acking twice,
  /// or through a node that lost the session, changes nothing more.
  static let acknowledgeScript = RedisScript(
    """
    if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
    local through = math.min(tonumber(ARGV[1]), tonumber(redis.call('HGET', KEYS[1], 'last')))
    local acked = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', through)
    if #acked == 0 then return 0 end
    local freed = 0
    for _, member in ipairs(acked) do freed = freed + #member - string.find(member, ':', 1, true) end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', through)
    redis.call('HINCRBY', KEYS[1], 'bytes', -freed)
    return #acked
    """)

  /// ARGV: user, device, last seq, node, expiry ms.
  /// Returns {0, epoch, last, entries...} resumed, {1} resync, {2} gone.
  static let resumeScript = RedisScript(
    """
    if redis.call('EXISTS', KEYS[1]) == 0 then return {2} end
    local meta = redis.call('HMGET', KEYS[1], 'user', 'device', 'last', 'dropped')
    if meta[1] ~= ARGV[1] or meta[2] ~= ARGV[2] then return {2} end
    local last = tonumber(meta[3])
    local from = tonumber(ARGV[3])
    if from < tonumber(meta[4]) or from > last then return {1} end
    local acked = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', from)
    if #acked > 0 then
      local freed = 0
      for _, member in ipairs(acked) do freed = freed + #member - string.find(member, ':', 1, true) end
      redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', from)
      redis.call('HINCRBY', KEYS[1], 'bytes', -freed)
    end
    local pending = redis.call('ZRANGE', KEYS[2], 0, -1)
    if #pending ~= last - from then return {1} end
    local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
    redis.call('HSET', KEYS[1], 'owner', ARGV[4])
    for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[5]) end
    local reply = {0, epoch, last}
    for _, member in ipairs(pending) do reply[#reply + 1] = member end
    return reply
    """)

  /// ARGV: epoch, request id, reply, memory, expiry ms. Returns 1 stored, 0 fenced or gone.
  static let rememberScript = RedisScript(
    """
    if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
    if tonumber(redis.call('HGET', KEYS[1], 'epoch')) ~= tonumber(ARGV[1]) then return 0 end
    if redis.call('HSET', KEYS[3], ARGV[2], ARGV[3]) == 1 then
      redis.call('RPUSH', KEYS[4], ARGV[2])
      while redis.call('LLEN', KEYS[4]) > tonumber(ARGV[4]) do
        redis.call('HDEL', KEYS[3], redis.call('LPOP', KEYS[4]))
      end
    end
    redis.call('PEXPIRE', KEYS[3], ARGV[5])
    redis.call('PEXPIRE', KEYS[4], ARGV[5])
    return 1
    """)
}
