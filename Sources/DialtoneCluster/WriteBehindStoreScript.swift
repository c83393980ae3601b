import DialtoneRedis

/// The batch script. It writes the same layout as `SessionLedger`'s `appendStep` (the log a
/// sorted set of "seq:frame", `last`, `bytes` and `dropped` in the meta hash, the replies and
/// their order), so that today's `resume`, `range` and `acknowledge` read what batches stored,
/// and a session moves between store-first and write-behind without a migration.
extension WriteBehindStore {
  /// KEYS: per session its meta, log, replies, reply order and once-keys (`SessionLedger.Keys`,
  /// in that order). ARGV: capacity, max bytes, reply memory, once memory; then per session its
  /// epoch, frame count and last letter's inbox position ('' for none), then per frame its seq,
  /// bytes, request id and once-key ('' for none).
  /// Returns {session number (1-based), refusal code, ...}: 1 superseded, 2 gap, 3 gone.
  static let batchScript = RedisScript(
    """
    local capacity, max_bytes, reply_memory = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
    local once_memory = tonumber(ARGV[4])
    \(SessionLedger.sessionLog)
    local refused = {}
    local at = 5
    for i = 1, #KEYS / 5 do
      local meta, log, replies, order = KEYS[5 * i - 4], KEYS[5 * i - 3], KEYS[5 * i - 2], KEYS[5 * i - 1]
      local onces = KEYS[5 * i]
      local epoch, count, letter = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2]
      local first = at + 3
      at = first + 4 * count
      local m = redis.call('HMGET', meta, 'epoch', 'last', 'bytes', 'onces')
      local code = nil
      local last = tonumber(m[2])
      local from = nil
      if not last then
        code = 3
      elseif m[1] ~= epoch then
        code = 1
      else
        -- Seqs at or below `last` under this epoch were stored by an earlier try of this batch
        -- (its reply was lost): only this holder numbers under its epoch, so they are the same.
        local expect = last + 1
        for f = 0, count - 1 do
          local seq = tonumber(ARGV[first + 4 * f])
          if seq > last then
            if seq ~= expect then
              code = 2
              break
            end
            expect = expect + 1
            from = from or f
          end
        end
      end
      if code then
        refused[#refused + 1] = i
        refused[#refused + 1] = code
      elseif from then
        local bytes = tonumber(m[3]) or 0
        local once_count = tonumber(m[4]) or 0
        local digits
        -- One ZADD for the session's frames: what a batch costs Redis is mostly its calls.
        local entries = {}
        for f = from, count - 1 do
          digits = ARGV[first + 4 * f]
          local frame, request, once = ARGV[first + 4 * f + 1], ARGV[first + 4 * f + 2], ARGV[first + 4 * f + 3]
          -- Its once-key: a copy another node sends later is refused, and the session's next
          -- holder loads it (`claim`).
          if once ~= '' then
            once_count = once_count + 1
            redis.call('ZADD', onces, once_count, once)
            if once_count == 1 then expire_new(meta, onces) end
            if once_count > once_memory then redis.call('ZREMRANGEBYRANK', onces, 0, -(once_memory + 1)) end
          end
          entries[#entries + 1] = digits
          entries[#entries + 1] = digits .. ':' .. frame
          -- unpack's arguments live on Lua's C stack (about 8,000): flush well before.
          if #entries >= 1000 then
            redis.call('ZADD', log, unpack(entries))
            entries = {}
          end
          bytes = bytes + #frame
          if request ~= '' and redis.call('HSET', replies, request, frame) == 1 then
            local remembered = redis.call('RPUSH', order, request)
            if remembered == 1 then
              expire_new(meta, replies)
              expire_new(meta, order)
            end
            while remembered > reply_memory do
              redis.call('HDEL', replies, redis.call('LPOP', order))
              remembered = remembered - 1
            end
          end
        end
        if #entries > 0 then redis.call('ZADD', log, unpack(entries)) end
        local held = redis.call('ZCARD', log)
        -- Only this batch's frames in the log: it was created now.
        if held == count - from then expire_new(meta, log) end
        -- Bounded as with `appendStep`.
        local dropped
        bytes, held, dropped = trim_log(log, held, bytes, capacity, max_bytes)
        -- Its last letter's position, with its frames: a resume applies the letters after it
        -- (`SessionLedger.resumeHolding`), and only these are stored.
        local update = {'last', digits, 'bytes', bytes, 'onces', once_count}
        if dropped then
          update[#update + 1] = 'dropped'
          update[#update + 1] = dropped
        end
        if letter ~= '' then
          update[#update + 1] = 'lp'
          update[#update + 1] = letter
        end
        redis.call('HSET', meta, unpack(update))
      end
    end
    return refused
    """)
}
