import DialtoneRedis

/// A node's write-behind log (docs/architecture.md, write-behind point 7): the node appends each
/// batch to its own log as one entry per stripe (`WriteBehindLogEntry`), instead of touching each
/// session's keys, so that Redis's work per batch is a few calls whatever it holds; a node that
/// takes a session over reads the holder's stripe for it (`take`), which fences the holder (its
/// appends are refused until it drops the session); the holder trims what its clients
/// acknowledged (`trim`). Stripes spread one node's log over a Redis Cluster's shards: each is
/// four keys in one slot (`Keys`), a session's stripe is its slot modulo `stripes`.
///
/// Used by the node with `--write-behind-log-stripes` (`WriteBehindLogStore`: its batches, trims,
/// resumes and releases). Blocking calls: run them off the cooperative pool.
package final class WriteBehindLog: Sendable {
  let redis: any RedisClient
  /// Every node must count the same stripes: a taker finds a session's stripe by it.
  package let stripes: Int
  /// How long a stripe's keys outlive their last append, trim or take.
  package let expiry: Duration
  /// How many trims' once-keys a stripe keeps (`WriteBehindLogTrimmed.Onces`).
  package let onceTrims: Int

  package init(_ redis: any RedisClient, stripes: Int, expiry: Duration, onceTrims: Int = 64) {
    self.redis = redis
    self.stripes = max(1, stripes)
    self.expiry = expiry
    self.onceTrims = max(1, onceTrims)
  }

  package static var scripts: [RedisScript] { [appendScript, trimScript, takeScript, releaseScript] }

  /// A stripe's keys, sharing the hash tag `{node:stripe}`.
  package struct Keys: Sendable, Equatable {
    package let log: String
    package let fence: String
    package let checkpoints: String
    package let onces: String

    package init(node: String, stripe: Int) {
      log = "dt:wbl:{\(node):\(stripe)}"
      fence = log + ":fence"
      checkpoints = log + ":state"
      onces = log + ":onces"
    }

    var all: [RedisArgument] { [.string(log), .string(fence), .string(checkpoints), .string(onces)] }
  }

  package func stripe(of session: String) -> Int { RedisSlot.of(session) % stripes }

  package enum Appended: Sendable, Equatable {
    /// Stored, as the stripe's entry `number` (counted from the stripe's first entry ever).
    case appended(number: UInt64)
    /// Sessions were taken since the take count the holder gave: every session taken and not
    /// yet released, with its taker's epoch; drop those held at an older epoch, append again
    /// with `takes`.
    case refused(takes: UInt64, taken: [String: UInt64])
  }

  /// Appends `entry` to `node`'s stripe, if no session was taken from it since `takes`.
  package func append(_ entry: WriteBehindLogEntry, node: String, stripe: Int, takes: UInt64)
    throws(RedisError) -> Appended
  {
    let (keys, arguments) = try appendArguments(entry, node: node, stripe: stripe, takes: takes)
    return try Self.appended(try redis.eval(Self.appendScript, keys: keys, arguments: arguments))
  }

  /// The same append as a command for a pipeline (`EVALSHA`: the scripts are loaded when the
  /// link connects; a NOSCRIPT reply is the caller's to send again with `append`).
  package func appendCommand(_ entry: WriteBehindLogEntry, node: String, stripe: Int, takes: UInt64)
    throws(RedisError) -> [RedisArgument]
  {
    let (keys, arguments) = try appendArguments(entry, node: node, stripe: stripe, takes: takes)
    return RedisConnection.evalsha(Self.appendScript, keys: keys, arguments: arguments)
  }

  private func appendArguments(_ entry: WriteBehindLogEntry, node: String, stripe: Int, takes: UInt64)
    throws(RedisError) -> (keys: [RedisArgument], arguments: [RedisArgument])
  {
    let keys = Keys(node: node, stripe: stripe)
    return (
      [.string(keys.log), .string(keys.fence)],
      [.string(String(takes)), .bytes(entry.encoded()), try .milliseconds(expiry)]
    )
  }

  /// An append's reply read (an error reply thrown as the server's error).
  package static func appended(_ reply: RedisReply) throws(RedisError) -> Appended {
    if let failure = reply.failure { throw failure }
    guard let elements = reply.elements, let code = elements.first?.integer else { throw .unexpectedReply(reply) }
    if code == 1, elements.count == 2, let number = elements[1].integer, number >= 0 {
      return .appended(number: UInt64(number))
    }
    guard code == 0, let (takes, taken) = Self.refusal(elements) else { throw .unexpectedReply(reply) }
    return .refused(takes: takes, taken: taken)
  }

  package enum Trimmed: Sendable, Equatable {
    /// The stripe's first entry is now `head` (short of what was asked while a taker holds entries).
    case trimmed(head: UInt64)
    /// Sessions were taken since the take count the holder gave (as `Appended.refused`): nothing
    /// was trimmed or written.
    case refused(takes: UInt64, taken: [String: UInt64])
  }

  /// Drops `node`'s stripe's entries before `keepFrom`, keeping the trimmed sessions'
  /// checkpoints and once-keys, if no session was taken from it since `takes`.
  package func trim(
    node: String, stripe: Int, keepFrom: UInt64, takes: UInt64,
    checkpoints: [String: WriteBehindLogTrimmed.Checkpoint], onces: WriteBehindLogTrimmed.Onces
  ) throws(RedisError) -> Trimmed {
    var arguments: [RedisArgument] = [
      .string(String(takes)), .string(String(keepFrom)), try .milliseconds(expiry), .integer(Int64(onceTrims)),
      .bytes(onces.pairs.isEmpty ? [] : onces.encoded()),
    ]
    arguments.reserveCapacity(arguments.count + 2 * checkpoints.count)
    for (session, checkpoint) in checkpoints.sorted(by: { $0.key < $1.key }) {
      arguments += [.string(session), .string(checkpoint.text)]
    }
    let reply = try redis.eval(Self.trimScript, keys: Keys(node: node, stripe: stripe).all, arguments: arguments)
    guard let elements = reply.elements, let code = elements.first?.integer else { throw .unexpectedReply(reply) }
    if code == 1, elements.count == 2, let head = Self.number(elements[1]) { return .trimmed(head: head) }
    guard code == 0, let (takes, taken) = Self.refusal(elements) else { throw .unexpectedReply(reply) }
    return .refused(takes: takes, taken: taken)
  }

  package enum Taken: Sendable, Equatable {
    case taken(WriteBehindLogTaken)
    /// A taker at `epoch`, this one's or later, took it already.
    case refused(epoch: UInt64)
  }

  /// Takes `session` from `node`'s stripe for a taker that moved the session's epoch to `epoch`
  /// first: from now on the holder's appends are refused until it drops the session, and its
  /// trims keep every entry the stripe holds now until the taker releases them (`release`).
  /// What the stripe held for the session, read in the same step; a malformed entry throws
  /// `WriteBehindLogMalformed` (the take itself happened).
  package func take(_ session: String, epoch: UInt64, from node: String) throws -> Taken {
    let keys = Keys(node: node, stripe: stripe(of: session))
    let reply = try redis.eval(
      Self.takeScript, keys: keys.all,
      arguments: [.string(session), .string(String(epoch)), try .milliseconds(expiry)])
    guard let elements = reply.elements, let code = elements.first?.integer else {
      throw RedisError.unexpectedReply(reply)
    }
    if code == 0, elements.count == 2, let epoch = Self.number(elements[1]) { return .refused(epoch: epoch) }
    guard code == 1, elements.count == 5, let checkpoint = elements[2].string,
      let blobs = elements[3].elements?.compactMap(\.bytes), blobs.count == elements[3].elements?.count,
      let entries = elements[4].elements?.compactMap(\.bytes), entries.count == elements[4].elements?.count
    else { throw RedisError.unexpectedReply(reply) }
    return .taken(try WriteBehindLogTaken(session: session, checkpoint: checkpoint, onceBlobs: blobs, entries: entries))
  }

  /// Lets `session`'s entries in `node`'s stripe go: by its taker at `epoch` once its own log
  /// holds what it took, or by the holder once the session ended. False when a later taker's
  /// mark is there (it still needs them). The take stays listed as released until the holder has
  /// been told (`takenSince`).
  @discardableResult
  package func release(_ session: String, epoch: UInt64, from node: String) throws(RedisError) -> Bool {
    let keys = Keys(node: node, stripe: stripe(of: session))
    let reply = try redis.eval(
      Self.releaseScript, keys: [.string(keys.fence), .string(keys.checkpoints)],
      arguments: [.string(session), .string(String(epoch))])
    guard let released = reply.integer else { throw .unexpectedReply(reply) }
    return released == 1
  }

  /// `takenSince`'s refusal: {0, gen, then session and epoch pairs}.
  private static func refusal(_ elements: [RedisReply]) -> (takes: UInt64, taken: [String: UInt64])? {
    guard elements.count >= 2, elements.count.isMultiple(of: 2), let takes = number(elements[1]) else { return nil }
    var taken: [String: UInt64] = [:]
    for index in stride(from: 2, to: elements.count, by: 2) {
      guard let session = elements[index].string, let epoch = number(elements[index + 1]) else { return nil }
      taken[session] = epoch
    }
    return (takes, taken)
  }

  /// A count Redis returns as an integer or as the string a hash holds.
  private static func number(_ reply: RedisReply) -> UInt64? {
    if let value = reply.integer { return value >= 0 ? UInt64(value) : nil }
    return reply.string.flatMap { UInt64($0) }
  }
}
