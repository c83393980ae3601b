import DialtoneJSON

/// The `video` claim of a LiveKit token, under LiveKit's own camelCase names. Every field is
/// optional and an unset one is left out of the token: LiveKit reads a missing permission as
/// its default (publish, subscribe and data are allowed unless set to false), so writing
/// `false` and writing nothing mean different things.
package struct LiveKitVideoGrant: Sendable, Hashable {
  package var room: String?
  package var roomJoin: Bool?
  package var canPublish: Bool?
  package var canSubscribe: Bool?
  package var canPublishData: Bool?
  package var roomCreate: Bool?
  package var roomList: Bool?
  package var roomAdmin: Bool?

  package init(
    room: String? = nil, roomJoin: Bool? = nil, canPublish: Bool? = nil, canSubscribe: Bool? = nil,
    canPublishData: Bool? = nil, roomCreate: Bool? = nil, roomList: Bool? = nil, roomAdmin: Bool? = nil
  ) {
    self.room = room
    self.roomJoin = roomJoin
    self.canPublish = canPublish
    self.canSubscribe = canSubscribe
    self.canPublishData = canPublishData
    self.roomCreate = roomCreate
    self.roomList = roomList
    self.roomAdmin = roomAdmin
  }

  /// What a call participant needs to join `room`.
  package static func join(
    room: String, canPublish: Bool = true, canSubscribe: Bool = true, canPublishData: Bool = true
  )
    -> LiveKitVideoGrant
  {
    LiveKitVideoGrant(
      room: room, roomJoin: true, canPublish: canPublish, canSubscribe: canSubscribe, canPublishData: canPublishData)
  }

  package var json: JSONValue {
    var object: [String: JSONValue] = [:]
    if let room { object["room"] = .string(room) }
    for (name, path) in Self.flags {
      if let value = self[keyPath: path] { object[name] = .bool(value) }
    }
    return .object(object)
  }

  /// Reads a grant back; members it does not know are ignored, as LiveKit ignores them.
  package init?(json: JSONValue) {
    guard let object = json.objectValue else { return nil }
    self.init()
    if let room = object["room"] {
      guard let text = room.stringValue else { return nil }
      self.room = text
    }
    for (name, path) in Self.flags {
      guard let member = object[name] else { continue }
      guard let value = member.boolValue else { return nil }
      self[keyPath: path] = value
    }
  }

  // Computed, not stored: key paths are not Sendable, so a stored static would not be
  // concurrency-safe.
  private static var flags: [(String, WritableKeyPath<LiveKitVideoGrant, Bool?>)] {
    [
      ("roomJoin", \.roomJoin), ("canPublish", \.canPublish), ("canSubscribe", \.canSubscribe),
      ("canPublishData", \.canPublishData), ("roomCreate", \.roomCreate), ("roomList", \.roomList),
      ("roomAdmin", \.roomAdmin),
    ]
  }
}
