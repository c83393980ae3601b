/// An authenticated device. Two identities are the same device whatever display name their
/// tokens carry: the name is shown, never matched (a device named in a timer or read back from
/// a store has none, and must still find the entry its joining token made, e.g. at the SFU).
public struct Identity: Sendable, Hashable {
  public let userId: String
  public let deviceId: String
  public let name: String?

  public init(userId: String, deviceId: String, name: String?) {
    self.userId = userId
    self.deviceId = deviceId
    self.name = name
  }

  public var peer: Peer { Peer(userId: userId, deviceId: deviceId, name: name) }

  public static func == (a: Identity, b: Identity) -> Bool { a.userId == b.userId && a.deviceId == b.deviceId }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(userId)
    hasher.combine(deviceId)
  }
}
