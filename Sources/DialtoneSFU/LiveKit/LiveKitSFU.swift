import DialtoneCalls
import DialtoneHTTPClient
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// Group calls on LiveKit, direct: the server mints each joined device a token for the call's
/// room (named after the call id) and hands it `{url, token}`; the device connects itself.
/// LiveKit's webhooks keep membership true (a device that drops out of the room leaves the
/// call; a room LiveKit closes ends it), and RoomService removes participants and rooms.
package final class LiveKitSFU: SFUBackend {
  package struct Settings: Sendable {
    /// The URL clients connect to (usually wss://); RoomService is reached at its http(s) form.
    package var url: String
    package var credentials: LiveKitCredentials
    package var tokenTTL: Duration = LiveKitAccessToken.participantTTL

    package init(url: String, credentials: LiveKitCredentials, tokenTTL: Duration = LiveKitAccessToken.participantTTL) {
      self.url = url
      self.credentials = credentials
      self.tokenTTL = tokenTTL
    }
  }

  package let kind = SFUKind.livekit
  package let settings: Settings
  private let rooms: LiveKitRoomService
  private let webhooks: LiveKitWebhookReceiver
  private let http: HTTPClient
  private let clock: any DialtoneClock
  private let log: Log
  private let emit = Locked<@Sendable (SFUEvent) -> Void>({ _ in })
  private let work = TaskTracker()

  package init(settings: Settings, clock: any DialtoneClock, log: Log) throws(LiveKitRoomServiceError) {
    self.settings = settings
    self.clock = clock
    self.log = log
    http = HTTPClient(configuration: .init(maxConnectionsPerHost: 4))
    rooms = try LiveKitRoomService(
      serverURL: settings.url, credentials: settings.credentials, http: http, clock: clock)
    webhooks = LiveKitWebhookReceiver(verifier: LiveKitWebhookVerifier(credentials: settings.credentials), clock: clock)
  }

  package func start(events: @escaping @Sendable (SFUEvent) -> Void) async throws {
    emit.withLock { $0 = events }
  }

  package func perform(_ command: SFUCommand) {
    switch command {
    case .open:
      break  // LiveKit makes the room when the first participant connects
    case .rejoin:
      // Another node took the call over: the room is LiveKit's, not the node's, and every device
      // in it stays connected with the token it has.
      break
    case .join(let callId, let who, _):
      // `multistream` asks for what LiveKit always does: its client subscribes to every
      // participant over one connection of its own. The grant is a Janus one (20.9).
      let token = LiveKitAccessToken.participant(
        identity: Self.identity(of: who), name: who.name ?? who.userId, room: callId, ttl: settings.tokenTTL)
      do {
        let signed = try token.signed(with: settings.credentials, clock: clock)
        let media = ServerMessage.groupMedia(.init(callId: callId, sfu: .livekit, url: settings.url, token: signed))
        emit.current(.send(media, callId: callId, to: who))
      } catch {
        log.error("group call \(callId): cannot mint a LiveKit token: \(error)", callId: callId)
        emit.current(.callFailed(callId: callId, reason: "\(error)"))
      }
    case .leave(let callId, let who):
      let identity = Self.identity(of: who)
      work.start { [rooms, log] in
        do throws(LiveKitRoomServiceError) {
          try await rooms.removeParticipant(room: callId, identity: identity)
        } catch  where error.isNotFound {
          // Already gone from the room (it left LiveKit first).
        } catch {
          log.warning("group call \(callId): RemoveParticipant \(identity): \(error)", callId: callId)
        }
      }
    case .close(let callId):
      work.start { [rooms, log] in
        do throws(LiveKitRoomServiceError) {
          try await rooms.deleteRoom(callId)
        } catch  where error.isNotFound {
          // Nobody ever connected, or LiveKit closed it already.
        } catch {
          log.warning("group call \(callId): DeleteRoom: \(error)", callId: callId)
        }
      }
    case .signal(let callId, _, let message):
      // Clients negotiate with LiveKit themselves; the router never relays for this backend.
      log.debug("group call \(callId): ignoring \(message.type.rawValue) (LiveKit negotiates directly)", callId: callId)
    }
  }

  package func shutdown() async {
    await work.waitForAll()
    http.shutdown()
  }

  /// A webhook from LiveKit (`POST /v1/livekit/webhook`): verified, then applied.
  package func receiveWebhook(body: [UInt8], authorization: String?, contentType: String?) throws(LiveKitWebhookError) {
    let event = try webhooks.receive(body: body, authorization: authorization, contentType: contentType)
    guard let room = event.roomName, CallIDRules.isValid(room) else { return }
    switch event.kind {
    case .participantLeft:
      guard let identity = event.participantIdentity, let who = Self.participant(from: identity) else { return }
      emit.current(.participantLeft(callId: room, participant: who))
    case .participantJoined:
      guard let identity = event.participantIdentity, let who = Self.participant(from: identity) else { return }
      emit.current(.participantJoined(callId: room, participant: who))
    case .roomFinished:
      emit.current(.roomFinished(callId: room))
    case .roomStarted, .trackPublished, .trackUnpublished, .other:
      log.debug("LiveKit \(event.kind.wireName) in \(room)")
    }
  }

  // MARK: - Identities

  /// `user/device`, each part with `%` and `/` percent-encoded, so it reads back unambiguously.
  package static func identity(of who: Identity) -> String {
    escape(who.userId) + "/" + escape(who.deviceId)
  }

  package static func participant(from identity: String) -> Identity? {
    let parts = identity.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 2, let user = parts[0].removingPercentEncoding, let device = parts[1].removingPercentEncoding,
      !user.isEmpty, !device.isEmpty
    else { return nil }
    return Identity(userId: user, deviceId: device, name: nil)
  }

  private static func escape(_ part: String) -> String {
    part.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
  }
}
