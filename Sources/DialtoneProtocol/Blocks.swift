/// A user someone blocks: no call from them rings any of the blocker's devices (protocol.md §16.10).
public struct BlockedUser: WireCodable, Hashable {
  public var userId: String
  /// When the block was made, ms since the Unix epoch.
  public var createdAt: Int64

  public init(userId: String, createdAt: Int64) {
    self.userId = userId
    self.createdAt = createdAt
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(userId: "", createdAt: 0) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("createdAt", &createdAt, 0...Int64.max)
    try c.string("userId", &userId, .userId)
  }
}

/// `GET /v1/blocks`: the users the caller of the request blocks, oldest block first.
public struct BlockListResponse: WireCodable, Hashable {
  public var blocks: [BlockedUser]

  public init(blocks: [BlockedUser]) { self.blocks = blocks }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(blocks: []) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.objects("blocks", &blocks)
  }
}
