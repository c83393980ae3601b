import DialtoneJSON
import Foundation

/// The part of a LiveKit `WebhookEvent` that the group-call seam acts on.
package struct LiveKitWebhookEvent: Sendable, Hashable {
  package enum Kind: Sendable, Hashable {
    case roomStarted
    case roomFinished
    case participantJoined
    case participantLeft
    case trackPublished
    case trackUnpublished
    /// Events we do not act on (egress, ingress, `participant_connection_aborted`, ...), kept by
    /// name so a newer LiveKit's events are passed along, not refused.
    case other(String)

    package init(wireName: String) {
      switch wireName {
      case "room_started": self = .roomStarted
      case "room_finished": self = .roomFinished
      case "participant_joined": self = .participantJoined
      case "participant_left": self = .participantLeft
      case "track_published": self = .trackPublished
      case "track_unpublished": self = .trackUnpublished
      default: self = .other(wireName)
      }
    }

    package var wireName: String {
      switch self {
      case .roomStarted: return "room_started"
      case .roomFinished: return "room_finished"
      case .participantJoined: return "participant_joined"
      case .participantLeft: return "participant_left"
      case .trackPublished: return "track_published"
      case .trackUnpublished: return "track_unpublished"
      case .other(let name): return name
      }
    }
  }

  package var id: String
  package var kind: Kind
  package var roomName: String?
  package var roomSid: String?
  package var participantIdentity: String?
  package var participantSid: String?
  package var trackSid: String?
  package var createdAt: Date?

  package init(
    id: String, kind: Kind, roomName: String? = nil, roomSid: String? = nil, participantIdentity: String? = nil,
    participantSid: String? = nil, trackSid: String? = nil, createdAt: Date? = nil
  ) {
    self.id = id
    self.kind = kind
    self.roomName = roomName
    self.roomSid = roomSid
    self.participantIdentity = participantIdentity
    self.participantSid = participantSid
    self.trackSid = trackSid
    self.createdAt = createdAt
  }
}

extension LiveKitWebhookEvent {
  /// Nesting limit for the body: a webhook event is a few levels deep (event → room →
  /// codecs or participant → tracks → layers).
  package static let maxJSONDepth = 32

  /// Parses protojson as LiveKit writes it: camelCase names, int64 as strings, fields at their
  /// default value left out, unknown fields ignored (newer servers add some). A known field of
  /// the wrong type is an error, as it is for protojson. `id` is required: the replay guard
  /// keys on it (every LiveKit server that signs its webhooks sets it).
  package static func parse(_ body: [UInt8]) throws(LiveKitWebhookError) -> LiveKitWebhookEvent {
    let root: JSONValue
    do {
      root = try JSONValue.parse(body, maxDepth: maxJSONDepth)
    } catch {
      throw .malformedBody("not JSON: \(error)")
    }
    guard let event = root.objectValue else { throw .malformedBody("the body is not a JSON object") }
    guard let name = try string(event, "event"), !name.isEmpty else { throw .malformedBody("no \"event\"") }
    guard let id = try string(event, "id"), !id.isEmpty else { throw .malformedBody("no \"id\"") }
    let room = try message(event, "room") ?? [:]
    let participant = try message(event, "participant") ?? [:]
    let track = try message(event, "track") ?? [:]
    let createdAt = try int64(event, "createdAt")
    return LiveKitWebhookEvent(
      id: id, kind: Kind(wireName: name), roomName: try string(room, "name"), roomSid: try string(room, "sid"),
      participantIdentity: try string(participant, "identity"), participantSid: try string(participant, "sid"),
      trackSid: try string(track, "sid"),
      createdAt: createdAt.map { Date(timeIntervalSince1970: Double($0)) })
  }

  /// protojson reads `null` as "not set" for every field, so it is nil here too; so is `""`,
  /// which a protobuf string field cannot tell apart from unset.
  private static func string(_ object: [String: JSONValue], _ key: String) throws(LiveKitWebhookError) -> String? {
    switch object[key] {
    case nil, .null?: return nil
    case .string(let text)?: return text.isEmpty ? nil : text
    case let other?: throw .malformedBody("\"\(key)\" is a \(other.typeName), not a string")
    }
  }

  private static func message(_ object: [String: JSONValue], _ key: String) throws(LiveKitWebhookError)
    -> [String: JSONValue]?
  {
    switch object[key] {
    case nil, .null?: return nil
    case .object(let members)?: return members
    case let other?: throw .malformedBody("\"\(key)\" is a \(other.typeName), not an object")
    }
  }

  /// protojson writes int64 as a decimal string and accepts a plain number as well.
  private static func int64(_ object: [String: JSONValue], _ key: String) throws(LiveKitWebhookError) -> Int64? {
    switch object[key] {
    case nil, .null?: return nil
    case .string(let text)?:
      guard let value = Int64(text) else { throw .malformedBody("\"\(key)\" is not an int64: \"\(text)\"") }
      return value
    case let number?:
      guard let value = number.integerValue else { throw .malformedBody("\"\(key)\" is not an int64") }
      return value
    }
  }
}
