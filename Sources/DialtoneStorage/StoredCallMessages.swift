import DialtoneCalls
import DialtoneProtocol

/// How `live_calls` keeps a call's invite and accept: every field of theirs but a flag each (and
/// the answerer's name) is a column of the row already, so a message that matches its row field
/// for field is stored as `rebuilt` (an empty text) with those few values in columns of their
/// own, and made again from the row when read. Encoding the two messages' JSON was ~13k
/// instructions of a call's journal work. A message that differs from its row in any field (none
/// does as `CallRouter` makes them; the store does not rely on it) is stored as JSON, as every
/// row written before was, and read back as such.
enum StoredCallMessages {
  /// What the `invite` or the `accept` column holds for a message made again from the row.
  static let rebuilt = ""

  /// The invite's `preconnect`, when the invite (its offer taken out) is the one `invite(of:…)`
  /// makes from the call's row; nil when it is not.
  static func preconnect(of invite: ServerMessage, in call: LiveCallSnapshot) -> Bool? {
    // The whole message compared, not the fields known today: a field added to `Invite` later
    // makes the message differ (and go as JSON) until the row keeps it too.
    guard case .invite(let body) = invite,
      invite
        == Self.invite(
          of: call.callId, caller: call.caller, video: call.video, createdAt: call.createdAt,
          preconnect: body.preconnect)
    else { return nil }
    return body.preconnect
  }

  /// The accept's answering device's name and `preconnected`, when the accept (its answer taken
  /// out) is the one `accept(of:…)` makes from the call's row; nil when it is not.
  static func answerer(of accept: ServerMessage, in call: LiveCallSnapshot) -> (name: String?, preconnected: Bool)? {
    guard case .accept(let body) = accept, let device = call.answeredBy,
      accept
        == Self.accept(
          of: call.callId, calleeId: call.calleeId, device: device, name: body.from.name,
          preconnected: body.preconnected)
    else { return nil }
    return (body.from.name, body.preconnected)
  }

  /// What the `invite` column holds for `invite` (its offer taken out), and `invite_preconnect`:
  /// `rebuilt` and the flag when the row makes it again, its JSON and nil when not.
  static func stored(invite: ServerMessage, in call: LiveCallSnapshot) -> (text: String, preconnect: Bool?) {
    if let preconnect = preconnect(of: invite, in: call) { return (rebuilt, preconnect) }
    return (MessageCodec.encodeString(invite, seq: nil), nil)
  }

  /// What the `accept` column holds for `accept` (its answer taken out), with `answerer_name`
  /// and `accept_preconnected`: as for `stored(invite:in:)`.
  static func stored(accept: ServerMessage, in call: LiveCallSnapshot)
    -> (text: String, answerer: (name: String?, preconnected: Bool)?)
  {
    if let answerer = answerer(of: accept, in: call) { return (rebuilt, answerer) }
    return (MessageCodec.encodeString(accept, seq: nil), nil)
  }

  /// The invite a row holds (without its offer): made again from the row, or decoded from its
  /// JSON; nil when the text is neither.
  static func invite(
    text: String, preconnect: Bool?, callId: CallID, caller: Identity, video: Bool, createdAt: Int64
  ) -> ServerMessage? {
    if text == rebuilt, let preconnect {
      return invite(of: callId, caller: caller, video: video, createdAt: createdAt, preconnect: preconnect)
    }
    return try? MessageCodec.decodeServerMessage(text).message
  }

  /// The accept a row holds (without its answer), as for `invite(text:…)`; nil for none.
  static func accept(
    text: String?, callId: CallID, calleeId: String, device: String?, name: String?, preconnected: Bool?
  ) -> ServerMessage? {
    if text == rebuilt, let device, let preconnected {
      return accept(of: callId, calleeId: calleeId, device: device, name: name, preconnected: preconnected)
    }
    return text.flatMap { try? MessageCodec.decodeServerMessage($0).message }
  }

  /// The invite `preconnect(of:in:)` took apart, without its offer.
  static func invite(of callId: CallID, caller: Identity, video: Bool, createdAt: Int64, preconnect: Bool)
    -> ServerMessage
  {
    .invite(.init(callId: callId, from: caller.peer, video: video, createdAt: createdAt, preconnect: preconnect))
  }

  /// The accept `answerer(of:in:)` took apart, without its answer.
  static func accept(of callId: CallID, calleeId: String, device: String, name: String?, preconnected: Bool)
    -> ServerMessage
  {
    .accept(
      .init(callId: callId, from: Peer(userId: calleeId, deviceId: device, name: name), preconnected: preconnected))
  }
}
