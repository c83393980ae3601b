import DialtoneRedis

/// Placing calls on a Redis Cluster, where a call's owner key, each user's lists and another
/// call's owner key are in different slots, so no one script can read and write them all.
///
/// `place` becomes: take the owner key if free (one script in the call's slot), then list the
/// call under its users. A node dying in between leaves a call owned but not listed: its users'
/// devices do not find it when they connect elsewhere until its owner lists it again (a
/// placement is retried by `placeOwnedCallsAgain`) or its lease runs out, as for a call whose
/// owner died on one Redis.
///
/// `placeInvite` keeps its rule (busy first, then glare, else here) with reads before the
/// placement, and one serialisation point for the race the reads cannot see: two invites
/// between the same two users placed at once on two nodes (glare). Each claims the pair's key
/// (`dt:glare:{a\nb}`, one slot) after taking its own owner key; the second finds the first's
/// call there, alive on another node, gives its own key back and goes near it. A call whose
/// owner key is gone no longer holds the pair. Busy needs no such point: the talking set is
/// written when a call connects, long after its placement, never in a race with an invite.
extension CallOwnership {
  func placeInviteSplit(_ callId: String, for node: String, caller: String, callee: String) throws(RedisError)
    -> InvitePlacement
  {
    if let owner = try owner(of: callId) {
      if owner != node { return .owner(owner) }
      try list(callId, under: [caller, callee])
      return .owner(node)
    }
    // Busy: the node that runs a connected call of the callee.
    let talking = try members(Self.talkingKey(callee))
    for (id, owner) in try owners(of: talking) {
      guard let owner else { continue }
      if owner != node { return .near(id) }
      // This node runs the callee's connected call: it decides busy (and glare) itself.
      return try placed(callId, for: node, caller: caller, callee: callee, pairing: false)
    }
    // Glare: a call already listed under both users, run elsewhere.
    let calleeCalls = try members(Self.userKey(callee))
    let callerCalls = Set(try members(Self.userKey(caller)))
    for (id, owner) in try owners(of: calleeCalls.filter(callerCalls.contains)) {
      if let owner, owner != node { return .near(id) }
    }
    return try placed(callId, for: node, caller: caller, callee: callee)
  }

  /// Takes the call for `node`, then the users' pair; the placement (or where to go instead).
  private func placed(_ callId: String, for node: String, caller: String, callee: String, pairing: Bool = true)
    throws(RedisError) -> InvitePlacement
  {
    let owner = try claimNew(callId, for: node)
    guard owner == node else { return .owner(owner) }
    guard pairing else {
      try list(callId, under: [caller, callee])
      return .owner(node)
    }
    let pair = Self.pairKey(caller, callee)
    let lease = try RedisArgument.milliseconds(leaseDuration)
    let holder = try redis.eval(Self.pairScript, keys: [pair], arguments: [.string(callId), lease]).string
    if let other = holder, other != callId {
      let otherOwner = try self.owner(of: other)
      if let otherOwner, otherOwner != node {
        _ = try release(callId, by: node)
        return .near(other)
      }
      if otherOwner == nil {
        // The pair's call ended or lost its owner: this one holds the pair now.
        try redis.set(pair, .string(callId), expiresIn: leaseDuration)
      }
    }
    try list(callId, under: [caller, callee])
    return .owner(node)
  }

  /// The owner key for `node` unless another node holds it: the holder afterwards.
  func claimNew(_ callId: String, for node: String) throws(RedisError) -> String {
    let reply = try redis.eval(
      Self.claimNewScript, keys: [Self.key(callId)], arguments: [.string(node), try .milliseconds(leaseDuration)])
    guard let owner = reply.string else { throw .unexpectedReply(reply) }
    return owner
  }

  /// Lists the call under each user (`calls(of:)`), for a day at most (stale entries are dropped
  /// when read).
  func list(_ callId: String, under users: [String]) throws(RedisError) {
    guard !users.isEmpty else { return }
    _ = try redis.pipeline(
      users.flatMap { [["SADD", Self.userKey($0), .string(callId)], ["PEXPIRE", Self.userKey($0), "86400000"]] }
    ).throwingFirstError()
  }

  private func members(_ key: RedisArgument) throws(RedisError) -> [String] {
    let reply = try redis.command(["SMEMBERS", key])
    guard let members = reply.elements?.compactMap(\.string) else { throw .unexpectedReply(reply) }
    return members.sorted()
  }

  private func owners(of callIds: [String]) throws(RedisError) -> [(String, String?)] {
    guard !callIds.isEmpty else { return [] }
    let replies = try redis.pipeline(callIds.map { ["GET", Self.key($0)] }).throwingFirstError()
    return zip(callIds, replies).map { ($0, $1.string) }
  }

  static func pairKey(_ a: String, _ b: String) -> RedisArgument {
    .string("dt:glare:{\(min(a, b))\n\(max(a, b))}")
  }

  /// KEYS: the owner key. ARGV: node, lease ms. Returns the holder afterwards.
  static let claimNewScript = RedisScript(
    """
    local owner = redis.call('GET', KEYS[1])
    if owner and owner ~= ARGV[1] then return owner end
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return ARGV[1]
    """)

  /// KEYS: the users' pair. ARGV: call id, lease ms. Returns the call that holds the pair.
  static let pairScript = RedisScript(
    """
    local holder = redis.call('GET', KEYS[1])
    if holder then return holder end
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return ARGV[1]
    """)
}
