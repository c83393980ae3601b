import DialtoneRedis

/// The messages other nodes left for one session in the inbox of its write-behind holder that
/// died before storing them (docs/architecture.md, write-behind, point 5): the letters after the
/// inbox position its last stored batch recorded (`WriteBehindStore.inboxPosition`), which that
/// node's reader kept (`WriteBehindShell.trimPoint`). The resuming node numbers them before
/// anything new. Blocking calls: run them off the cooperative pool.
package enum DeadHolderLetters {
  /// At most this many letters of the dead node's inbox are read (its bound is the inbox's).
  package static let maxRead = 100_000

  package static func letters(for session: String, of node: String, _ redis: any RedisClient) throws(RedisError)
    -> [UnnumberedLetter]
  {
    let position = try redis.get(WriteBehindStore.inboxPositionKey(node)).map { String(decoding: $0, as: UTF8.self) }
    let reply = try redis.command([
      "XRANGE", NodeMailbox.inbox(node), .string(position.map { "(" + $0 } ?? "-"), "+", "COUNT",
      .integer(Int64(maxRead)),
    ])
    guard let entries = reply.elements else { throw .unexpectedReply(reply) }
    var found: [UnnumberedLetter] = []
    for entry in entries {
      guard let parts = entry.elements, parts.count == 2, let fields = parts[1].elements, fields.count == 2,
        let payload = fields[1].bytes
      else { throw .unexpectedReply(reply) }
      // A letter of another kind, or one that does not decode, is not this session's to apply.
      guard let letter = try? UnnumberedLetter.decode(payload), letter.session == session else { continue }
      found.append(letter)
    }
    return found
  }
}
