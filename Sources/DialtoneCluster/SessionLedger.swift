import DialtoneRedis

/// A device's signaling session as every node of a cluster sees it (protocol.md §4.2, resume):
/// the sequenced messages the client has not acknowledged, the seq they continue from, the
/// answers to its recent requests, and which node holds its socket. A client whose node died
/// resumes on any other node with nothing lost or duplicated, or is told to resync when the
/// session is truly gone, never handed a gap.
///
/// Whichever node produces a message for a session stores it here, and Redis gives it its seq:
/// a message for a device whose node just died is kept for its resume instead of being sent to
/// a node nobody hears. The same step tells the holder: it gets the frame back when it is the
/// caller (`Stored.here`), or as a letter in its inbox (`NodeMailbox`, the letter format of
/// `letterHeader`). A holder writes frames to the socket in seq order, so a frame the client saw
/// is always one a resume can replay.
///
/// Resuming makes the resuming node the holder; from then on letters go there, and the old
/// holder's `end` no longer removes the session. Blocking calls: run them off the cooperative
/// pool.
public final class SessionLedger: Sendable {
  public struct Limits: Sendable, Equatable {
    /// Unacknowledged messages and bytes kept per session (the oldest go first, as on one node).
    public var capacity: Int
    public var maxBytes: Int
    /// Recent request ids whose answers are replayed when the request is repeated.
    public var replyMemory: Int
    /// Once-keys remembered per session (`append(once:)`).
    public var onceMemory: Int
    /// How long a session outlives its last `open`, `resume` or `touch`: the resume window plus
    /// the holder's refresh interval and some.
    public var expiry: Duration
    /// The holder's inbox: its bound and how long it outlives its last letter (`NodeMailbox`).
    public var inboxCapacity: Int
    public var inboxExpiry: Duration

    public init(
      capacity: Int = 1024, maxBytes: Int = 1 << 20, replyMemory: Int = 512, onceMemory: Int = 256,
      expiry: Duration, inboxCapacity: Int = 100_000, inboxExpiry: Duration = .seconds(120)
    ) {
      self.capacity = max(1, capacity)
      self.maxBytes = max(1, maxBytes)
      self.replyMemory = max(1, replyMemory)
      self.onceMemory = max(1, onceMemory)
      self.expiry = expiry
      self.inboxCapacity = max(1, inboxCapacity)
      self.inboxExpiry = inboxExpiry
    }
  }

  /// A message before it has a seq: its bytes are `head`, the seq in decimal, then `tail`.
  public struct Frame: Sendable, Equatable {
    public let head: [UInt8]
    public let tail: [UInt8]

    public init(head: [UInt8], tail: [UInt8]) {
      self.head = head
      self.tail = tail
    }

    /// One allocation: a node numbers every frame it holds this way, and `head +
    /// Array(String(seq).utf8) + tail` made an array and two joined arrays (the seq's string is
    /// small enough to stay inline).
    public func bytes(seq: UInt64) -> [UInt8] {
      var bytes: [UInt8] = []
      bytes.reserveCapacity(head.count + 20 + tail.count)
      bytes.append(contentsOf: head)
      bytes.append(contentsOf: String(seq).utf8)
      bytes.append(contentsOf: tail)
      return bytes
    }
  }

  /// A message stored for a session held by the calling node: its seq and its exact bytes.
  public struct Stored: Sendable, Equatable {
    public let sessionID: String
    public let seq: UInt64
    public let bytes: [UInt8]

    public init(sessionID: String, seq: UInt64, bytes: [UInt8]) {
      self.sessionID = sessionID
      self.seq = seq
      self.bytes = bytes
    }
  }

  public enum AppendResult: Sendable, Equatable {
    /// Stored, and the session's holder is the calling node: write it.
    case here(Stored)
    /// Stored, and its holder (another node) was sent it.
    case sent(seq: UInt64)
    /// Stored for the session's resume, but its holder was not told: it died, or its inbox is
    /// full (it finds the gap and reads the ledger).
    case kept(seq: UInt64)
    /// The session already had a message with this once-key: nothing was stored.
    case duplicate
    /// No such session (it expired or ended).
    case gone
  }

  public enum Resumption: Sendable, Equatable {
    /// The session is the calling node's now. `pending` are the messages after the client's last
    /// seq, in order, exactly as first sent; `replies` the remembered answers by request id;
    /// `lastSeq` the seq of the last message stored; `epoch` the session's, won by this resume.
    case resumed(lastSeq: UInt64, epoch: UInt64, pending: [Stored], replies: [String: [UInt8]])
    /// The session exists but cannot continue from the client's seq (behind what was dropped,
    /// or ahead of what was stored): the client must resync.
    case resync
    /// No such session for this device (expired, ended, or another device's).
    case gone
  }

  public enum Range: Sendable, Equatable {
    /// Every message after the seq asked for, in order.
    case messages([Stored])
    /// Some of them were dropped (over the limits before the client acknowledged them).
    case dropped
    case gone
  }

  let redis: any RedisClient
  public let limits: Limits

  public init(_ redis: any RedisClient, limits: Limits) {
    self.redis = redis
    self.limits = limits
  }

  /// Starts a session held by `node`, replacing whatever had the id; its first message gets seq 1.
  /// Its epoch (what a write-behind holder stores under, `WriteBehindStore`).
  @discardableResult
  public func open(_ sessionID: String, userId: String, deviceId: String, node: String) throws(RedisError) -> UInt64 {
    try Self.check(node, "node")
    try Self.check(sessionID, "session id")
    let reply = try redis.eval(
      Self.openScript, keys: Self.keys(sessionID).all,
      arguments: [.string(userId), .string(deviceId), .string(node), try .milliseconds(limits.expiry)])
    guard let epoch = reply.integer, epoch > 0 else { throw .unexpectedReply(reply) }
    return UInt64(epoch)
  }

  /// Stores a message for the session, remembering it as the answer to `requestID` when given,
  /// and tells the session's holder. A message with a `once` key the session had already is not
  /// stored again (a ring that reached the session twice by two paths).
  public func append(
    _ frame: Frame, to sessionID: String, from node: String, requestID: String? = nil, once: String? = nil
  ) throws(RedisError) -> AppendResult {
    let step = Step.append(frame, session: sessionID, requestID: requestID, once: once)
    if redis.isCluster {
      switch try runSplit([step], from: node).first {
      case .appended(let result)?: return result
      case .failed(let error)?: throw error
      default: throw .invalidRequest("not an append")
      }
    }
    let (script, keys, arguments) = try command(step, from: node)
    guard
      case .appended(let result) = try Self.result(of: step, try redis.eval(script, keys: keys, arguments: arguments))
    else { throw .invalidRequest("not an append") }
    return result
  }

  /// Stores a message for each session of the user that `ClusterPresence` lists (one device,
  /// or all but `skipping`), as `append` does, whether its holder is alive or not (a session
  /// outlives its node for its resume): the frames stored for sessions that `node` holds, and
  /// how many sessions got it. A listed session that no longer exists leaves the presence in
  /// the same step.
  public func deliver(
    _ frame: Frame, toUser userId: String, device: String?, skipping: Set<String> = [], from node: String,
    once: String? = nil
  ) throws(RedisError) -> (here: [Stored], stored: Int) {
    let step = Step.deliver(frame, user: userId, device: device, skipping: skipping, once: once)
    if redis.isCluster {
      switch try runSplit([step], from: node).first {
      case .delivered(let here, let stored)?: return (here, stored)
      case .failed(let error)?: throw error
      default: throw .invalidRequest("not a delivery")
      }
    }
    let (script, keys, arguments) = try command(step, from: node)
    guard
      case .delivered(let here, let stored) = try Self.result(
        of: step, try redis.eval(script, keys: keys, arguments: arguments))
    else { throw .invalidRequest("not a delivery") }
    return (here, stored)
  }

  /// One step of `run`.
  public enum Step: Sendable, Equatable {
    case append(Frame, session: String, requestID: String?, once: String?)
    case deliver(Frame, user: String, device: String?, skipping: Set<String>, once: String?)
    case acknowledge(session: String, through: UInt64)
    /// A letter into a node's inbox (`NodeMailbox.send`), in the same transaction.
    case letter([UInt8], to: String)
  }

  public enum StepResult: Sendable, Equatable {
    case appended(AppendResult)
    case delivered(here: [Stored], stored: Int)
    case acknowledged
    case sent(NodeMailbox.SendResult)
    /// This step failed (the others ran).
    case failed(RedisError)
  }

  /// The scripts `run` needs the server to know: load them on the connection first
  /// (`RedisConnection.load`).
  public static var scripts: [RedisScript] {
    [appendScript, deliverScript, acknowledgeScript, NodeMailbox.sendScript, notifyScript, forgetScript]
  }

  /// Runs the steps as one transaction, in one round trip: all of them or, when this node dies
  /// before the transaction reaches Redis, none (a request's answer never lands without what the
  /// request caused, nor the other way round). Each step's result, in order. On a Redis Cluster
  /// each step is atomic on its own instead (`runSplit`: what that costs and why it is safe).
  public func run(_ steps: [Step], from node: String) throws(RedisError) -> [StepResult] {
    if redis.isCluster { return try runSplit(steps, from: node) }
    var commands: [[RedisArgument]] = []
    commands.reserveCapacity(steps.count)
    for step in steps {
      let (script, keys, arguments) = try command(step, from: node)
      commands.append(RedisConnection.evalsha(script, keys: keys, arguments: arguments))
    }
    let replies = try redis.transaction(commands)
    return zip(steps, replies).map { step, reply in
      if let failure = reply.failure { return .failed(failure) }
      do throws(RedisError) {
        return try Self.result(of: step, reply)
      } catch {
        return .failed(error)
      }
    }
  }

  func command(_ step: Step, from node: String) throws(RedisError) -> (
    RedisScript, [RedisArgument], [RedisArgument]
  ) {
    switch step {
    case .append(let frame, let session, let requestID, let once):
      return (
        Self.appendScript, Self.keys(session).all,
        [.string(node), .string(session)] + (try shared(frame, requestID: requestID, once: once))
      )
    case .deliver(let frame, let user, let device, let skipping, let once):
      return (
        Self.deliverScript, [ClusterPresence.userKey(user)],
        [.string(node), .string(device ?? ""), .string(skipping.sorted().joined(separator: "\n"))]
          + (try shared(frame, requestID: nil, once: once))
      )
    case .acknowledge(let session, let seq):
      return (Self.acknowledgeScript, Self.keys(session).all, [.integer(Int64(clamping: seq))])
    case .letter(let payload, let target):
      return (
        NodeMailbox.sendScript, [NodeMailbox.inbox(target)],
        [.bytes(payload), .integer(Int64(limits.inboxCapacity)), try .milliseconds(limits.inboxExpiry)]
      )
    }
  }

  private static func result(of step: Step, _ reply: RedisReply) throws(RedisError) -> StepResult {
    switch step {
    case .append(_, let session, _, _):
      return .appended(try appendResult(reply, session))
    case .deliver:
      guard let elements = reply.elements, let stored = elements.first?.integer, elements.count % 3 == 1 else {
        throw .unexpectedReply(reply)
      }
      var here: [Stored] = []
      for index in stride(from: 1, to: elements.count, by: 3) {
        guard let session = elements[index].string, let seq = elements[index + 1].integer,
          let bytes = elements[index + 2].bytes
        else { throw .unexpectedReply(reply) }
        here.append(Stored(sessionID: session, seq: UInt64(clamping: seq), bytes: bytes))
      }
      return .delivered(here: here, stored: Int(stored))
    case .acknowledge:
      return .acknowledged
    case .letter:
      switch reply {
      case .bulk(let id): return .sent(.sent(id: String(decoding: id, as: UTF8.self)))
      case .null: return .sent(.full)
      default: throw .unexpectedReply(reply)
      }
    }
  }

  /// The client processed everything through `seq` (bounded by what was stored).
  public func acknowledge(_ sessionID: String, through seq: UInt64) throws(RedisError) {
    try redis.eval(Self.acknowledgeScript, keys: Self.keys(sessionID).all, arguments: [.integer(Int64(clamping: seq))])
  }

  /// Several sessions' acknowledgements in one round trip (a pipeline, each its own script: on a
  /// Redis Cluster each goes to its session's shard).
  public func acknowledge(_ acknowledgements: [(session: String, through: UInt64)]) throws(RedisError) {
    guard !acknowledgements.isEmpty else { return }
    try redis.load([Self.acknowledgeScript])
    let replies = try redis.pipeline(
      acknowledgements.map {
        RedisConnection.evalsha(
          Self.acknowledgeScript, keys: Self.keys($0.session).all, arguments: [.integer(Int64(clamping: $0.through))])
      })
    for reply in replies {
      if let failure = reply.failure { throw failure }
    }
  }

  /// Makes `node` the session's holder if `userId`/`deviceId` own it and it can continue from
  /// `lastSeq`. A client up to `allowingAhead` beyond the last seq stored continues from its own
  /// seq (a write-behind holder wrote it candidates it had not stored, then died: the client has
  /// them); further ahead, or with the default 0 (store-first sessions never are), it resyncs.
  public func resume(
    _ sessionID: String, userId: String, deviceId: String, from lastSeq: UInt64, node: String,
    allowingAhead: UInt64 = 0
  ) throws(RedisError) -> Resumption {
    try Self.check(node, "node")
    let reply = try redis.eval(
      Self.resumeScript, keys: Self.keys(sessionID).all,
      arguments: [
        .string(userId), .string(deviceId), .integer(Int64(clamping: lastSeq)), .string(node),
        try .milliseconds(limits.expiry), .integer(Int64(clamping: allowingAhead)),
      ])
    guard let elements = reply.elements, let status = elements.first?.integer else { throw .unexpectedReply(reply) }
    switch status {
    case 0:
      guard elements.count >= 4, let last = elements[1].integer, let epoch = elements[2].integer, epoch > 0,
        let count = elements[3].integer, count >= 0, elements.count >= 4 + Int(count),
        (elements.count - 4 - Int(count)).isMultiple(of: 2)
      else { throw .unexpectedReply(reply) }
      let pending = try Self.entries(elements[4..<(4 + Int(count))], sessionID, reply)
      var replies: [String: [UInt8]] = [:]
      for index in stride(from: 4 + Int(count), to: elements.count, by: 2) {
        guard let id = elements[index].string, let answer = elements[index + 1].bytes else {
          throw .unexpectedReply(reply)
        }
        replies[id] = answer
      }
      return .resumed(lastSeq: UInt64(clamping: last), epoch: UInt64(epoch), pending: pending, replies: replies)
    case 1: return .resync
    default: return .gone
    }
  }

  /// The messages after `seq`, for a holder that missed a letter.
  public func range(_ sessionID: String, after seq: UInt64) throws(RedisError) -> Range {
    let reply = try redis.eval(
      Self.rangeScript, keys: Self.keys(sessionID).all, arguments: [.integer(Int64(clamping: seq))])
    guard let elements = reply.elements, let status = elements.first?.integer else { throw .unexpectedReply(reply) }
    switch status {
    case 0: return .messages(try Self.entries(elements.dropFirst(), sessionID, reply))
    case 1: return .dropped
    default: return .gone
    }
  }

  /// Keeps live sessions from expiring (their holder calls this more often than `expiry`): the
  /// ones that no longer exist.
  public func touch(_ sessionIDs: [String]) throws(RedisError) -> [String] {
    guard !sessionIDs.isEmpty else { return [] }
    let expiry = try RedisArgument.milliseconds(limits.expiry)
    var commands: [[RedisArgument]] = []
    for id in sessionIDs {
      for key in Self.keys(id).all { commands.append(["PEXPIRE", key, expiry]) }
    }
    // An error (NOREPLICAS) is no missing session: the refresh fails and is tried again.
    let replies = try redis.pipeline(commands).throwingFirstError()
    // The meta hash is the first key of each session: it decides whether the session exists.
    return sessionIDs.enumerated().filter { replies[$0.offset * Keys.count] != .integer(1) }.map(\.element)
  }

  /// Whether the session is still there to resume (without refreshing it).
  public func exists(_ sessionID: String) throws(RedisError) -> Bool {
    try redis.command(["EXISTS", Self.keys(sessionID).meta]) == .integer(1)
  }

  /// Which node holds the session, if it exists.
  public func holder(of sessionID: String) throws(RedisError) -> String? {
    try redis.command(["HGET", Self.keys(sessionID).meta, "owner"]).string
  }

  /// Ends the session for good if `node` still holds it (one resumed on another node stays).
  @discardableResult
  public func end(_ sessionID: String, heldBy node: String) throws(RedisError) -> Bool {
    try redis.eval(Self.endScript, keys: Self.keys(sessionID).all, arguments: [.string(node)]) == .integer(1)
  }

  /// Makes the session unresumable (a message for it could not be stored, so its log has a hole
  /// nobody can see): a resume or a range read from now on answers resync / dropped, and the
  /// holder: nil when the session is gone.
  @discardableResult
  public func poison(_ sessionID: String) throws(RedisError) -> String? {
    try redis.eval(Self.poisonScript, keys: Self.keys(sessionID).all).string
  }

  /// The sessions the presence lists for a user (`ClusterPresence`), live holders or not.
  public func sessions(ofUser userId: String) throws(RedisError) -> [String] {
    let reply = try redis.command(["HVALS", ClusterPresence.userKey(userId)])
    guard let values = reply.elements else { throw .unexpectedReply(reply) }
    return values.compactMap { value in
      let parts = value.string?.split(separator: "\n", omittingEmptySubsequences: false)
      return parts.flatMap { $0.count == 3 ? String($0[1]) : nil }
    }
  }

  // MARK: Layout

  /// A session's keys share one hash tag (`dt:session:{id}`).
  struct Keys {
    static let count = 5
    let meta: RedisArgument
    let log: RedisArgument
    let replies: RedisArgument
    let replyOrder: RedisArgument
    let once: RedisArgument
    var all: [RedisArgument] { [meta, log, replies, replyOrder, once] }
  }

  /// The hash tag every key of the session starts with.
  private static func tag(_ sessionID: String) -> String { "dt:session:{\(sessionID)}" }

  /// The session's meta hash alone: a write-behind batch names the others from it in Redis.
  static func metaKey(_ sessionID: String) -> RedisArgument { .string(tag(sessionID) + ":meta") }

  static func keys(_ sessionID: String) -> Keys {
    let tag = Self.tag(sessionID)
    return Keys(
      meta: .string(tag + ":meta"), log: .string(tag + ":log"), replies: .string(tag + ":replies"),
      replyOrder: .string(tag + ":reply-order"), once: .string(tag + ":once"))
  }

  /// The letter a holder on another node gets for a stored message: this JSON line (kind
  /// `frame`, `s` the session, `q` the seq), a newline, then the message's bytes.
  public static func letterHeader(sessionID: String, seq: UInt64) -> String {
    #"{"k":"frame","q":\#(seq),"s":"\#(sessionID)"}"#
  }

  /// The arguments `appendScript` and `deliverScript` share after their own (`appendStep`).
  func shared(_ frame: Frame, requestID: String?, once: String?) throws(RedisError) -> [RedisArgument] {
    [
      .bytes(frame.head), .bytes(frame.tail), .string(requestID ?? ""), .string(once ?? ""),
      .integer(Int64(limits.capacity)), .integer(Int64(limits.maxBytes)), .integer(Int64(limits.replyMemory)),
      .integer(Int64(limits.onceMemory)), .integer(Int64(limits.inboxCapacity)),
      try .milliseconds(limits.inboxExpiry), redis.isCluster ? "0" : "1",
    ]
  }

  static func appendResult(_ reply: RedisReply, _ sessionID: String) throws(RedisError) -> AppendResult {
    guard let elements = reply.elements, let status = elements.first?.integer else { throw .unexpectedReply(reply) }
    let seq = elements.count > 1 ? elements[1].integer.map { UInt64(clamping: $0) } : nil
    switch (status, seq) {
    case (0, let seq?):
      guard elements.count == 3, let bytes = elements[2].bytes else { throw .unexpectedReply(reply) }
      return .here(Stored(sessionID: sessionID, seq: seq, bytes: bytes))
    case (1, let seq?): return .sent(seq: seq)
    case (2, let seq?): return .kept(seq: seq)
    case (3, _): return .duplicate
    case (4, _): return .gone
    default: throw .unexpectedReply(reply)
    }
  }

  /// Log entries are the decimal seq, a colon, then the message's bytes: members of a sorted set
  /// must be unique, and two messages may be byte-equal.
  static func entries(_ members: ArraySlice<RedisReply>, _ sessionID: String, _ reply: RedisReply)
    throws(RedisError) -> [Stored]
  {
    var stored: [Stored] = []
    stored.reserveCapacity(members.count)
    for element in members {
      guard let member = element.bytes, let colon = member.firstIndex(of: UInt8(ascii: ":")),
        let seq = UInt64(String(decoding: member[..<colon], as: UTF8.self))
      else { throw .unexpectedReply(reply) }
      stored.append(Stored(sessionID: sessionID, seq: seq, bytes: Array(member[(colon + 1)...])))
    }
    return stored
  }

  static func check(_ value: String, _ what: String) throws(RedisError) {
    guard !value.isEmpty, !value.contains("\n"), !value.contains("\""), !value.contains("\\") else {
      throw .invalidRequest("a \(what) must be non-empty and hold no newline, quote or backslash")
    }
  }
}
