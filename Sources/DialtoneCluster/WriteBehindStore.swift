import DialtoneJSON
import DialtoneRedis

/// Where a write-behind holder (`WriteBehindHolder`) stores its batches: one script per batch,
/// one round trip for the frames of every session in it, with their replies and each session's
/// last letter position. Redis refuses a session's frames whose epoch is not the session's
/// (another node opened or resumed it: `SessionLedger.open` and `resume` increment the epoch) or
/// whose seq does not follow the last one stored, so a holder that stalled past its lease never
/// writes after its successor.
///
/// One Redis only: a batch spans sessions in many slots, which a Redis Cluster refuses (its
/// layout is docs/architecture.md's item 7, not built). Blocking calls: run them off the
/// cooperative pool.
package final class WriteBehindStore: Sendable {
  let redis: any RedisClient
  package let limits: SessionLedger.Limits

  package init(_ redis: any RedisClient, limits: SessionLedger.Limits) {
    self.redis = redis
    self.limits = limits
  }

  /// The scripts `store` needs the server to know: load them on the connection first.
  package static var scripts: [RedisScript] { [batchScript, claimScript] }

  /// Stores the batch `node` numbered; the sessions whose frames Redis refused (every other
  /// session's frames are stored, and the inbox position with them).
  package func store(_ batch: WriteBehindBatch, from node: String) throws(RedisError) -> [String:
    WriteBehindBatch.Refusal]
  {
    guard !redis.isCluster else {
      throw .invalidRequest("write-behind batches need one Redis: a Redis Cluster's layout is not built")
    }
    var keys: [RedisArgument] = []
    keys.reserveCapacity(batch.sessions.count)
    var arguments: [RedisArgument] = [
      .integer(Int64(limits.capacity)), .integer(Int64(limits.maxBytes)), .integer(Int64(limits.replyMemory)),
      .integer(Int64(limits.onceMemory)),
    ]
    arguments.reserveCapacity(4 + batch.sessions.count * 4 + batch.frameCount * 3)
    // Sessions whose frames skip a seq: a gap, as Redis would find it, fenced without frames (so
    // that a superseded or gone session is still refused as such).
    var gapped: [String] = []
    for session in batch.sessions {
      // (A session without frames is only fenced: 0 is at or below any last seq.)
      let first = session.frames.first?.seq ?? 0
      let consecutive = session.frames.indices.allSatisfy { session.frames[$0].seq == first &+ UInt64($0) }
      if !consecutive { gapped.append(session.id) }
      let frames = consecutive ? session.frames : []
      keys.append(SessionLedger.metaKey(session.id))
      // Appended one by one: an array literal added is an array allocated per session and frame.
      arguments.append(.string(String(session.epoch)))
      arguments.append(.integer(Int64(frames.count)))
      arguments.append(.string(session.letterPosition ?? ""))
      arguments.append(.string(String(first)))
      for frame in frames {
        arguments.append(.bytes(Self.logEntry(frame)))
        arguments.append(.string(frame.requestID ?? ""))
        arguments.append(.string(frame.once ?? ""))
      }
    }
    let reply = try redis.eval(Self.batchScript, keys: keys, arguments: arguments)
    guard let elements = reply.elements, elements.count.isMultiple(of: 2) else { throw .unexpectedReply(reply) }
    var refused: [String: WriteBehindBatch.Refusal] = [:]
    for index in stride(from: 0, to: elements.count, by: 2) {
      guard let number = elements[index].integer, number >= 1, number <= batch.sessions.count,
        let code = elements[index + 1].integer
      else { throw .unexpectedReply(reply) }
      let refusal: WriteBehindBatch.Refusal
      switch code {
      case 1: refusal = .superseded
      case 2: refusal = .gap
      case 3: refusal = .gone
      default: throw .unexpectedReply(reply)
      }
      refused[batch.sessions[Int(number) - 1].id] = refusal
    }
    for session in gapped where refused[session] == nil { refused[session] = .gap }
    return refused
  }

  /// A frame as the session's log holds it: "seq:frame".
  /// Written into one allocation reserved at its size (`JSONWriter` writes the digits in place):
  /// the digits' string and the array grown from it cost two more per frame.
  static func logEntry(_ frame: WriteBehindBatch.Frame) -> [UInt8] {
    // Seqs stay below 2^53 (protocol.md 5.2): the clamp never bites.
    var entry = JSONWriter(capacity: 21 + frame.bytes.count)
    entry.writeInteger(Int64(clamping: frame.seq))
    entry.append(UInt8(ascii: ":"))
    entry.append(contentsOf: frame.bytes)
    return entry.bytes
  }

  /// What a holder starts a session from (`claim`).
  package struct Claimed: Sendable, Equatable {
    /// The last seq Redis has, which the holder numbers on from (a message another node
    /// appended since the open or resume is among them).
    package let lastSeq: UInt64
    /// The once-keys of the frames stored (a letter's key is remembered only once it is stored).
    package let onces: [String]

    package init(lastSeq: UInt64, onces: [String] = []) {
      self.lastSeq = lastSeq
      self.onces = onces
    }
  }

  /// Marks the session, won at `epoch`, as numbered by its holder from now on (other nodes send
  /// it unnumbered letters: `SessionLedger`'s append step); nil when the session has another
  /// epoch now or is gone.
  package func claim(_ session: String, epoch: UInt64) throws(RedisError) -> Claimed? {
    let keys = SessionLedger.keys(session)
    let reply = try redis.eval(Self.claimScript, keys: [keys.meta, keys.once], arguments: [.string(String(epoch))])
    if reply == .null { return nil }
    guard let elements = reply.elements, let last = elements.first?.integer, last >= 0 else {
      throw .unexpectedReply(reply)
    }
    var onces: [String] = []
    for element in elements.dropFirst() {
      guard let key = element.bytes else { throw .unexpectedReply(reply) }
      onces.append(String(decoding: key, as: UTF8.self))
    }
    return Claimed(lastSeq: UInt64(last), onces: onces)
  }

  /// KEYS: the session's meta hash and once-keys. ARGV: the epoch won. Returns {last seq, the
  /// once-keys...}, or nil.
  static let claimScript = RedisScript(
    """
    local m = redis.call('HMGET', KEYS[1], 'epoch', 'last')
    if m[1] ~= ARGV[1] or not m[2] then return nil end
    redis.call('HSET', KEYS[1], 'wb', '1')
    local reply = {tonumber(m[2])}
    for _, key in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do reply[#reply + 1] = key end
    return reply
    """)

  /// The inbox position of the last letter for the session that its holder stored (nil: none):
  /// its holder's unstored letters are after it.
  package func letterPosition(of session: String) throws(RedisError) -> String? {
    try redis.command(["HGET", SessionLedger.keys(session).meta, "lp"]).string
  }
}
