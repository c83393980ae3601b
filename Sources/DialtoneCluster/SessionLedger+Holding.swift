import DialtoneRedis

/// A write-behind node's resume (docs/architecture.md, write-behind, point 5): the session is
/// taken over whole in one script, with the letters its previous holder had not stored.
extension SessionLedger {
  /// What a write-behind node resumes a session with.
  package struct HeldResumption: Sendable, Equatable {
    /// As `Resumption.resumed`: the last seq stored (numbering goes on after it), the epoch won,
    /// the frames to replay and the remembered answers.
    package let lastSeq: UInt64
    package let epoch: UInt64
    package let pending: [Stored]
    package let replies: [String: [UInt8]]
    /// The letters other nodes left the previous holder (this node or another, alive or dead)
    /// that it had not stored, in inbox order: numbered before anything new.
    package let letters: [UnnumberedLetter]
    /// Where each of `letters` is now (one each): the resume copied them to the end of this
    /// node's inbox, where the session's next resume reads them until a batch stores them.
    package let positions: [String]
    /// Where each of `letters` was read, in the previous holder's inbox (one each).
    package let origins: [String]
    /// The newest entry of this node's inbox after the resume (the last copy, if any): its
    /// reader's copies of letters up to there are among `letters` or stored already.
    package let lettersAfter: String
    /// The once-keys of the frames stored (`WriteBehindStore.claim`).
    package let onces: [String]
  }

  package enum HoldingResumption: Sendable, Equatable {
    case resumed(HeldResumption)
    case resync
    case gone
  }

  /// `resume` for a write-behind node (`resumeScript`'s holding half): the session is marked
  /// numbered by `node` in the same step (no `WriteBehindStore.claim` after it). One Redis only.
  package func resumeHolding(
    _ sessionID: String, userId: String, deviceId: String, from lastSeq: UInt64, node: String, allowingAhead: UInt64
  ) throws(RedisError) -> HoldingResumption {
    try Self.check(node, "node")
    try Self.check(sessionID, "session id")
    guard !redis.isCluster else {
      throw .invalidRequest("a write-behind resume needs one Redis: a Redis Cluster's layout is not built")
    }
    let reply = try redis.eval(
      Self.resumeScript, keys: Self.keys(sessionID).all,
      arguments: [
        .string(userId), .string(deviceId), .integer(Int64(clamping: lastSeq)), .string(node),
        try .milliseconds(limits.expiry), .integer(Int64(clamping: allowingAhead)), "1",
        .integer(Int64(limits.capacity)), .string(sessionID), try .milliseconds(limits.inboxExpiry),
      ])
    guard let elements = reply.elements, let status = elements.first?.integer else { throw .unexpectedReply(reply) }
    switch status {
    case 0: break
    case 1: return .resync
    default: return .gone
    }
    var at = 4
    func integer() throws(RedisError) -> Int {
      guard at < elements.count, let value = elements[at].integer, value >= 0 else { throw .unexpectedReply(reply) }
      at += 1
      return Int(value)
    }
    func bytes() throws(RedisError) -> [UInt8] {
      guard at < elements.count, let value = elements[at].bytes else { throw .unexpectedReply(reply) }
      at += 1
      return value
    }
    guard elements.count >= 4, let last = elements[1].integer, let epoch = elements[2].integer, epoch > 0,
      let count = elements[3].integer, count >= 0, elements.count >= 4 + Int(count)
    else { throw .unexpectedReply(reply) }
    at += Int(count)
    let pending = try Self.entries(elements[4..<at], sessionID, reply)
    let replyItems = try integer()
    guard replyItems.isMultiple(of: 2) else { throw .unexpectedReply(reply) }
    var replies: [String: [UInt8]] = [:]
    for _ in 0..<(replyItems / 2) {
      let id = String(decoding: try bytes(), as: UTF8.self)
      replies[id] = try bytes()
    }
    let cut = String(decoding: try bytes(), as: UTF8.self)
    var letters: [UnnumberedLetter] = []
    var positions: [String] = []
    var origins: [String] = []
    for _ in 0..<(try integer()) {
      // Chosen by their prefix in the script: a letter that does not decode is not this session's.
      let payload = try bytes()
      let position = String(decoding: try bytes(), as: UTF8.self)
      let origin = String(decoding: try bytes(), as: UTF8.self)
      if let letter = try? UnnumberedLetter.decode(payload), letter.session == sessionID {
        letters.append(letter)
        positions.append(position)
        origins.append(origin)
      }
    }
    var onces: [String] = []
    while at < elements.count { onces.append(String(decoding: try bytes(), as: UTF8.self)) }
    return .resumed(
      HeldResumption(
        lastSeq: UInt64(clamping: last), epoch: UInt64(epoch), pending: pending, replies: replies, letters: letters,
        positions: positions, origins: origins, lettersAfter: cut, onces: onces))
  }
}
