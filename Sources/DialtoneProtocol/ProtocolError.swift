/// A decoding or validation failure, ready to be sent back as an `error` message.
///
/// `message` names the field at fault (`"candidate.candidate" must be a string`).
/// When the offending message carried a valid `id`, `replyTo` holds it, so the server's
/// `error` can answer that request; `callId` likewise when a valid one was present.
/// `seq` is set when a server message that carried a valid seq failed to decode on the
/// client (the client must still acknowledge it).
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
  public var code: ErrorCode
  public var message: String
  /// The `id` of the offending client message, when it could be read.
  public var replyTo: String?
  /// The `callId` of the offending message, when it could be read.
  public var callId: CallID?
  /// The `type` of the offending message, when it could be read.
  public var messageType: String?
  /// The `seq` of the offending server message, when it could be read.
  public var seq: UInt64?

  public init(
    _ code: ErrorCode, _ message: String, replyTo: String? = nil, callId: CallID? = nil,
    messageType: String? = nil, seq: UInt64? = nil
  ) {
    self.code = code
    self.message = message
    self.replyTo = replyTo
    self.callId = callId
    self.messageType = messageType
    self.seq = seq
  }

  /// `"<code>: <message>"`, e.g. `bad-request: "sdp" is required`.
  public var description: String { "\(code.rawValue): \(message)" }

  /// The `error` message a server sends for this failure.
  public var serverMessage: ServerMessage {
    .error(ServerMessage.ErrorMessage(replyTo: replyTo, code: code, message: message, callId: callId))
  }
}
