import DialtoneRedis

/// The batch script. It writes the same layout as `SessionLedger`'s `appendStep` (the log a
/// sorted set of "seq:frame", `last`, `bytes` and `dropped` in the meta hash, the replies and
/// their order), so that today's `resume`, `range` and `acknowledge` read what batches stored,
/// and a session moves between store-first and write-behind without a migration.
extension WriteBehindStore {
  /// KEYS: per session its meta hash (`SessionLedger.Keys.meta`); its other keys share its hash
  /// tag and are named from it here, on the one Redis a batch runs on. ARGV: capacity, max
  /// bytes, reply memory, once memory; then per session its epoch, frame count, last letter's
  /// inbox position ('' for none) and first frame's seq (the frames' seqs follow it), then per
  /// frame its log entry ("seq:frame"), request id and once-key ('' for none).
  /// Returns {session number (1-based), refusal code, ...}: 1 superseded, 2 gap, 3 gone.
  ///
  /// What a batch costs Redis is mostly the commands it runs, then the arguments it receives
  /// (docs/benchmarks.md, "Item 4, eleventh step"): per session one read and one write of the
  /// meta hash, one `ZADD` of the log, one of the once-keys and a `ZCARD`; one key and four
  /// arguments per session, three per frame.
  static let batchScript = RedisScript(
    """
    local capacity, max_bytes, reply_memory = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
    local once_memory = tonumber(ARGV[4])
    \(SessionLedger.sessionLog)
    local refused = {}
    local at = 5
    for i = 1, #KEYS do
      local meta = KEYS[i]
      local epoch, count, letter, first = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2], tonumber(ARGV[at + 3])
      local base = at + 4
      at = base + 3 * count
      local m = redis.call('HMGET', meta, 'epoch', 'last', 'bytes', 'onces')
      local last = tonumber(m[2])
      local code = nil
      if not last then
        code = 3
      elseif m[1] ~= epoch then
        code = 1
      elseif first > last + 1 then
        code = 2
      end
      -- Seqs at or below `last` under this epoch were stored by an earlier try of this batch
      -- (its reply was lost): only this holder numbers under its epoch, so they are the same.
      local from = code and count or math.max(0, last + 1 - first)
      if code then
        refused[#refused + 1] = i
        refused[#refused + 1] = code
      elseif from < count then
        local tag = string.sub(meta, 1, -6)
        local log, onces = tag .. ':log', tag .. ':once'
        local bytes = tonumber(m[3]) or 0
        local once_count = tonumber(m[4]) or 0
        local onces_before = once_count
        local entries, once_entries = {}, {}
        local digits
        local added = 0
        for f = from, count - 1 do
          local entry, request, once = ARGV[base + 3 * f], ARGV[base + 3 * f + 1], ARGV[base + 3 * f + 2]
          local colon = string.find(entry, ':', 1, true)
          digits = string.sub(entry, 1, colon - 1)
          -- Its once-key: a copy another node sends later is refused, and the session's next
          -- holder loads it (`claim`).
          if once ~= '' then
            once_count = once_count + 1
            once_entries[#once_entries + 1] = once_count
            once_entries[#once_entries + 1] = once
          end
          entries[#entries + 1] = digits
          entries[#entries + 1] = entry
          -- unpack's arguments live on Lua's C stack (about 8,000): flush well before.
          if #entries >= 1000 then
            added = added + redis.call('ZADD', log, unpack(entries))
            entries = {}
          end
          if #once_entries >= 1000 then
            redis.call('ZADD', onces, unpack(once_entries))
            once_entries = {}
          end
          bytes = bytes + #entry - colon
          if request ~= '' then
            local replies = tag .. ':replies'
            if redis.call('HSET', replies, request, string.sub(entry, colon + 1)) == 1 then
              local order = tag .. ':reply-order'
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
        end
        if #entries > 0 then added = added + redis.call('ZADD', log, unpack(entries)) end
        if once_count > onces_before then
          if #once_entries > 0 then redis.call('ZADD', onces, unpack(once_entries)) end
          if onces_before == 0 then expire_new(meta, onces) end
          if once_count > once_memory then redis.call('ZREMRANGEBYRANK', onces, 0, -(once_memory + 1)) end
        end
        local held = redis.call('ZCARD', log)
        -- Only this batch's frames in the log: it was created now.
        if held == added then expire_new(meta, log) end
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
