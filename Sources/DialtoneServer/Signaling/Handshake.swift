import DialtoneCrypto
import DialtoneMetrics
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The first message of every socket: a `hello`, read, checked and authenticated; and the
/// `welcome` that answers it once its session is open.
struct Handshake {
  let authenticator: TokenAuthenticator
  let iceServers: IceServerIssuer
  let observations: Observations
  let heartbeatSeconds: Int
  let maxMessageBytes: Int

  enum Verdict {
    /// Answered with the error, then closed with the code.
    case refused(ServerMessage.ErrorMessage, close: CloseCode)
    case accepted(ClientMessage.Hello, id: String, Identity)
  }

  func read(_ bytes: [UInt8], isText: Bool, headerToken: String?) -> Verdict {
    guard isText else {
      return .refused(
        .init(code: .badRequest, message: "binary frames are not part of the protocol"), close: .protocolError)
    }
    let frame: ClientEnvelope
    do {
      frame = try MessageCodec.decodeClientMessage(bytes)
    } catch {
      return .refused(
        .init(replyTo: error.replyTo, code: error.code, message: "expected hello: \(error.message)"),
        close: .protocolError)
    }
    guard case .hello(let hello) = frame.message, let helloID = frame.id else {
      return .refused(
        .init(replyTo: frame.id, code: .invalidState, message: "the first message must be hello"), close: .protocolError
      )
    }
    guard ProtocolVersion.supported.contains(hello.version) else {
      return .refused(
        .init(
          replyTo: helloID, code: .unsupportedVersion,
          message: "version \(hello.version) is not supported (server speaks \(ProtocolVersion.supported))"),
        close: .protocolError)
    }
    guard let token = hello.token ?? headerToken else {
      return .refused(
        .init(replyTo: helloID, code: .unauthorized, message: "no token in hello or Authorization header"),
        close: .unauthorized)
    }
    do {
      return .accepted(hello, id: helloID, try authenticator.authenticate(token))
    } catch {
      return .refused(.init(replyTo: helloID, code: .unauthorized, message: error.description), close: .unauthorized)
    }
  }

  /// The welcome of a session (counted in the metrics).
  func welcome(
    replyTo helloID: String, session: String, _ identity: Identity, resumed: Bool, resync: Bool, features: [String],
    now: Date
  ) -> ServerMessage {
    var welcome = ServerMessage.Welcome(
      replyTo: helloID, sessionId: session, userId: identity.userId, deviceId: identity.deviceId,
      resumed: resumed, resync: resync, heartbeatSeconds: heartbeatSeconds, maxMessageBytes: maxMessageBytes,
      iceServers: iceServers.servers(for: identity.userId, now: now), iceServersTtl: iceServers.ttl)
    var agreed = Set<String>()
    welcome.features = features.filter { ProtocolFeature.supported.contains($0) && agreed.insert($0).inserted }
    observations.iceServersIssued(welcome.iceServers, source: "welcome")
    observations.metrics.sessionsStarted.labels(resumed ? "resumed" : resync ? "resync" : "new").increment()
    observations.metrics.messagesReceived.labels("hello").increment()
    return .welcome(welcome)
  }

  static func newSessionID() -> String { "s_" + SecureRandom.token(byteCount: 12) }
}
