import DialtoneRedis

/// Messages from one node to another (an effect for a device whose socket is there, a client's
/// message for a call another node owns). Each node reads its own inbox, a Redis stream: unlike
/// pub/sub, what arrives while the reader is busy or reconnecting waits for it. An inbox holds
/// at most `capacity` unread messages: a sender past that is told (`full`) rather than the
/// oldest being trimmed away unseen, and an inbox nobody reads (its node died) expires.
///
/// Blocking calls: run them off the cooperative pool (`receive` waits up to its timeout).
public final class NodeMailbox: Sendable {
  public struct Letter: Sendable, Equatable {
    /// The stream entry id ("ms-seq"): increasing, the position to read on from.
    public let id: String
    public let payload: [UInt8]
  }

  public enum SendResult: Sendable, Equatable {
    case sent(id: String)
    case full
  }

  private let redis: any RedisClient
  public let capacity: Int
  /// How long an inbox outlives its last letter (a dead node's inbox goes by itself).
  public let expiry: Duration

  public init(_ redis: any RedisClient, capacity: Int, expiry: Duration) {
    self.redis = redis
    self.capacity = max(1, capacity)
    self.expiry = expiry
  }

  public func send(_ payload: [UInt8], to node: String) throws(RedisError) -> SendResult {
    let reply = try redis.eval(
      Self.sendScript, keys: [Self.inbox(node)],
      arguments: [.bytes(payload), .integer(Int64(capacity)), try .milliseconds(expiry)])
    switch reply {
    case .bulk(let id): return .sent(id: String(decoding: id, as: UTF8.self))
    case .null: return .full
    default: throw .unexpectedReply(reply)
    }
  }

  /// Up to `limit` letters after `after` ("0" for the oldest), waiting up to `timeout` when there
  /// are none; an empty array when none came. Letters stay until `discard`ed. The wait must be
  /// shorter than the connection's command timeout, which would otherwise end it as a failure.
  public func receive(_ node: String, after: String, limit: Int, timeout: Duration) throws(RedisError) -> [Letter] {
    guard timeout < redis.configuration.commandTimeout else {
      throw .invalidRequest("a wait of \(timeout) needs a command timeout longer than it")
    }
    let reply = try redis.command([
      "XREAD", "COUNT", .integer(Int64(max(1, limit))), "BLOCK", try .milliseconds(timeout), "STREAMS",
      Self.inbox(node),
      .string(after),
    ])
    if reply == .null { return [] }
    // [[stream, [[id, [field, value]]...]]]
    guard let streams = reply.elements, let stream = streams.first?.elements, stream.count == 2,
      let entries = stream[1].elements
    else { throw .unexpectedReply(reply) }
    var letters: [Letter] = []
    for entry in entries {
      guard let parts = entry.elements, parts.count == 2, let id = parts[0].string, let fields = parts[1].elements,
        fields.count == 2, let payload = fields[1].bytes
      else { throw .unexpectedReply(reply) }
      letters.append(Letter(id: id, payload: payload))
    }
    return letters
  }

  /// Removes letters the node has handled, making room for more.
  public func discard(_ ids: [String], from node: String) throws(RedisError) {
    guard !ids.isEmpty else { return }
    try redis.command(["XDEL", Self.inbox(node)] + ids.map { .string($0) })
  }

  /// Removes every letter up to and including `id` (the last one handled): one command for a
  /// whole run of letters, however many were read since the last call.
  public func discard(through id: String, from node: String) throws(RedisError) {
    let parts = id.split(separator: "-")
    guard parts.count == 2, let ms = UInt64(parts[0]), let seq = UInt64(parts[1]) else {
      throw .invalidRequest("\(id) is not a stream entry id")
    }
    let next = seq == .max ? "\(ms + 1)-0" : "\(ms)-\(seq + 1)"
    try redis.command(["XTRIM", Self.inbox(node), "MINID", "=", .string(next)])
  }

  /// Unread letters in the node's inbox.
  public func backlog(of node: String) throws(RedisError) -> Int {
    let reply = try redis.command(["XLEN", Self.inbox(node)])
    guard let count = reply.integer else { throw .unexpectedReply(reply) }
    return Int(count)
  }

  static func inbox(_ node: String) -> RedisArgument { .string("dt:inbox:{\(node)}") }

  /// ARGV: payload, capacity, expiry ms. Returns the entry id, or nil when the inbox is full.
  static let sendScript = RedisScript(
    """
    if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[2]) then return nil end
    local id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[1])
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return id
    """)
}
