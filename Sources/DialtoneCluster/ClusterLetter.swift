import DialtoneCalls
import DialtoneJSON
import DialtoneProtocol

/// What one node of a cluster tells another through its inbox (`NodeMailbox`).
package enum ClusterLetter: Sendable, Equatable {
  /// A message another node stored for a session the receiving node holds: its seq and exact
  /// bytes (`SessionLedger` writes these letters itself).
  case frame(sessionID: String, seq: UInt64, bytes: [UInt8])
  /// A session the receiving node holds missed a message that could not be stored: its socket
  /// must close so that the client resyncs.
  case broken(sessionID: String)
  /// A device's request about a call the receiving node runs.
  case request(ForwardedRequest)
  /// The answer to a request forwarded by the receiving node, which the answering node stored in
  /// the requesting session already (`SessionLedger`): for the receiving node's bookkeeping.
  case reply(sessionID: String, requestID: String, ServerMessage)
  /// Write-behind: the answer to a relayed candidate forwarded by the receiving node, which the
  /// answering node did not store (its frame's exact bytes, without a seq): it sends this letter
  /// only once the copies the candidate caused are stored, and the receiving node writes it to the
  /// requester as it is, neither numbered nor stored nor remembered (protocol.md §7.13).
  case unstoredReply(sessionID: String, requestID: String, bytes: [UInt8])
  /// A device of a user in a call the receiving node runs connected (in a new session or a
  /// resumed one) or lost its socket on another node.
  case device(Identity, connected: Bool, newSession: Bool)
  /// The device's session on the receiving node was replaced by a newer one elsewhere.
  case replaced(Identity, sessionID: String)
}

extension ClusterLetter {
  /// The letter's kind, as its header names it (a metric's label).
  package var kind: String {
    switch self {
    case .frame: "frame"
    case .broken: "broken"
    case .request: "request"
    case .reply: "reply"
    case .unstoredReply: "unstored-reply"
    case .device: "device"
    case .replaced: "replaced"
    }
  }
}

/// A letter's bytes: a line of JSON naming its kind and addressees, then the message it carries
/// as the wire protocol encodes it (the header's JSON escapes newlines, so the first newline ends
/// it).
package enum ClusterLetterCodec {
  package struct Malformed: Error, CustomStringConvertible {
    package let description: String
  }

  package static func encode(_ letter: ClusterLetter) -> [UInt8] {
    let header: JSONValue
    let body: [UInt8]
    switch letter {
    case .frame(let sessionID, let seq, let bytes):
      return Array((SessionLedger.letterHeader(sessionID: sessionID, seq: seq) + "\n").utf8) + bytes
    case .broken(let sessionID):
      header = ["k": "broken", "s": .string(sessionID)]
      body = []
    case .request(let request):
      header = [
        "k": "request", "from": identity(request.from), "node": .string(request.origin.node),
        "s": .string(request.origin.sessionID),
      ]
      body = MessageCodec.encode(request.message, id: request.id)
    case .reply(let sessionID, let requestID, let message):
      header = ["k": "reply", "s": .string(sessionID), "r": .string(requestID)]
      body = MessageCodec.encode(message, seq: nil)
    case .unstoredReply(let sessionID, let requestID, let bytes):
      header = ["k": "unstored-reply", "s": .string(sessionID), "r": .string(requestID)]
      body = bytes
    case .device(let who, let connected, let newSession):
      header = ["k": "device", "who": identity(who), "c": .bool(connected), "n": .bool(newSession)]
      body = []
    case .replaced(let who, let sessionID):
      header = ["k": "replaced", "who": identity(who), "s": .string(sessionID)]
      body = []
    }
    return header.serialized + [UInt8(ascii: "\n")] + body
  }

  package static func decode(_ bytes: [UInt8]) throws(Malformed) -> ClusterLetter {
    guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")),
      let header = JSONValue(parsing: bytes[..<newline]), let kind = header["k"]?.stringValue
    else { throw Malformed(description: "a letter without its header line") }
    let body = bytes[(newline + 1)...]
    func text(_ key: String) throws(Malformed) -> String {
      guard let value = header[key]?.stringValue else { throw Malformed(description: "\(kind) letter without \(key)") }
      return value
    }
    func who(_ key: String) throws(Malformed) -> Identity {
      guard let object = header[key], let userId = object["u"]?.stringValue, let deviceId = object["d"]?.stringValue
      else { throw Malformed(description: "\(kind) letter without \(key)") }
      return Identity(userId: userId, deviceId: deviceId, name: object["n"]?.stringValue)
    }
    func serverMessage() throws(Malformed) -> ServerMessage {
      do {
        return try MessageCodec.decodeServerMessage(body).message
      } catch {
        throw Malformed(description: "\(kind) letter: \(error.message)")
      }
    }
    switch kind {
    case "frame":
      guard let seq = header["q"]?.intValue, seq > 0 else {
        throw Malformed(description: "frame letter without its seq")
      }
      return .frame(sessionID: try text("s"), seq: UInt64(seq), bytes: Array(body))
    case "broken":
      return .broken(sessionID: try text("s"))
    case "request":
      let envelope: ClientEnvelope
      do {
        envelope = try MessageCodec.decodeClientMessage(body)
      } catch {
        throw Malformed(description: "request letter: \(error.message)")
      }
      guard let id = envelope.id else { throw Malformed(description: "request letter without a request id") }
      return .request(
        ForwardedRequest(
          message: envelope.message, id: id, from: try who("from"),
          origin: .init(node: try text("node"), sessionID: try text("s"))))
    case "reply":
      return .reply(sessionID: try text("s"), requestID: try text("r"), try serverMessage())
    case "unstored-reply":
      guard !body.isEmpty else { throw Malformed(description: "unstored-reply letter without its answer") }
      return .unstoredReply(sessionID: try text("s"), requestID: try text("r"), bytes: Array(body))
    case "device":
      guard let connected = header["c"]?.boolValue, let newSession = header["n"]?.boolValue else {
        throw Malformed(description: "device letter without its state")
      }
      return .device(try who("who"), connected: connected, newSession: newSession)
    case "replaced":
      return .replaced(try who("who"), sessionID: try text("s"))
    default:
      throw Malformed(description: "a letter of unknown kind \(kind)")
    }
  }

  private static func identity(_ who: Identity) -> JSONValue {
    var object: [String: JSONValue] = ["u": .string(who.userId), "d": .string(who.deviceId)]
    if let name = who.name { object["n"] = .string(name) }
    return .object(object)
  }
}
