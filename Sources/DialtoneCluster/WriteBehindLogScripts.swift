import DialtoneRedis

/// The node log's scripts (docs/architecture.md, write-behind point 7). Each runs on one stripe's
/// four keys, which share its hash tag (one slot of a Redis Cluster): the log (a list of entries,
/// `WriteBehindLogEntry`), its fence (a hash: `gen`, counting takes; `head`, the absolute number
/// of the log's first entry; `hold`, the first entry a taker may still need; and a marker
/// `t:<session>` = the taker's epoch per session taken and not yet released), its checkpoints (a
/// hash: per session what its trimmed entries held, "last lp", written by the holder's trim) and
/// its trimmed once-keys (a list of blobs the holder packs, the newest few trims' worth).
///
/// What a batch costs Redis is the calls it makes (docs/benchmarks.md, "Item 4, eleventh step"):
/// an append makes two whatever the batch holds, a trim about eight a stripe.
extension WriteBehindLog {
  /// The refusal of a holder whose take count is old: {0, gen, then each session taken and not
  /// yet released and its taker's epoch}. Rare (a take since the holder's last refusal): the
  /// fence is read whole.
  ///
  /// A taker's marker is `t:<session>` until it releases the session, then `r:<session>` until
  /// the holder has been told: a refusal lists both, and the holder's first append under the new
  /// count (which it learns only from a refusal, that listed them) clears the `r:` markers
  /// (`rel` says some are there). Without the `r:` marker a taker that released before the
  /// holder's next append would leave the holder never knowing its session was taken.
  static let takenSince = """
    local function taken_since(fence_key, gen)
      local refused = {0, gen or '0'}
      local fence = redis.call('HGETALL', fence_key)
      for i = 1, #fence, 2 do
        local kind = string.sub(fence[i], 1, 2)
        if kind == 't:' or kind == 'r:' then
          refused[#refused + 1] = string.sub(fence[i], 3)
          refused[#refused + 1] = fence[i + 1]
        end
      end
      return refused
    end
    """

  /// KEYS: log, fence. ARGV: the take count (`gen`) the holder knows, the entry, the expiry ms.
  /// Returns {1, the entry's absolute number} appended, or {0, gen, session, epoch, ...}:
  /// refused, sessions were taken since `gen` (the holder drops them and appends again).
  static let appendScript = RedisScript(
    """
    \(takenSince)
    local f = redis.call('HMGET', KEYS[2], 'gen', 'head', 'rel')
    if (f[1] or '0') ~= ARGV[1] then return taken_since(KEYS[2], f[1]) end
    if f[3] then
      -- The holder knows this count from a refusal that listed the released takes: they go.
      for _, field in ipairs(redis.call('HKEYS', KEYS[2])) do
        if string.sub(field, 1, 2) == 'r:' then redis.call('HDEL', KEYS[2], field) end
      end
      redis.call('HDEL', KEYS[2], 'rel')
    end
    local length = redis.call('RPUSH', KEYS[1], ARGV[2])
    if length == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
    return {1, (tonumber(f[2]) or 0) + length - 1}
    """)

  /// KEYS: log, fence, checkpoints, once-keys. ARGV: the take count the holder knows, the
  /// absolute number of the first entry to keep, the expiry ms, how many once-key blobs to keep,
  /// this trim's once-key blob ('' for none), then session and checkpoint pairs. Never trims at
  /// or past `hold` (a taker's entries), nor past the log's end. Returns {1, head}, or refused as `appendScript` is.
  static let trimScript = RedisScript(
    """
    \(takenSince)
    local f = redis.call('HMGET', KEYS[2], 'gen', 'head', 'hold')
    if (f[1] or '0') ~= ARGV[1] then return taken_since(KEYS[2], f[1]) end
    local head = tonumber(f[2]) or 0
    local keep = tonumber(ARGV[2])
    if f[3] then keep = math.min(keep, tonumber(f[3])) end
    -- Never past the log's end: entry numbers go on from `head` plus the length.
    if keep > head then keep = math.min(keep, head + redis.call('LLEN', KEYS[1])) end
    if keep > head then
      redis.call('LTRIM', KEYS[1], keep - head, -1)
      head = keep
      redis.call('HSET', KEYS[2], 'head', head)
    end
    if #ARGV > 5 then redis.call('HSET', KEYS[3], unpack(ARGV, 6)) end
    if ARGV[5] ~= '' then
      redis.call('RPUSH', KEYS[4], ARGV[5])
      redis.call('LTRIM', KEYS[4], -tonumber(ARGV[4]), -1)
    end
    for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
    return {1, head}
    """)

  /// KEYS: log, fence, checkpoints, once-keys. ARGV: session, the taker's epoch (the session's
  /// meta moved to it first), the expiry ms. Records the take (the holder's appends are refused
  /// until it drops the session, its trims keep every entry from here until the taker releases
  /// it) and reads, in the same step, everything the holder stored: returns {1, head, the
  /// session's checkpoint ('' none), {once-key blobs}, {entries}}, or {0, epoch} refused: a taker
  /// at this or a later epoch took it already.
  static let takeScript = RedisScript(
    """
    local marker = 't:' .. ARGV[1]
    local f = redis.call('HMGET', KEYS[2], 'gen', 'head', 'hold', marker, 'r:' .. ARGV[1])
    -- A taker at this or a later epoch, releasing or released: this take is superseded.
    local prior = math.max(tonumber(f[4]) or 0, tonumber(f[5]) or 0)
    if prior >= tonumber(ARGV[2]) then return {0, tostring(prior)} end
    if f[5] then redis.call('HDEL', KEYS[2], 'r:' .. ARGV[1]) end
    local head = tonumber(f[2]) or 0
    local hold = head
    if f[3] then hold = math.min(hold, tonumber(f[3])) end
    redis.call('HSET', KEYS[2], 'gen', (tonumber(f[1]) or 0) + 1, 'head', head, 'hold', hold, marker, ARGV[2])
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
    local checkpoint = redis.call('HGET', KEYS[3], ARGV[1]) or ''
    return {1, head, checkpoint, redis.call('LRANGE', KEYS[4], 0, -1), redis.call('LRANGE', KEYS[1], 0, -1)}
    """)

  /// KEYS: fence, checkpoints. ARGV: session, epoch. Lets a session's entries go: by its taker
  /// once its own log holds what it took, or by the holder once the session ended. A marker of a
  /// later taker stays; the released one becomes `r:` (`takenSince`). Returns 1, or 0 when a
  /// later taker's marker is there.
  static let releaseScript = RedisScript(
    """
    local marker = 't:' .. ARGV[1]
    local taken = redis.call('HGET', KEYS[1], marker)
    if taken and tonumber(taken) > tonumber(ARGV[2]) then return 0 end
    if taken then
      -- Released, but kept as `r:` until the holder has been told (`takenSince`).
      redis.call('HDEL', KEYS[1], marker)
      redis.call('HSET', KEYS[1], 'r:' .. ARGV[1], taken, 'rel', 1)
    end
    redis.call('HDEL', KEYS[2], ARGV[1])
    for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
      if string.sub(field, 1, 2) == 't:' then return 1 end
    end
    redis.call('HDEL', KEYS[1], 'hold')
    return 1
    """)
}
