import DialtoneRedis

/// Sends a letter to the node that runs a call, finding that node in the same step: one round
/// trip per forwarded message, and never a letter into the inbox of a node that died (its
/// heartbeat is gone), which nobody would read.
///
/// Blocking calls: run them off the cooperative pool.
public final class CallForwarding: Sendable {
  public enum Result: Sendable, Equatable {
    /// The letter is in the owner's inbox.
    case sent(owner: String)
    /// The call is `node`'s own: nothing was sent.
    case ownedHere
    /// Nobody holds the call (it never existed, ended, or its owner's lease ran out).
    case unowned
    /// The owner's heartbeat stopped: nothing was sent (the caller may take the call over).
    case ownerDead(String)
    /// The owner's inbox is full.
    case full(owner: String)
  }

  private let redis: any RedisClient
  private let mailbox: NodeMailbox

  public init(_ redis: any RedisClient, mailbox: NodeMailbox) {
    self.redis = redis
    self.mailbox = mailbox
  }

  public func forward(_ payload: [UInt8], about callId: String, from node: String) throws(RedisError) -> Result {
    if redis.isCluster { return try forwardSplit(payload, about: callId, from: node) }
    let reply = try redis.eval(
      Self.forwardScript, keys: [CallOwnership.key(callId)],
      arguments: [
        .string(node), .bytes(payload), .integer(Int64(mailbox.capacity)), try .milliseconds(mailbox.expiry),
      ])
    guard let parts = reply.elements, parts.count == 2, let status = parts[0].integer, let owner = parts[1].string
    else { throw .unexpectedReply(reply) }
    switch status {
    case 0: return .sent(owner: owner)
    case 1: return .ownedHere
    case 2: return .unowned
    case 3: return .ownerDead(owner)
    default: return .full(owner: owner)
    }
  }

  /// `forward` on a Redis Cluster, where the owner key and the owner's inbox are in different
  /// slots: the owner is read first, then the letter goes in one script in the owner's slot
  /// (its heartbeat and inbox share its tag, so a dead owner still gets nothing). The owner may
  /// change between the two (a take-over): the letter then waits in the old owner's inbox, as
  /// one sent just before the take-over does on one Redis, and the request is routed again when
  /// its answer does not come (`ClusterLink.retryUnanswered`).
  private func forwardSplit(_ payload: [UInt8], about callId: String, from node: String) throws(RedisError) -> Result {
    guard let owner = try redis.get(CallOwnership.key(callId)).map({ String(decoding: $0, as: UTF8.self) }) else {
      return .unowned
    }
    if owner == node { return .ownedHere }
    let reply = try redis.eval(
      Self.sendToLiveScript, keys: [ClusterPresence.nodeKey(owner), NodeMailbox.inbox(owner)],
      arguments: [.bytes(payload), .integer(Int64(mailbox.capacity)), try .milliseconds(mailbox.expiry)])
    switch reply.integer {
    case 0?: return .sent(owner: owner)
    case 3?: return .ownerDead(owner)
    case 4?: return .full(owner: owner)
    default: throw .unexpectedReply(reply)
    }
  }

  /// KEYS: a node's heartbeat key and inbox (one slot). ARGV: payload, capacity, expiry ms.
  /// Returns 0 sent, 3 the node is dead, 4 its inbox is full (`forwardScript`'s codes).
  static let sendToLiveScript = RedisScript(
    """
    if redis.call('EXISTS', KEYS[1]) == 0 then return 3 end
    if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[2]) then return 4 end
    redis.call('XADD', KEYS[2], '*', 'm', ARGV[1])
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
    return 0
    """)

  /// Takes over a call whose owner died: only if `dead` still holds it (two nodes noticing at
  /// once cannot both win). Whether `node` holds it now.
  public func takeOver(_ callId: String, from dead: String, for node: String, lease: Duration) throws(RedisError)
    -> Bool
  {
    let reply = try redis.eval(
      Self.takeOverScript, keys: [CallOwnership.key(callId)],
      arguments: [.string(dead), .string(node), try .milliseconds(lease)])
    return reply.integer == 1
  }

  /// KEYS: the owner key. ARGV: sender node, payload, inbox capacity, inbox expiry ms. The key
  /// layouts are ClusterPresence's and NodeMailbox's (one Redis: keys of several slots).
  static let forwardScript = RedisScript(
    """
    local owner = redis.call('GET', KEYS[1])
    if not owner then return {2, ''} end
    if owner == ARGV[1] then return {1, owner} end
    if redis.call('EXISTS', 'dt:node:{' .. owner .. '}') == 0 then return {3, owner} end
    local inbox = 'dt:inbox:{' .. owner .. '}'
    if redis.call('XLEN', inbox) >= tonumber(ARGV[3]) then return {4, owner} end
    redis.call('XADD', inbox, '*', 'm', ARGV[2])
    redis.call('PEXPIRE', inbox, ARGV[4])
    return {0, owner}
    """)

  /// KEYS: the owner key. ARGV: dead owner, new owner, lease ms.
  static let takeOverScript = RedisScript(
    """
    if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
    return 1
    """)
}
