import DialtoneRedis

/// The part of a device's signaling session that must outlive the node holding its socket
/// (protocol.md §5, resume): the sequenced messages the client has not acknowledged, the seq to
/// continue from, and the answers to its recent requests. Kept in Redis so that a client whose
/// node died resumes on any other node with nothing lost or duplicated, or is told to resync when
/// the state is truly gone, never handed a gap.
///
/// One node writes a session at a time. Every write carries the writer's `epoch`; a resume on
/// another node takes the session over with the next epoch, and from then on the old node's
/// writes are refused (`fenced`) instead of interleaving with the new owner's. Appends must
/// continue the seq exactly (`outOfOrder` otherwise), so the log is contiguous by construction.
///
/// The node writes a message here before it writes it to the socket: a message the client saw
/// is then always one a resume can replay. Blocking calls: run them off the cooperative pool.
public final class SessionLedger: Sendable {
  public struct Limits: Sendable, Equatable {
    /// Unacknowledged messages and bytes kept per session (the oldest go first, as on one node).
    public var capacity: Int
    public var maxBytes: Int
    /// Recent request ids whose answers are replayed when the request is repeated.
    public var replyMemory: Int
    /// How long a session outlives its last write or `touch`: the resume window plus the owner's
    /// refresh interval.
    public var expiry: Duration

    public init(capacity: Int = 1024, maxBytes: Int = 1 << 20, replyMemory: Int = 512, expiry: Duration) {
      self.capacity = max(1, capacity)
      self.maxBytes = max(1, maxBytes)
      self.replyMemory = max(1, replyMemory)
      self.expiry = expiry
    }
  }

  /// The writer's hold on a session: its epoch, and the last seq written so far.
  public struct Claim: Sendable, Equatable {
    public let epoch: Int64
    public let lastSeq: UInt64

    public init(epoch: Int64, lastSeq: UInt64) {
      self.epoch = epoch
      self.lastSeq = lastSeq
    }
  }

  public enum AppendResult: Sendable, Equatable {
    case stored
    /// Another node resumed the session: this writer must drop it.
    case fenced
    /// The seq does not continue the log (the ledger's last seq is `last`).
    case outOfOrder(last: UInt64)
    /// The session expired or was forgotten.
    case gone
  }

  public enum Resumption: Sendable, Equatable {
    /// The session is this node's now (`claim`); `pending` are the messages after the client's
    /// last seq, in order, exactly as first sent.
    case resumed(Claim, pending: [[UInt8]])
    /// The session exists but cannot continue from the client's seq (behind what was dropped, or
    /// ahead of what was sent): the client must resync.
    case resync
    /// No such session for this device (expired, forgotten, or another device's).
    case gone
  }

  private let redis: RedisConnection
  public let limits: Limits

  public init(_ redis: RedisConnection, limits: Limits) {
    self.redis = redis
    self.limits = limits
  }

  /// Starts a session owned by `node` (epoch 1), replacing whatever had the id.
  @discardableResult
  public func open(_ sessionID: String, userId: String, deviceId: String, node: String) throws(RedisError) -> Claim {
    let keys = Self.keys(sessionID)
    try redis.eval(
      Self.openScript, keys: keys.all,
      arguments: [.string(userId), .string(deviceId), .string(node), try .milliseconds(limits.expiry)])
    return Claim(epoch: 1, lastSeq: 0)
  }

  /// Keeps message `seq` (the claim's last seq + 1, then the next...) for resume, dropping the
  /// oldest beyond the limits.
  public func append(_ sessionID: String, epoch: Int64, seq: UInt64, message: [UInt8]) throws(RedisError)
    -> AppendResult
  {
    let reply = try redis.eval(
      Self.appendScript, keys: Self.keys(sessionID).all,
      arguments: [
        .integer(epoch), .integer(Int64(clamping: seq)), .bytes(message), .integer(Int64(limits.capacity)),
        .integer(Int64(limits.maxBytes)), try .milliseconds(limits.expiry),
      ])
    let (status, value) = try Self.pair(reply)
    switch status {
    case 0: return .stored
    case 1: return .fenced
    case 2: return .outOfOrder(last: UInt64(clamping: value))
    default: return .gone
    }
  }

  /// The client processed everything through `seq` (bounded by what was sent).
  public func acknowledge(_ sessionID: String, through seq: UInt64) throws(RedisError) {
    try redis.eval(Self.acknowledgeScript, keys: Self.keys(sessionID).all, arguments: [.integer(Int64(clamping: seq))])
  }

  /// Takes the session over for `node` if `userId`/`deviceId` own it and it can continue from
  /// `lastSeq`; whatever node held it is fenced from then on.
  public func resume(_ sessionID: String, userId: String, deviceId: String, from lastSeq: UInt64, node: String)
    throws(RedisError) -> Resumption
  {
    let reply = try redis.eval(
      Self.resumeScript, keys: Self.keys(sessionID).all,
      arguments: [
        .string(userId), .string(deviceId), .integer(Int64(clamping: lastSeq)), .string(node),
        try .milliseconds(limits.expiry),
      ])
    guard let elements = reply.elements, let status = elements.first?.integer else { throw .unexpectedReply(reply) }
    switch status {
    case 0:
      guard elements.count >= 3, let epoch = elements[1].integer, let last = elements[2].integer else {
        throw .unexpectedReply(reply)
      }
      var pending: [[UInt8]] = []
      for element in elements.dropFirst(3) {
        guard let member = element.bytes, let message = Self.message(of: member) else { throw .unexpectedReply(reply) }
        pending.append(message)
      }
      return .resumed(Claim(epoch: epoch, lastSeq: UInt64(clamping: last)), pending: pending)
    case 1: return .resync
    default: return .gone
    }
  }

  /// Remembers the answer to a request id (replacing an earlier answer to it), forgetting the
  /// oldest id beyond `replyMemory`. Fenced like `append`: false when this writer lost the session.
  @discardableResult
  public func remember(_ sessionID: String, epoch: Int64, requestID: String, reply: [UInt8]) throws(RedisError)
    -> Bool
  {
    let answer = try redis.eval(
      Self.rememberScript, keys: Self.keys(sessionID).all,
      arguments: [
        .integer(epoch), .string(requestID), .bytes(reply), .integer(Int64(limits.replyMemory)),
        try .milliseconds(limits.expiry),
      ])
    guard let stored = answer.integer else { throw .unexpectedReply(answer) }
    return stored == 1
  }

  /// The remembered answer to a request id.
  public func reply(_ sessionID: String, requestID: String) throws(RedisError) -> [UInt8]? {
    switch try redis.command(["HGET", Self.keys(sessionID).replies, .string(requestID)]) {
    case .bulk(let bytes): return bytes
    case .null: return nil
    case let other: throw .unexpectedReply(other)
    }
  }

  /// Keeps live sessions from expiring (the owner calls this more often than `expiry`): how many
  /// still existed.
  @discardableResult
  public func touch(_ sessionIDs: [String]) throws(RedisError) -> Int {
    guard !sessionIDs.isEmpty else { return 0 }
    let expiry = try RedisArgument.milliseconds(limits.expiry)
    var commands: [[RedisArgument]] = []
    for id in sessionIDs {
      for key in Self.keys(id).all { commands.append(["PEXPIRE", key, expiry]) }
    }
    let replies = try redis.pipeline(commands)
    // The meta hash is the first key of each session: it decides whether the session exists.
    return stride(from: 0, to: replies.count, by: Keys.count).filter { replies[$0] == .integer(1) }.count
  }

  /// Whether the session is still there to resume (without refreshing it).
  public func exists(_ sessionID: String) throws(RedisError) -> Bool {
    try redis.command(["EXISTS", Self.keys(sessionID).meta]) == .integer(1)
  }

  /// Ends the session for good (the device's new session replaced it, or it expired here).
  public func forget(_ sessionID: String) throws(RedisError) {
    try redis.del(Self.keys(sessionID).all)
  }

  // MARK: Layout

  /// A session's keys share one hash tag, so a Redis Cluster keeps them in one slot (scripts may
  /// only touch keys of one slot).
  struct Keys {
    static let count = 4
    let meta: RedisArgument
    let log: RedisArgument
    let replies: RedisArgument
    let replyOrder: RedisArgument
    var all: [RedisArgument] { [meta, log, replies, replyOrder] }
  }

  static func keys(_ sessionID: String) -> Keys {
    let tag = "dt:session:{\(sessionID)}"
    return Keys(
      meta: .string(tag + ":meta"), log: .string(tag + ":log"), replies: .string(tag + ":replies"),
      replyOrder: .string(tag + ":reply-order"))
  }

  /// A log entry is the decimal seq, a colon, then the message's bytes: members of a sorted set
  /// must be unique, and two messages may be byte-equal.
  static func message(of member: [UInt8]) -> [UInt8]? {
    guard let colon = member.firstIndex(of: UInt8(ascii: ":")) else { return nil }
    return Array(member[(colon + 1)...])
  }

  private static func pair(_ reply: RedisReply) throws(RedisError) -> (Int64, Int64) {
    guard let elements = reply.elements, elements.count == 2, let first = elements[0].integer,
      let second = elements[1].integer
    else { throw .unexpectedReply(reply) }
    return (first, second)
  }
}
