import DialtoneJSON
import Foundation

/// A participant as `ListParticipants` reports it (the fields the seam needs).
package struct LiveKitParticipant: Sendable, Hashable {
  package var sid: String
  package var identity: String
  package var name: String?
  package var metadata: String?
  package var joinedAt: Date?

  package init(
    sid: String, identity: String, name: String? = nil, metadata: String? = nil, joinedAt: Date? = nil
  ) {
    self.sid = sid
    self.identity = identity
    self.name = name
    self.metadata = metadata
    self.joinedAt = joinedAt
  }

  /// Twirp's JSON may use the proto names (`joined_at`) or camelCase (`joinedAt`), depending on
  /// the server's options; protojson readers accept both, and so does this. Fields we do not
  /// know, or whose type surprises us, are skipped: this is a report, not a signed input.
  package init?(json: JSONValue) {
    guard let object = json.objectValue, let identity = object["identity"]?.stringValue else { return nil }
    self.identity = identity
    sid = object["sid"]?.stringValue ?? ""
    name = object["name"]?.stringValue
    metadata = object["metadata"]?.stringValue
    let joined = object["joinedAt"] ?? object["joined_at"]
    let seconds = joined?.stringValue.flatMap { Int64($0) } ?? joined?.integerValue
    joinedAt = seconds.map { Date(timeIntervalSince1970: Double($0)) }
  }
}
