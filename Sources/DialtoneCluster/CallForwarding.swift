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
