import DialtoneRedis

/// A write-behind node's resume (docs/architecture.md, write-behind, point 5): the session is
/// taken over whole in one script, with the letters its previous holder had not stored.
extension SessionLedger {
  /// What a write-behind node resumes a session with.
  package struct HeldResumption: Sendable, Equatable {
    /// As `Resumption.resumed`: the last seq stored (numbering goes on after it), the epoch won,
    /// the frames to replay and the remembered answers.
    package let lastSeq: UInt64
    package let epoch: UInt64
    package let pending: [Stored]
    package let replies: [String: [UInt8]]
    /// The letters other nodes left the previous holder (this node or another, alive or dead)
    /// that it had not stored, in inbox order: numbered before anything new.
    package let letters: [UnnumberedLetter]
    /// Where each of `letters` is now (one each): the resume copied them to the end of this
    /// node's inbox, where the session's next resume reads them until a batch stores them.
    package let positions: [String]
    /// Where each of `letters` was read, in the previous holder's inbox (one each).
    package let origins: [String]
    /// The newest entry of this node's inbox after the resume (the last copy, if any): its
    /// reader's copies of letters up to there are among `letters` or stored already.
    package let lettersAfter: String
    /// The once-keys of the frames stored (`WriteBehindStore.claim`).
    package let onces: [String]
    /// With the node log (`logged`): what the resumer needs to take the session from the logs
    /// that hold it (`WriteBehindLogResume`); nil without.
    package let logged: Logged?

    package init(
      lastSeq: UInt64, epoch: UInt64, pending: [Stored], replies: [String: [UInt8]], letters: [UnnumberedLetter],
      positions: [String], origins: [String], lettersAfter: String, onces: [String], logged: Logged? = nil
    ) {
      self.lastSeq = lastSeq
      self.epoch = epoch
      self.pending = pending
      self.replies = replies
      self.letters = letters
      self.positions = positions
      self.origins = origins
      self.lettersAfter = lettersAfter
      self.onces = onces
      self.logged = logged
    }
  }

  /// The meta's part of a resume with the node log (docs/architecture.md, write-behind point 7,
  /// "The orders"): the script decided nothing from `last`, which the holders' logs may be past.
  package struct Logged: Sendable, Equatable {
    /// Below it nothing can be replayed: a client behind it resyncs.
    package let dropped: UInt64
    /// The holder whose log holds what no later holder re-stored, and the epoch it held the
    /// session under (set by this resume if it was not).
    package let from: (node: String, epoch: UInt64)?
    /// The session's holder before this resume (nil: none).
    package let previousOwner: String?
    /// The newest position of the previous holder's inbox that the session's letter index lost
    /// by count (nil: none): letters up to it are lost unless its log stored through it.
    package let letterCut: String?

    package init(dropped: UInt64, from: (node: String, epoch: UInt64)?, previousOwner: String?, letterCut: String?) {
      self.dropped = dropped
      self.from = from
      self.previousOwner = previousOwner
      self.letterCut = letterCut
    }

    package static func == (a: Logged, b: Logged) -> Bool {
      a.dropped == b.dropped && a.from?.node == b.from?.node && a.from?.epoch == b.from?.epoch
        && a.previousOwner == b.previousOwner && a.letterCut == b.letterCut
    }
  }

  package enum HoldingResumption: Sendable, Equatable {
    case resumed(HeldResumption)
    case resync
    case gone
  }

  /// `resume` for a write-behind node (`resumeScript`'s holding half): the session is marked
  /// numbered by `node` in the same step (no `WriteBehindStore.claim` after it). One Redis only.
  /// `logged`: the holders store in their node logs; the script records `from` and leaves the
  /// decision to the resumer (`HeldResumption.logged`, `WriteBehindLogResume`).
  package func resumeHolding(
    _ sessionID: String, userId: String, deviceId: String, from lastSeq: UInt64, node: String, allowingAhead: UInt64,
    logged: Bool = false
  ) throws(RedisError) -> HoldingResumption {
    try Self.check(node, "node")
    try Self.check(sessionID, "session id")
    guard !redis.isCluster else {
      throw .invalidRequest("a write-behind resume needs one Redis: a Redis Cluster's layout is not built")
    }
    let reply = try redis.eval(
      Self.resumeScript, keys: Self.keys(sessionID).all,
      arguments: [
        .string(userId), .string(deviceId), .integer(Int64(clamping: lastSeq)), .string(node),
        try .milliseconds(limits.expiry), .integer(Int64(clamping: allowingAhead)), "1",
        .integer(Int64(limits.capacity)), .string(sessionID), try .milliseconds(limits.inboxExpiry),
        logged ? "1" : "0",
      ])
    guard let elements = reply.elements, let status = elements.first?.integer else { throw .unexpectedReply(reply) }
    switch status {
    case 0: break
    case 1: return .resync
    default: return .gone
    }
    var at = 4
    func integer() throws(RedisError) -> Int {
      guard at < elements.count, let value = elements[at].integer, value >= 0 else { throw .unexpectedReply(reply) }
      at += 1
      return Int(value)
    }
    func bytes() throws(RedisError) -> [UInt8] {
      guard at < elements.count, let value = elements[at].bytes else { throw .unexpectedReply(reply) }
      at += 1
      return value
    }
    guard elements.count >= 4, let last = elements[1].integer, let epoch = elements[2].integer, epoch > 0,
      let count = elements[3].integer, count >= 0, elements.count >= 4 + Int(count)
    else { throw .unexpectedReply(reply) }
    at += Int(count)
    let pending = try Self.entries(elements[4..<at], sessionID, reply)
    let replyItems = try integer()
    guard replyItems.isMultiple(of: 2) else { throw .unexpectedReply(reply) }
    var replies: [String: [UInt8]] = [:]
    for _ in 0..<(replyItems / 2) {
      let id = String(decoding: try bytes(), as: UTF8.self)
      replies[id] = try bytes()
    }
    let cut = String(decoding: try bytes(), as: UTF8.self)
    var letters: [UnnumberedLetter] = []
    var positions: [String] = []
    var origins: [String] = []
    for _ in 0..<(try integer()) {
      // Chosen by their prefix in the script: a letter that does not decode is not this session's.
      let payload = try bytes()
      let position = String(decoding: try bytes(), as: UTF8.self)
      let origin = String(decoding: try bytes(), as: UTF8.self)
      if let letter = try? UnnumberedLetter.decode(payload), letter.session == sessionID {
        letters.append(letter)
        positions.append(position)
        origins.append(origin)
      }
    }
    var loggedPart: Logged?
    if logged {
      func text() throws(RedisError) -> String { String(decoding: try bytes(), as: UTF8.self) }
      guard let dropped = UInt64(try text()) else { throw .unexpectedReply(reply) }
      let from = try text()
      let (owner, letterCut) = (try text(), try text())
      var holder: (node: String, epoch: UInt64)?
      if !from.isEmpty {
        let parts = from.split(separator: " ")
        guard parts.count == 2, let epoch = UInt64(parts[1]) else { throw .unexpectedReply(reply) }
        holder = (String(parts[0]), epoch)
      }
      loggedPart = Logged(
        dropped: dropped, from: holder, previousOwner: owner.isEmpty ? nil : owner,
        letterCut: letterCut.isEmpty ? nil : letterCut)
    }
    var onces: [String] = []
    while at < elements.count { onces.append(String(decoding: try bytes(), as: UTF8.self)) }
    return .resumed(
      HeldResumption(
        lastSeq: UInt64(clamping: last), epoch: UInt64(epoch), pending: pending, replies: replies, letters: letters,
        positions: positions, origins: origins, lettersAfter: cut, onces: onces, logged: loggedPart))
  }
}

extension SessionLedger {
  /// A resume with the node log, once the resumer's log holds what it took
  /// (`WriteBehindLogResume.Settle`): writes the session's `last` (and `dropped`, when it goes on
  /// from the client's seq) to its meta, clears `from` if it still names the holder taken from,
  /// and keeps the logs' once-keys in the session's once set, for later resumes and for the
  /// append step's refusal of a copy. Nothing if another resume moved the epoch since (it took
  /// the logs itself). True when it wrote.
  package func settleLogged(_ sessionID: String, _ settle: WriteBehindLogResume.Settle) throws(RedisError) -> Bool {
    let keys = Self.keys(sessionID)
    var arguments: [RedisArgument] = [
      .string(String(settle.epoch)), .string(String(settle.last)), .string(settle.dropped.map(String.init) ?? ""),
      .string(settle.from ?? ""), .string(settle.letterPosition ?? ""), .integer(Int64(limits.onceMemory)),
    ]
    arguments += settle.onces.map { .string($0) }
    return try redis.eval(Self.settleLoggedScript, keys: [keys.meta, keys.once], arguments: arguments) == .integer(1)
  }

  /// KEYS: meta, once set. ARGV: epoch, last, dropped ('' keep), from to clear ('' none), `lp`
  /// ('' keep), once memory, then once-keys. Returns 1 written, 0 another resume moved the epoch
  /// (or no session).
  static let settleLoggedScript = RedisScript(
    """
    local m = redis.call('HMGET', KEYS[1], 'epoch', 'from', 'onces')
    if m[1] ~= ARGV[1] then return 0 end
    redis.call('HSET', KEYS[1], 'last', ARGV[2])
    if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'dropped', ARGV[3]) end
    if ARGV[4] ~= '' and m[2] == ARGV[4] then redis.call('HDEL', KEYS[1], 'from') end
    -- The copies of letters the previous holder had stored: the next resume reads after them.
    if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'lp', ARGV[5]) end
    if #ARGV > 6 then
      local n = tonumber(m[3]) or 0
      for i = 7, #ARGV do
        if not redis.call('ZSCORE', KEYS[2], ARGV[i]) then
          n = n + 1
          redis.call('ZADD', KEYS[2], n, ARGV[i])
        end
      end
      local memory = tonumber(ARGV[6])
      if redis.call('ZCARD', KEYS[2]) > memory then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(memory + 1)) end
      redis.call('HSET', KEYS[1], 'onces', n)
      redis.call('PEXPIRE', KEYS[2], math.max(redis.call('PTTL', KEYS[1]), 1))
    end
    return 1
    """)
}
