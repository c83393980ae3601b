/// A message published on a channel the subscriber listens to.
public struct RedisMessage: Sendable, Equatable {
  public let channel: String
  public let payload: [UInt8]

  public init(channel: String, payload: [UInt8]) {
    self.channel = channel
    self.payload = payload
  }
}
