import DialtoneHTTPClient
import DialtoneJSON
import DialtoneSupport
import Foundation

/// LiveKit's `RoomService` over Twirp with JSON bodies: each call is a `POST` authorized by a
/// server token minted for it, carrying only the grant that method needs (`roomCreate` to
/// delete a room, `roomAdmin` for that one room to list or remove its participants).
package final class LiveKitRoomService: Sendable {
  package static let service = "RoomService"

  package let server: LiveKitServerURL
  private let credentials: LiveKitCredentials
  private let http: HTTPClient
  private let clock: any DialtoneClock
  private let tokenTTL: Duration
  private let timeoutSeconds: Double

  /// `serverURL` may be the `wss://` URL clients are given. `http` is shared with the other
  /// outgoing HTTP of the server; over `http://` it speaks HTTP/1.1 whatever its configuration.
  package init(
    serverURL: String, credentials: LiveKitCredentials, http: HTTPClient, clock: any DialtoneClock = SystemClock(),
    tokenTTL: Duration = LiveKitAccessToken.serverTTL, timeoutSeconds: Double = 10
  ) throws(LiveKitRoomServiceError) {
    server = try LiveKitServerURL(serverURL)
    self.credentials = credentials
    self.http = http
    self.clock = clock
    self.tokenTTL = tokenTTL
    self.timeoutSeconds = timeoutSeconds
  }

  /// Ends the room for everyone in it.
  package func deleteRoom(_ room: String) async throws(LiveKitRoomServiceError) {
    _ = try await call("DeleteRoom", ["room": .string(room)], grant: LiveKitVideoGrant(roomCreate: true))
  }

  package func removeParticipant(room: String, identity: String) async throws(LiveKitRoomServiceError) {
    _ = try await call(
      "RemoveParticipant", ["room": .string(room), "identity": .string(identity)],
      grant: LiveKitVideoGrant(room: room, roomAdmin: true))
  }

  package func listParticipants(room: String) async throws(LiveKitRoomServiceError) -> [LiveKitParticipant] {
    let response = try await call(
      "ListParticipants", ["room": .string(room)], grant: LiveKitVideoGrant(room: room, roomAdmin: true))
    // protojson leaves an empty list out altogether.
    guard let list = response["participants"] else { return [] }
    guard let entries = list.arrayValue else { throw .malformedResponse("\"participants\" is not an array") }
    return try entries.map { (entry: JSONValue) throws(LiveKitRoomServiceError) -> LiveKitParticipant in
      guard let participant = LiveKitParticipant(json: entry) else {
        throw .malformedResponse("a participant has no identity")
      }
      return participant
    }
  }

  /// Returns the response body as JSON (`{}` for methods that return nothing).
  private func call(_ method: String, _ body: [String: JSONValue], grant: LiveKitVideoGrant)
    async throws(LiveKitRoomServiceError) -> JSONValue
  {
    let token: String
    do {
      token = try LiveKitAccessToken.server(grant, ttl: tokenTTL).signed(with: credentials, now: clock.now)
    } catch {
      throw .token(error)
    }
    let request = HTTPClientRequest(
      method: "POST", url: server.twirp(service: Self.service, method: method),
      headers: [("authorization", "Bearer \(token)"), ("content-type", "application/json")],
      body: JSONValue.object(body).serialized, timeoutSeconds: timeoutSeconds)
    let response: HTTPClientResponse
    do {
      response = try await http.send(request)
    } catch {
      throw .transport(error.description)
    }
    let json = JSONValue(parsing: response.body)
    guard (200..<300).contains(response.status) else {
      throw .twirp(
        status: response.status, code: json?["code"]?.stringValue, message: json?["msg"]?.stringValue)
    }
    if response.body.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) { return .object([:]) }
    guard let json else {
      throw .malformedResponse("\(method) answered \(response.status) with a body that is not JSON")
    }
    return json
  }
}
