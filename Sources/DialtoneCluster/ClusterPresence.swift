import DialtoneRedis

/// Which node holds which device's socket, shared by every node of a cluster. A node is alive
/// while its heartbeat key exists; the devices it registered count only while it is, so a node
/// that dies (kill -9, power) drops out by itself when its heartbeat expires, with no per-device
/// refresh traffic. An entry of a dead node stays: its session outlives the node for the
/// device's resume elsewhere (`SessionLedger`), and leaves the presence when the device registers
/// again or its session expires.
///
/// Blocking calls: run them off the cooperative pool.
public final class ClusterPresence: Sendable {
  /// A device's session: the node holding it, and whether its socket is open there now (a
  /// session whose socket dropped stays listed while it may resume: messages for the device
  /// still go to it, but it counts as offline, so a push wakes the device).
  public struct Holder: Sendable, Equatable {
    public let deviceId: String
    public let node: String
    public let sessionID: String
    public let connected: Bool

    public init(deviceId: String, node: String, sessionID: String, connected: Bool = true) {
      self.deviceId = deviceId
      self.node = node
      self.sessionID = sessionID
      self.connected = connected
    }

    /// Whether `other` is this session (on the same node), whatever the state of its socket.
    public func isSameSession(as other: Holder) -> Bool { node == other.node && sessionID == other.sessionID }
  }

  private let redis: any RedisClient
  /// How long a node counts as alive after its last heartbeat.
  public let nodeExpiry: Duration

  public init(_ redis: any RedisClient, nodeExpiry: Duration) {
    self.redis = redis
    self.nodeExpiry = nodeExpiry
  }

  /// Marks `node` alive for `nodeExpiry` more (call it several times per expiry).
  public func heartbeat(_ node: String) throws(RedisError) {
    try Self.check(node, "node")
    try redis.set(Self.nodeKey(node), "alive", expiresIn: nodeExpiry)
  }

  public func isAlive(_ node: String) throws(RedisError) -> Bool {
    try redis.command(["EXISTS", Self.nodeKey(node)]) == .integer(1)
  }

  /// The cluster's mark: a random value the first node writes, gone (or another) once Redis lost
  /// the cluster's state (a restart without persistence). Nil while none is written.
  public func mark() throws(RedisError) -> String? {
    try redis.get(Self.markKey).map { String(decoding: $0, as: UTF8.self) }
  }

  /// The mark, written first if there was none (whichever node writes first wins).
  public func markedNow() throws(RedisError) -> String? {
    try redis.set(Self.markKey, .string(Self.newMark()), onlyIfAbsent: true)
    return try mark()
  }

  /// A draining or stopping node leaves at once instead of waiting for its heartbeat to expire.
  public func leave(_ node: String) throws(RedisError) {
    try redis.del([Self.nodeKey(node)])
  }

  /// The device's session is now `holder`: what held it before (on a node alive or not), which
  /// that node should close as replaced; nil when it was this session already (a socket of it
  /// dropping or coming back).
  @discardableResult
  public func register(_ holder: Holder, of userId: String) throws(RedisError) -> Holder? {
    try Self.check(holder.node, "node")
    try Self.check(holder.sessionID, "session id")
    let reply = try redis.eval(
      Self.registerScript, keys: [Self.userKey(userId)],
      arguments: [.string(holder.deviceId), .string(Self.value(holder)), .string(Self.sessionPart(holder))])
    switch reply {
    case .null: return nil
    case .bulk(let bytes): return Self.holder(holder.deviceId, String(decoding: bytes, as: UTF8.self))
    default: throw .unexpectedReply(reply)
    }
  }

  /// Marks the session's socket closed, if the device's entry still names this session (a newer
  /// session elsewhere is never overwritten by an old socket closing late). Whether it did.
  @discardableResult
  public func markOffline(_ holder: Holder, of userId: String) throws(RedisError) -> Bool {
    let offline = Holder(deviceId: holder.deviceId, node: holder.node, sessionID: holder.sessionID, connected: false)
    let reply = try redis.eval(
      Self.markOfflineScript, keys: [Self.userKey(userId)],
      arguments: [.string(holder.deviceId), .string(Self.value(offline)), .string(Self.sessionPart(holder))])
    return reply == .integer(1)
  }

  /// Removes the device's entry if it still names this session: a session that ended late on its
  /// old node never removes the device's newer one elsewhere. Whether it did.
  @discardableResult
  public func unregister(_ holder: Holder, of userId: String) throws(RedisError) -> Bool {
    let reply = try redis.eval(
      Self.unregisterScript, keys: [Self.userKey(userId)],
      arguments: [.string(holder.deviceId), .string(Self.sessionPart(holder))])
    return reply == .integer(1)
  }

  /// The user's devices with a session on a live node, by device id (those of dead nodes are
  /// left out, not removed).
  public func devices(of userId: String) throws(RedisError) -> [Holder] {
    let reply = try redis.command(["HGETALL", Self.userKey(userId)])
    guard let entries = reply.fieldsAndValues else { throw reply.failure ?? .unexpectedReply(reply) }
    var holders: [Holder] = []
    for (device, value) in entries {
      guard let holder = Self.holder(device, value) else { throw .unexpectedReply(reply) }
      holders.append(holder)
    }
    let nodes = Array(Set(holders.map(\.node))).sorted()
    guard !nodes.isEmpty else { return [] }
    let alive = try redis.pipeline(nodes.map { ["EXISTS", Self.nodeKey($0)] }).throwingFirstError()
    let live = Set(zip(nodes, alive).filter { $0.1 == .integer(1) }.map(\.0))
    return holders.filter { live.contains($0.node) }.sorted { $0.deviceId < $1.deviceId }
  }

  // MARK: Layout

  static func nodeKey(_ node: String) -> RedisArgument { .string("dt:node:{\(node)}") }
  static let markKey: RedisArgument = "dt:cluster"

  private static func newMark() -> String {
    String((0..<16).map { _ in "0123456789abcdefghijklmnopqrstuvwxyz".randomElement() ?? "0" })
  }
  static func userKey(_ userId: String) -> RedisArgument { .string("dt:presence:{\(userId)}") }

  /// "node\nsession\n" then "1" (socket open) or "0": neither may hold a newline (`check`).
  /// The scripts compare the session part (`sessionPart`) so that a socket coming and going
  /// does not count as another session.
  private static func value(_ holder: Holder) -> String {
    sessionPart(holder) + (holder.connected ? "1" : "0")
  }

  private static func sessionPart(_ holder: Holder) -> String { holder.node + "\n" + holder.sessionID + "\n" }

  private static func holder(_ deviceId: String, _ value: String) -> Holder? {
    let parts = value.split(separator: "\n", omittingEmptySubsequences: false)
    guard parts.count == 3, parts[2] == "1" || parts[2] == "0" else { return nil }
    return Holder(deviceId: deviceId, node: String(parts[0]), sessionID: String(parts[1]), connected: parts[2] == "1")
  }

  private static func check(_ value: String, _ what: String) throws(RedisError) {
    guard !value.isEmpty, !value.contains("\n") else {
      throw .invalidRequest("a \(what) must be non-empty and hold no newline")
    }
  }

  /// ARGV: device, value, session part. Returns the previous value, or nil when there was none
  /// or it was the same session.
  static let registerScript = RedisScript(
    """
    local previous = redis.call('HGET', KEYS[1], ARGV[1])
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    if not previous or string.sub(previous, 1, #ARGV[3]) == ARGV[3] then return nil end
    return previous
    """)

  /// ARGV: device, value, session part. Replaces only an entry of that session.
  static let markOfflineScript = RedisScript(
    """
    local current = redis.call('HGET', KEYS[1], ARGV[1])
    if current and string.sub(current, 1, #ARGV[3]) == ARGV[3] then
      redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
      return 1
    end
    return 0
    """)

  /// ARGV: device, session part. Deletes only an entry of that session.
  static let unregisterScript = RedisScript(
    """
    local current = redis.call('HGET', KEYS[1], ARGV[1])
    if current and string.sub(current, 1, #ARGV[2]) == ARGV[2] then
      return redis.call('HDEL', KEYS[1], ARGV[1])
    end
    return 0
    """)
}
