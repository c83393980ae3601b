import DialtoneRedis

/// One node owns each live call: it runs the call's state machine and fires its ring timeouts
/// and grace windows, so each fires exactly once in the cluster. Ownership is a lease the owner
/// renews; when the owner dies the lease expires and another node claims the call (its timers
/// with it) instead of two nodes both firing them.
///
/// Blocking calls: run them off the cooperative pool.
public final class CallOwnership: Sendable {
  let redis: any RedisClient
  /// How long a claim holds without renewal: the longest a dead owner's calls wait for a new one.
  public let leaseDuration: Duration

  public init(_ redis: any RedisClient, leaseDuration: Duration) {
    self.redis = redis
    self.leaseDuration = leaseDuration
  }

  /// Takes the call for `node` if nobody holds it: whether `node` holds it now (true also when it
  /// already did, renewing the lease).
  public func claim(_ callId: String, for node: String) throws(RedisError) -> Bool {
    let key = Self.key(callId)
    if try redis.acquireLease(key, holder: .string(node), duration: leaseDuration) { return true }
    return try redis.extendLease(key, holder: .string(node), duration: leaseDuration)
  }

  /// Renews the leases `node` holds; the calls it lost (taken over after a pause longer than the
  /// lease) come back so that it stops running them.
  public func renew(_ callIds: [String], for node: String) throws(RedisError) -> [String] {
    var lost: [String] = []
    for callId in callIds where try !redis.extendLease(Self.key(callId), holder: .string(node), duration: leaseDuration)
    {
      lost.append(callId)
    }
    return lost
  }

  /// The call ended or its node is draining: another node may claim it at once.
  @discardableResult
  public func release(_ callId: String, by node: String) throws(RedisError) -> Bool {
    try redis.releaseLease(Self.key(callId), holder: .string(node))
  }

  /// Takes a new call for `node` unless another node holds it, and lists it under each of its
  /// users (`calls(of:)`: where a device that connects anywhere finds the calls it is in). The
  /// node that holds the call afterwards: `node` when it won (or already held it).
  public func place(_ callId: String, for node: String, users: [String]) throws(RedisError) -> String {
    if redis.isCluster {
      let owner = try claimNew(callId, for: node)
      if owner == node { try list(callId, under: users) }
      return owner
    }
    let reply = try redis.eval(
      Self.placeScript, keys: [Self.key(callId)] + users.map(Self.userKey),
      arguments: [.string(node), try .milliseconds(leaseDuration), .string(callId)])
    guard let owner = reply.string else { throw .unexpectedReply(reply) }
    return owner
  }

  /// Where a new 1:1 call between `caller` and `callee` runs, so that busy and glare are
  /// decided by one node's rule across the cluster: by the node that runs a connected call of
  /// the callee (busy), or else one between the two users (glare), when another node runs it;
  /// else here (the call is placed, as `place` does). A call already held somewhere stays there.
  public func placeInvite(_ callId: String, for node: String, caller: String, callee: String) throws(RedisError)
    -> InvitePlacement
  {
    if redis.isCluster { return try placeInviteSplit(callId, for: node, caller: caller, callee: callee) }
    let reply = try redis.eval(
      Self.placeInviteScript,
      keys: [Self.key(callId), Self.userKey(caller), Self.userKey(callee), Self.talkingKey(callee)],
      arguments: [.string(node), try .milliseconds(leaseDuration), .string(callId)])
    guard let parts = reply.elements?.compactMap(\.string), parts.count == 2 else { throw .unexpectedReply(reply) }
    switch parts[0] {
    case "owner": return .owner(parts[1])
    case "near": return .near(parts[1])
    default: throw .unexpectedReply(reply)
    }
  }

  public enum InvitePlacement: Equatable, Sendable {
    /// The node that holds the new call (this one when it was placed here).
    case owner(String)
    /// Not placed: the invite goes to the node that runs this other call of its users.
    case near(String)
  }

  /// The call is connected: its users are busy for a call that another node places.
  public func talking(_ callId: String, users: [String]) throws(RedisError) {
    guard !users.isEmpty else { return }
    _ = try redis.pipeline(
      users.flatMap {
        [["SADD", Self.talkingKey($0), .string(callId)], ["PEXPIRE", Self.talkingKey($0), "86400000"]]
      })
  }

  /// The calls listed under a user whose owner still holds them, with that owner. Entries whose
  /// lease is gone (the call ended, or its node died and nobody took it yet) are dropped.
  public func calls(of userId: String) throws(RedisError) -> [(callId: String, owner: String)] {
    let key = Self.userKey(userId)
    let reply = try redis.command(["SMEMBERS", key])
    guard let members = reply.elements?.compactMap(\.string) else { throw .unexpectedReply(reply) }
    guard !members.isEmpty else { return [] }
    let owners = try redis.pipeline(members.map { ["GET", Self.key($0)] }).throwingFirstError()
    var found: [(callId: String, owner: String)] = []
    var gone: [RedisArgument] = []
    for (callId, owner) in zip(members, owners) {
      if let owner = owner.string { found.append((callId, owner)) } else { gone.append(.string(callId)) }
    }
    if !gone.isEmpty { try redis.command(["SREM", key] + gone) }
    return found.sorted { $0.callId < $1.callId }
  }

  /// The call ended here: its lease goes and it leaves its users' lists.
  public func finish(_ callId: String, by node: String, users: [String]) throws(RedisError) {
    try release(callId, by: node)
    guard !users.isEmpty else { return }
    _ = try redis.pipeline(
      users.flatMap { [["SREM", Self.userKey($0), .string(callId)], ["SREM", Self.talkingKey($0), .string(callId)]] })
  }

  /// The node running the call, if any holds it.
  public func owner(of callId: String) throws(RedisError) -> String? {
    try redis.get(Self.key(callId)).map { String(decoding: $0, as: UTF8.self) }
  }

  static func key(_ callId: String) -> RedisArgument { .string("dt:call-owner:{\(callId)}") }
  static func userKey(_ userId: String) -> RedisArgument { .string("dt:user-calls:{\(userId)}") }
  static func talkingKey(_ userId: String) -> RedisArgument { .string("dt:user-talking:{\(userId)}") }

  /// KEYS: the owner key, then the users' lists. ARGV: node, lease ms, call id. Returns the
  /// holder afterwards. A user's list lives as long as its newest call's lease could (a day):
  /// stale members are dropped when read.
  static let placeScript = RedisScript(
    placeFunction + """
      local owner = redis.call('GET', KEYS[1])
      if owner and owner ~= ARGV[1] then return owner end
      place(#KEYS)
      return ARGV[1]
      """)

  /// Both placements' common step: the lease for ARGV[1] (ARGV[2] ms) on KEYS[1], and the call
  /// (ARGV[3]) listed under KEYS[2...last].
  private static let placeFunction = """
    local function place(last)
      redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
      for i = 2, last do
        redis.call('SADD', KEYS[i], ARGV[3])
        redis.call('PEXPIRE', KEYS[i], 86400000)
      end
    end

    """

  /// KEYS: the new call's owner key, the caller's and the callee's lists, the callee's talking
  /// set. ARGV: node, lease ms, call id. Returns {'owner', node} or {'near', call id}. A listed
  /// call counts only while its lease is held; a connected call this node runs is decided here.
  static let placeInviteScript = RedisScript(
    placeFunction + """
      local function placed()
        place(3)
        return {'owner', ARGV[1]}
      end
      local function holder(id) return redis.call('GET', 'dt:call-owner:{' .. id .. '}') end
      local owner = redis.call('GET', KEYS[1])
      if owner and owner ~= ARGV[1] then return {'owner', owner} end
      if owner then return placed() end
      -- Busy first, as the router checks it first: the node that runs the callee's connected call.
      for _, id in ipairs(redis.call('SMEMBERS', KEYS[4])) do
        local node = holder(id)
        if node then
          if node ~= ARGV[1] then return {'near', id} end
          return placed()
        end
      end
      for _, id in ipairs(redis.call('SMEMBERS', KEYS[3])) do
        if redis.call('SISMEMBER', KEYS[2], id) == 1 then
          local node = holder(id)
          if node and node ~= ARGV[1] then return {'near', id} end
        end
      end
      return placed()
      """)
}
