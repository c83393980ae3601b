import DialtoneRedis

/// The ledger's steps, each one script so that no other node's step lands in the middle.
/// A session's keys are its meta hash (user, device, owner: the holder node, last: the last seq
/// stored, dropped: the last seq dropped unacknowledged, bytes: the log's size, onces), its log
/// (a sorted set scored by seq, entries "seq:bytes"), its replies (a hash) and their order (a
/// list), and its once-keys (a sorted set). `#` is a byte length in Lua. The presence and inbox
/// layouts are `ClusterPresence`'s and `NodeMailbox`'s. On one Redis `appendStep` tells the
/// holder's inbox in the same script (keys of several slots); on a Redis Cluster (`notify` '0')
/// it touches the session's slot only and hands the letter back for `notifyScript`, which runs
/// in the holder's slot (`SessionLedger+Cluster`).
extension SessionLedger {
  /// Lua shared by the steps that keep a write-behind session's letter index (`dt:session:{id}:lx`,
  /// a list of the positions of the session's letters in its holder's inbox, in inbox order), so
  /// that a resume reads the session's letters, not the whole inbox (`resumeScript`).
  private static let letterIndex = """
    -- Inbox positions ("ms-seq") in stream order (as text, "9-0" would sort after "10-0").
    local function at_or_before(a, b)
      local am, as = string.match(a, '^(%d+)-(%d+)$')
      local bm, bs = string.match(b, '^(%d+)-(%d+)$')
      if not am or not bm then return false end
      am, bm = tonumber(am), tonumber(bm)
      return am < bm or (am == bm and tonumber(as) <= tonumber(bs))
    end
    -- How many of the index's first entries are at or before `stored` (a batch stored them).
    local function stale_entries(index, stored)
      if not stored then return 0 end
      local low, high = 0, redis.call('LLEN', index)
      while low < high do
        local middle = math.floor((low + high) / 2)
        if at_or_before(redis.call('LINDEX', index, middle), stored) then low = middle + 1 else high = middle end
      end
      return low
    end
    """

  /// Lua shared by the two scripts that store frames, `appendStep` (one message, numbered by
  /// Redis) and `WriteBehindStore.batchScript` (a holder's batch): a session's log must come out
  /// of both alike, whichever of them a session is stored by (it moves between the two).
  static let sessionLog = """
    -- A key a script creates gets the session's expiry (a refresh, `touch`, renews them all).
    local function expire_new(meta, key)
      local ttl = redis.call('PTTL', meta)
      redis.call('PEXPIRE', key, ttl > 0 and ttl or 1)
    end
    -- The oldest unacknowledged frames go first past the bounds, the newest is always kept:
    -- the log of `held` frames ("seq:frame"), `bytes` of frames, trimmed to `capacity` frames
    -- and `max_bytes`. Returns the bytes and frames left and the seq of the last frame dropped
    -- (nil: none).
    local function trim_log(log, held, bytes, capacity, max_bytes)
      local dropped = nil
      while held > capacity or (bytes > max_bytes and held > 1) do
        local oldest = redis.call('ZPOPMIN', log)
        bytes = bytes - (#oldest[1] - string.find(oldest[1], ':', 1, true))
        dropped = oldest[2]
        held = held - 1
      end
      return bytes, held, dropped
    end
    """

  /// ARGV: user, device, node, expiry ms. Returns the session's epoch: one more than whatever had
  /// the id before, so that a write-behind holder of that one is refused (`WriteBehindStore`).
  static let openScript = RedisScript(
    """
    local epoch = (tonumber(redis.call('HGET', KEYS[1], 'epoch')) or 0) + 1
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], (string.gsub(KEYS[1], ':meta$', ':lx')))
    -- The fields every write-behind batch reads and writes first: a small hash is a list Redis
    -- searches from its start, field by field.
    redis.call('HSET', KEYS[1], 'epoch', epoch, 'last', 0, 'bytes', 0, 'onces', 0,
      'user', ARGV[1], 'device', ARGV[2], 'owner', ARGV[3], 'dropped', 0)
    redis.call('PEXPIRE', KEYS[1], ARGV[4])
    return epoch
    """)

  /// Stores one message for session `sid` and tells its holder; `a` are the shared arguments
  /// from ARGV index `at` on: head, tail, request id, once-key, capacity, max bytes, reply
  /// memory, once memory, inbox capacity, inbox expiry ms, notify ('1': tell the holder here;
  /// '0': a cluster, the caller does). Returns {0, seq, bytes} stored for `node` itself, {1, seq}
  /// sent to the holder, {2, seq} kept (holder dead or inbox full), {3} a duplicate once-key,
  /// {4} no such session, {5, seq, holder, bytes} stored for another holder, not told yet;
  /// for a session a live write-behind holder numbers (`wb` in its meta hash): {1, 0} sent
  /// unnumbered to its inbox.
  private static let appendStep = """
    \(letterIndex)
    \(sessionLog)
    local function shared(at)
      return {head = ARGV[at], tail = ARGV[at + 1], request = ARGV[at + 2], once = ARGV[at + 3],
        capacity = tonumber(ARGV[at + 4]), max_bytes = tonumber(ARGV[at + 5]),
        reply_memory = tonumber(ARGV[at + 6]), once_memory = tonumber(ARGV[at + 7]),
        inbox_capacity = tonumber(ARGV[at + 8]), inbox_expiry = ARGV[at + 9], notify = ARGV[at + 10]}
    end
    -- One read and one write of the meta hash per message: what a relayed message costs Redis
    -- is mostly the commands its scripts run.
    local function append_to(sid, node, a)
      local tag = 'dt:session:{' .. sid .. '}'
      local meta, log = tag .. ':meta', tag .. ':log'
      local m = redis.call('HMGET', meta, 'owner', 'last', 'bytes', 'onces', 'wb', 'lp')
      local owner = m[1]
      if not owner then return {4} end
      local update = {}
      -- A write-behind holder numbers its sessions itself (`WriteBehindShell`), and may have
      -- written its client candidates Redis does not have yet, at seqs after `last`: nobody else
      -- may number a seq there. So the message goes unnumbered into the holder's inbox, whether
      -- the holder is alive (it numbers it) or dead (whoever resumes the session numbers it after
      -- the client's own seq: `resumeHolding` reads the holder's inbox after the session's `lp`).
      local behind = m[5] == '1'
      local inbox = 'dt:inbox:{' .. owner .. '}'
      -- (The holder itself asking: it no longer numbers the session, having closed it.)
      if behind and a.notify == '1' and owner ~= node and redis.call('XLEN', inbox) < a.inbox_capacity then
        -- A copy of a stored message is refused here; the key is remembered only once a holder
        -- stores the message (`WriteBehindStore`): until then the holder that numbers letters
        -- drops a second copy itself (`WriteBehindOnces`), and a key remembered now would refuse
        -- this very message when a holder whose batch Redis refused sends it on to the session's
        -- new holder, or make the new holder drop it when it applies a dead one's letters.
        if a.once ~= '' and redis.call('ZSCORE', tag .. ':once', a.once) then return {3} end
        local id = redis.call('XADD', inbox, '*', 'm', '{"k":"unnumbered","s":"' .. sid .. '","r":' .. #a.request
          .. ',"o":' .. #a.once .. ',"h":' .. #a.head .. '}\\n' .. a.request .. a.once .. a.head .. a.tail)
        redis.call('PEXPIRE', inbox, a.inbox_expiry)
        -- Indexed for the session's resume, for as long as the inbox lives; what the holder
        -- stored (at or before `lp`) leaves the index as it grows.
        local index = tag .. ':lx'
        local indexed = redis.call('RPUSH', index, id)
        if indexed > 64 then
          local stale = stale_entries(index, m[6])
          if stale > 0 then redis.call('LTRIM', index, stale, -1) end
          -- And by count (the session's capacity, 64 at a time): a holder with the node log never
          -- moves `lp` (its batches write no session key). The newest position dropped is kept
          -- (`lxcut`): a resume whose previous holder had not stored through it resyncs.
          indexed = indexed - stale
          if indexed > a.capacity + 64 then
            redis.call('HSET', meta, 'lxcut', redis.call('LINDEX', index, indexed - a.capacity - 1))
            redis.call('LTRIM', index, indexed - a.capacity, -1)
          end
        end
        redis.call('PEXPIRE', index, a.inbox_expiry)
        if redis.call('EXISTS', 'dt:node:{' .. owner .. '}') == 1 then return {1, 0} end
        return {2, 0}
      elseif behind then
        -- Its inbox is full (or the holder itself asks): Redis numbers it after all, under a new
        -- epoch (the holder's batches are refused from now on), past every seq the holder may
        -- have written unstored (at most a quarter of the capacity: `WriteBehindHolder`'s
        -- `maxSessionFrames`, and the resume's `allowingAhead`), and a client behind that point
        -- resyncs: it may lack candidates nobody can replay, never has a seq meaning two frames.
        redis.call('HINCRBY', meta, 'epoch', 1)
        redis.call('HDEL', meta, 'wb')
        -- What is below the skip is no longer anyone's to replay: out of the log now.
        local skipped = (tonumber(m[2]) or 0) + math.floor(a.capacity / 4)
        local freed = 0
        for _, member in ipairs(redis.call('ZRANGE', log, 0, -1)) do
          freed = freed + #member - string.find(member, ':', 1, true)
        end
        redis.call('DEL', log)
        m[2], m[3] = skipped, (tonumber(m[3]) or 0) - freed
        redis.call('HSET', meta, 'last', skipped, 'dropped', skipped, 'bytes', m[3])
      end
      if a.once ~= '' then
        local onces = tag .. ':once'
        if redis.call('ZSCORE', onces, a.once) then return {3} end
        local n = (tonumber(m[4]) or 0) + 1
        redis.call('ZADD', onces, n, a.once)
        if n > a.once_memory then
          redis.call('ZREMRANGEBYRANK', onces, 0, -(a.once_memory + 1))
        elseif n == 1 then
          expire_new(meta, onces)
        end
        update[#update + 1] = 'onces'
        update[#update + 1] = n
      end
      local seq = (tonumber(m[2]) or 0) + 1
      local digits = string.format('%d', seq)
      local frame = a.head .. digits .. a.tail
      redis.call('ZADD', log, digits, digits .. ':' .. frame)
      local bytes = (tonumber(m[3]) or 0) + #frame
      local count, dropped = redis.call('ZCARD', log), nil
      bytes, count, dropped = trim_log(log, count, bytes, a.capacity, a.max_bytes)
      if dropped then
        update[#update + 1] = 'dropped'
        update[#update + 1] = dropped
      end
      redis.call('HSET', meta, 'last', digits, 'bytes', bytes, unpack(update))
      if count == 1 then expire_new(meta, log) end
      if a.request ~= '' then
        local replies, order = tag .. ':replies', tag .. ':reply-order'
        if redis.call('HSET', replies, a.request, frame) == 1 then
          local remembered = redis.call('RPUSH', order, a.request)
          while remembered > a.reply_memory do
            redis.call('HDEL', replies, redis.call('LPOP', order))
            remembered = remembered - 1
          end
          if remembered == 1 then
            expire_new(meta, replies)
            expire_new(meta, order)
          end
        end
      end
      if owner == node then return {0, seq, frame} end
      if a.notify == '0' then return {5, seq, owner, frame} end
      if redis.call('EXISTS', 'dt:node:{' .. owner .. '}') == 1 then
        local inbox = 'dt:inbox:{' .. owner .. '}'
        if redis.call('XLEN', inbox) < a.inbox_capacity then
          redis.call('XADD', inbox, '*', 'm', '{"k":"frame","q":' .. digits .. ',"s":"' .. sid .. '"}\\n' .. frame)
          redis.call('PEXPIRE', inbox, a.inbox_expiry)
          return {1, seq}
        end
      end
      return {2, seq}
    end
    """

  /// KEYS: the session's. ARGV: node, session id, then the shared arguments. Returns
  /// `appendStep`'s answer.
  static let appendScript = RedisScript(
    appendStep + """

      return append_to(ARGV[2], ARGV[1], shared(3))
      """)

  /// KEYS: the user's presence hash. ARGV: node, device ('' for every device), devices to skip
  /// (newline-separated), then the shared arguments. Returns {sessions stored, then session id,
  /// seq, bytes for each stored for `node` itself}. An entry whose session is gone is removed.
  static let deliverScript = RedisScript(
    appendStep + """

      local skip = {}
      for device in string.gmatch(ARGV[3], '[^\\n]+') do skip[device] = true end
      local a = shared(4)
      -- One device's entry is read alone: a user's hash holds every device, and a relayed
      -- message (the most frequent delivery) is for one of them.
      local entries
      if ARGV[2] == '' then
        entries = redis.call('HGETALL', KEYS[1])
      else
        local value = redis.call('HGET', KEYS[1], ARGV[2])
        entries = value and {ARGV[2], value} or {}
      end
      local out = {0}
      local stored = 0
      for i = 1, #entries, 2 do
        local device, value = entries[i], entries[i + 1]
        if (ARGV[2] == '' or device == ARGV[2]) and not skip[device] then
          local sid = string.match(value, '^[^\\n]*\\n([^\\n]*)\\n')
          if sid then
            local r = append_to(sid, ARGV[1], a)
            if r[1] == 4 then
              if redis.call('HGET', KEYS[1], device) == value then redis.call('HDEL', KEYS[1], device) end
            elseif r[1] ~= 3 then
              stored = stored + 1
              if r[1] == 0 then
                out[#out + 1] = sid
                out[#out + 1] = r[2]
                out[#out + 1] = r[3]
              end
            end
          end
        end
      end
      out[1] = stored
      return out
      """)

  /// The holder's half of a cluster append. KEYS: the holder's heartbeat key and inbox (one tag,
  /// one slot). ARGV: the letter, inbox capacity, inbox expiry ms. Returns 1 sent, 0 kept
  /// (holder dead or inbox full), as `appendStep` would have.
  static let notifyScript = RedisScript(
    """
    if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
    if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[2]) then return 0 end
    redis.call('XADD', KEYS[2], '*', 'm', ARGV[1])
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
    return 1
    """)

  /// The presence half of a cluster delivery to a session that is gone. KEYS: the user's
  /// presence hash. ARGV: device, the entry read. Removes the entry only if unchanged since.
  static let forgetScript = RedisScript(
    """
    if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
    return 0
    """)

  /// ARGV: seq. Acknowledgements come from the client: acking twice, or through a node that no
  /// longer holds the session, changes nothing more.
  static let acknowledgeScript = RedisScript(
    """
    -- No `last`: no session (one read for both questions).
    local last = redis.call('HGET', KEYS[1], 'last')
    if not last then return 0 end
    local through = math.min(tonumber(ARGV[1]), tonumber(last))
    local acked = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', through)
    if #acked == 0 then return 0 end
    local freed = 0
    for _, member in ipairs(acked) do freed = freed + #member - string.find(member, ':', 1, true) end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', through)
    redis.call('HINCRBY', KEYS[1], 'bytes', -freed)
    return #acked
    """)

  /// ARGV: user, device, last seq, node, expiry ms, how far ahead of the last seq stored the
  /// client may be (0: not at all); for a write-behind holder (`resumeHolding`, one Redis only:
  /// it reads two nodes' inboxes) '1', the session's capacity, the session id and the inbox
  /// expiry ms. Returns {0, last, epoch, count, entries..., then reply id and bytes pairs}
  /// resumed, {1} resync, {2} gone; a holder's gets {0, last, epoch, count, entries..., reply
  /// items count, reply pairs..., after, letters count, then each letter, its position and its
  /// position in the previous holder's inbox..., once-keys...}; ARGV[11] '1' (the node log): the
  /// script decides nothing from `last` (the logs may be past it: `WriteBehindLogResume` does),
  /// records `from` (the previous holder and its epoch) if unset, and returns {dropped, from,
  /// previous owner, lxcut} before the once-keys. Resuming increments the epoch: the previous holder's write-behind batches are
  /// refused from now on (`WriteBehindStore`). Without a holder the session is store-first until
  /// one claims it (`WriteBehindStore.claim`): what other nodes send it meanwhile Redis numbers,
  /// after the client's seq.
  ///
  /// A holder's resume takes the session over whole, in this one step: the letters other nodes
  /// left its previous holder (`owner`, this node or another, alive or dead) that it had not
  /// stored (its inbox after the session's `lp`: batches store it with the frames), in inbox
  /// order (found by the session's letter index, `lx`, not by reading the inbox: as many reads
  /// as letters; more than the session may hold unacknowledged, with the frames it holds, and the
  /// client resyncs, as it would under store-first), copied to the end of the resuming node's
  /// inbox (each letter's position is its
  /// copy's); the cut, the newest entry of that inbox before the copies, becomes `lp`, so that
  /// the copies are the first letters the session's next resume reads, before any that arrive
  /// later, until a batch of the new holder stores them; `after` is the newest entry after the
  /// copies (its reader's copies of letters up to there are not numbered again). `wb` is set at
  /// once, so that what other nodes send from now on goes to the new holder's inbox unnumbered,
  /// after the copies. Read in a separate step, a batch of the previous holder landing in between
  /// could not move `lp` (its epoch is old) but its reader could trim letters the resume did not
  /// read yet.
  static let resumeScript = RedisScript(
    """
    \(letterIndex)
    if redis.call('EXISTS', KEYS[1]) == 0 then return {2} end
    local meta = redis.call('HMGET', KEYS[1], 'user', 'device', 'last', 'dropped', 'owner', 'lp', 'wb', 'from',
      'epoch', 'lxcut')
    if meta[1] ~= ARGV[1] or meta[2] ~= ARGV[2] then return {2} end
    local last = tonumber(meta[3])
    local from = tonumber(ARGV[3])
    -- The node log (ARGV[11] '1'): what the previous holder stored is in its log, not here, so
    -- `last` may be old; the resumer decides replay, going on or resync once it took the log
    -- (`WriteBehindLogResume`). Only `dropped` is final here.
    local logged = ARGV[11] == '1'
    if from < tonumber(meta[4]) then return {1} end
    if not logged and from > last + (tonumber(ARGV[6]) or 0) then return {1} end
    -- Letters the session's index lost by count (`lxcut`, the newest position it dropped) that
    -- no batch stored (the batch script's `lp` is before it) are lost: the client resyncs. The
    -- log's resumer checks them against the take's `lp` instead.
    if not logged and meta[10] and not at_or_before(meta[10], meta[6] or '0-0') then return {1} end
    local acked = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', from)
    if #acked > 0 then
      local freed = 0
      for _, member in ipairs(acked) do freed = freed + #member - string.find(member, ':', 1, true) end
      redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', from)
      redis.call('HINCRBY', KEYS[1], 'bytes', -freed)
    end
    if from > last and not logged then
      -- Its write-behind holder wrote candidates it had not stored, and died: the client has them,
      -- so the session goes on from the client's seq; below it nothing can be replayed any more.
      redis.call('HSET', KEYS[1], 'last', from, 'dropped', from)
      last = from
    end
    local pending = redis.call('ZRANGE', KEYS[2], 0, -1)
    if not logged and #pending ~= last - from then return {1} end
    local holding = ARGV[7] == '1'
    local letters, after = {}, nil
    if holding then
      local mine = 'dt:inbox:{' .. ARGV[4] .. '}'
      local newest = redis.call('XREVRANGE', mine, '+', '-', 'COUNT', 1)
      local cut = newest[1] and newest[1][1] or '0-0'
      after = cut
      local index = (string.gsub(KEYS[1], ':meta$', ':lx'))
      if meta[5] then
        local prefix = '{"k":"unnumbered","s":"' .. ARGV[9] .. '",'
        -- The session's letters after `lp`, by its index: as many reads as letters, however long
        -- the previous holder's inbox. More than the session may hold unacknowledged, with what
        -- it holds already, would have been dropped under store-first: the client resyncs.
        local stale = stale_entries(index, meta[6])
        local waiting = redis.call('LLEN', index) - stale
        if not logged and waiting + #pending > tonumber(ARGV[8]) then return {1} end
        local inbox = 'dt:inbox:{' .. meta[5] .. '}'
        local entries = {}
        for _, id in ipairs(redis.call('LRANGE', index, stale, -1)) do
          local found = redis.call('XRANGE', inbox, id, id)
          if found[1] then entries[#entries + 1] = found[1] end
        end
        -- Copied, in order, to the end of this node's inbox, right after the cut and before
        -- anything that arrives later: the letters are then where the session's next resume
        -- reads them (after `lp`, the cut) even if this node does not hold the session after all
        -- (its lease lapsed meanwhile) or dies before its batch stores them, whereas the previous
        -- holder lets its copies go now that the session is another's (or `lp` is past them).
        for _, entry in ipairs(entries) do
          local payload = entry[2][2]
          if string.sub(payload, 1, #prefix) == prefix then
            after = redis.call('XADD', mine, '*', 'm', payload)
            letters[#letters + 1] = payload
            letters[#letters + 1] = after
            letters[#letters + 1] = entry[1]
          end
        end
        if #letters > 0 then redis.call('PEXPIRE', mine, ARGV[10]) end
      end
      -- The index now lists the copies, in this node's inbox.
      redis.call('DEL', index)
      for i = 2, #letters, 3 do redis.call('RPUSH', index, letters[i]) end
      if #letters > 0 then redis.call('PEXPIRE', index, ARGV[10]) end
      redis.call('HSET', KEYS[1], 'owner', ARGV[4], 'wb', '1', 'lp', cut)
      redis.call('HDEL', KEYS[1], 'lxcut')
      -- The holder whose log still holds what no later holder re-stored (`from`: node and epoch),
      -- recorded by the first resume after it held the session and cleared by the resumer once
      -- its own log holds what it took (`SessionLedger.settleLogged`).
      if logged and not meta[8] and meta[7] == '1' and meta[5] then
        meta[8] = meta[5] .. ' ' .. (meta[9] or '0')
        redis.call('HSET', KEYS[1], 'from', meta[8])
      end
    else
      redis.call('HSET', KEYS[1], 'owner', ARGV[4])
      redis.call('HDEL', KEYS[1], 'wb')
      redis.call('DEL', (string.gsub(KEYS[1], ':meta$', ':lx')))
    end
    local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
    for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ARGV[5]) end
    local reply = {0, last, epoch, #pending}
    for _, member in ipairs(pending) do reply[#reply + 1] = member end
    local replies = redis.call('HGETALL', KEYS[3])
    if holding then reply[#reply + 1] = #replies end
    for _, item in ipairs(replies) do reply[#reply + 1] = item end
    if holding then
      reply[#reply + 1] = after
      reply[#reply + 1] = #letters / 3
      for _, item in ipairs(letters) do reply[#reply + 1] = item end
      if logged then
        -- The log's resumer's own part: {dropped, from ('' none), previous owner ('' none),
        -- lxcut ('' none)}, before the once-keys.
        reply[#reply + 1] = meta[4] or '0'
        reply[#reply + 1] = meta[8] or ''
        reply[#reply + 1] = meta[5] or ''
        reply[#reply + 1] = meta[10] or ''
      end
      for _, key in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do reply[#reply + 1] = key end
    end
    return reply
    """)

  /// ARGV: seq. Returns {0, entries after it...}, {1} some were dropped, {2} gone.
  static let rangeScript = RedisScript(
    """
    if redis.call('EXISTS', KEYS[1]) == 0 then return {2} end
    local meta = redis.call('HMGET', KEYS[1], 'last', 'dropped')
    local after = tonumber(ARGV[1])
    if after < tonumber(meta[2]) then return {1} end
    local entries = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf')
    if #entries ~= tonumber(meta[1]) - after then return {1} end
    local reply = {0}
    for _, member in ipairs(entries) do reply[#reply + 1] = member end
    return reply
    """)

  /// Returns the holder, or nil for no session. 2^53 - 1 is above any seq a session reaches.
  static let poisonScript = RedisScript(
    """
    if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
    redis.call('HSET', KEYS[1], 'dropped', '9007199254740991')
    return redis.call('HGET', KEYS[1], 'owner')
    """)

  /// ARGV: node. Deletes the session only while that node holds it. Returns 1 when it did.
  static let endScript = RedisScript(
    """
    if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], (string.gsub(KEYS[1], ':meta$', ':lx')))
    return 1
    """)
}
