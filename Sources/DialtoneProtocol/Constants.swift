import Foundation

/// The signaling protocol version spoken by this library (`hello.version`, `welcome.version`).
public enum ProtocolVersion {
  public static let current = 1
  /// Versions a server built from this library accepts.
  public static let supported: ClosedRange<Int> = 1...1
}

/// Size limits. All string lengths are measured in UTF-8 bytes.
public enum Limits {
  /// Largest WebSocket text frame (one message). Larger frames: close 1009.
  public static let maxMessageBytes = 65_536
  /// `sdp` (offer, answer, invite.offer, accept.answer). Larger: `too-large`.
  public static let maxSDPBytes = 32_768
  /// `candidate.candidate`. Larger: `too-large`.
  public static let maxCandidateBytes = 1_024
  /// `candidate.sdpMid` and `candidate.usernameFragment`.
  public static let maxCandidateFieldBytes = 256
  /// Largest `candidate.sdpMLineIndex`.
  public static let maxSDPMLineIndex = 65_535
  /// Client message `id` (1...64).
  public static let maxMessageIDBytes = 64
  /// `callId` (1...64).
  public static let maxCallIDBytes = 64
  /// User ids (`sub`, `to`, `userId`, `callerId`, ...) (1...128).
  public static let maxUserIDBytes = 128
  /// Device ids (`device` claim, `deviceId`, ...) (1...128).
  public static let maxDeviceIDBytes = 128
  /// Display names (`name`, `callerName`) (0...128).
  public static let maxNameBytes = 128
  /// `hello.token` (a JWT).
  public static let maxTokenBytes = 8_192
  /// `hello.resume.sessionId` (1...128).
  public static let maxSessionIDBytes = 128
  /// `hello.client.name` / `hello.client.version` (0...128).
  public static let maxClientInfoBytes = 128
  /// `hello.features`: at most this many names, each 1...64 bytes.
  public static let maxFeatures = 16
  public static let maxFeatureBytes = 64
  /// Deepest nesting of arrays/objects in a message or body (the message object itself is
  /// one level). Deeper: `bad-request`.
  public static let maxJSONDepth = 32
  /// Largest seq / lastSeq value: 2^53 - 1, so that JavaScript numbers stay exact.
  public static let maxSeq: UInt64 = 9_007_199_254_740_991
  /// Push registration: `installationId` (1...128, characters `A-Z a-z 0-9 - . _ ~`).
  public static let maxInstallationIDBytes = 128
  /// Push registration: APNs tokens, in hex digits (even count, 2...400).
  public static let maxAPNsTokenHexDigits = 400
  /// Push registration: `fcmToken` (1...4096).
  public static let maxFCMTokenBytes = 4_096
  /// Push registration: `bundleId` (1...155).
  public static let maxBundleIDBytes = 155
}

/// Default timings of the reference server (seconds). Servers announce the values that
/// matter to clients in `welcome`.
/// Optional protocol extensions, named in `hello.features` and `welcome.features` (4.1).
public enum ProtocolFeature {
  /// Pre-connect while ringing: a leg per ringing callee device, connected before Answer (9b).
  public static let preconnect = "preconnect"
  /// What a server built from this library implements.
  public static let supported: Set<String> = [preconnect]
}

public enum ProtocolDefaults {
  /// Pre-connected legs of one call: the server relays leg requests of at most this many callee
  /// devices; the others ring with today's flow (9b).
  public static let maxPreconnectLegs = 4
  /// The first message on a socket must be `hello` within this time (else close 4408).
  public static let helloTimeoutSeconds = 5
  /// `welcome.heartbeatSeconds`: the client sends `ping` when it has sent nothing for this long.
  public static let heartbeatSeconds = 25
  /// A call that is not accepted within this time ends with `missed`.
  public static let ringTimeoutSeconds = 45
  /// A device in an accepted call whose socket dropped has this long to come back before the
  /// call ends with `connection-lost`.
  public static let reconnectGraceSeconds = 30
  /// A session can be resumed for at least this long after its socket dropped...
  public static let resumeWindowSeconds = 60
  /// ...as long as no more than this many messages are waiting for it.
  public static let resumeWindowMessages = 256
  /// `welcome.iceServersTtl` / `GET /v1/ice-servers` `ttl`.
  public static let iceServersTTLSeconds = 43_200
  /// Clients ack at least this often while messages are unacknowledged (seconds)...
  public static let ackIntervalSeconds = 1
  /// ...and at once when this many messages are unacknowledged.
  public static let ackEveryMessages = 16
}

/// WebSocket close codes used by the server.
public enum CloseCode: Int, Sendable, Equatable, CaseIterable {
  /// Normal closure.
  case normal = 1000
  /// The server is shutting down or restarting: reconnect and resume.
  case goingAway = 1001
  /// A frame exceeded `Limits.maxMessageBytes`.
  case messageTooBig = 1009
  /// Protocol error or unsupported version: do not reconnect with the same software.
  case protocolError = 4400
  /// Missing, bad or expired token: get a new token before reconnecting.
  case unauthorized = 4401
  /// No `hello` within `ProtocolDefaults.helloTimeoutSeconds`.
  case helloTimeout = 4408
  /// A newer connection of the same (user, device) replaced this one: do not reconnect.
  case replaced = 4409
  /// Over a limit: a reader too slow for what is sent to it, too many sockets from one address,
  /// too many devices of one user. Reconnect with backoff and resume.
  case overLimit = 4429
  /// The server cannot keep the session right now (a cluster whose shared store failed, or a
  /// session that missed messages): reconnect with backoff and resume; the answer may be resync.
  /// (Not 1013: libwebsockets 4.1 clients refuse that code as a protocol error.)
  case tryAgainLater = 4503

  /// Whether a client should reconnect (with backoff, resuming) after this close code.
  public var shouldReconnect: Bool {
    switch self {
    case .goingAway, .messageTooBig, .tryAgainLater, .helloTimeout, .overLimit: return true
    case .normal, .protocolError, .unauthorized, .replaced: return false
    }
  }
}

/// Error codes carried by the `error` message and by HTTP error bodies.
public enum ErrorCode: String, WireEnum {
  case badRequest = "bad-request"
  case unknownType = "unknown-type"
  case unauthorized = "unauthorized"
  case forbidden = "forbidden"
  case notFound = "not-found"
  case conflict = "conflict"
  case invalidState = "invalid-state"
  case tooLarge = "too-large"
  case rateLimited = "rate-limited"
  case limitExceeded = "limit-exceeded"
  case unsupportedVersion = "unsupported-version"
  case `internal` = "internal"

  /// Decodes a code received from a server; codes added by later servers map to `.internal`.
  public init(lenient rawValue: String) {
    self = ErrorCode(rawValue: rawValue) ?? .internal
  }

  /// The HTTP status the HTTP API uses for this code.
  public var httpStatus: Int {
    switch self {
    case .badRequest, .unknownType: return 400
    case .unauthorized: return 401
    case .forbidden: return 403
    case .notFound: return 404
    case .conflict, .invalidState: return 409
    case .tooLarge: return 413
    case .rateLimited, .limitExceeded: return 429
    case .unsupportedVersion: return 400
    case .internal: return 500
    }
  }
}

/// Why a call ended (`call-ended.reason`, `CallState.endReason`, `CallRecord.endReason`).
public enum EndReason: String, WireEnum {
  /// The callee declined (sent to the caller).
  case declined
  /// The callee is busy: in another call, or a device reported `busy`.
  case busy
  /// Nobody accepted within the ring timeout.
  case missed
  /// The caller gave up before the call was accepted.
  case cancelled
  /// A participant hung up an accepted call.
  case hangup
  /// The call failed (media could not be established, server error).
  case failed
  /// A participant's socket dropped and did not come back within the grace window.
  case connectionLost = "connection-lost"
  /// Another device of the callee accepted the call (sent to the callee's other devices).
  case answeredElsewhere = "answered-elsewhere"
  /// Another device of the callee declined the call (sent to the callee's other devices).
  case declinedElsewhere = "declined-elsewhere"
  /// Both users called each other at once; this call lost (see `replacedBy`).
  case glare

  /// Decodes a reason received from a server; reasons added by later servers map to `.failed`.
  public init(lenient rawValue: String) {
    self = EndReason(rawValue: rawValue) ?? .failed
  }
}

/// The phase of a call (`CallState.state`).
public enum CallPhase: String, WireEnum {
  case ringing
  case accepted
  case ended
}

/// A call id: chosen by the caller, 1...64 characters from `A-Z a-z 0-9 - _ .`;
/// a UUID string is recommended (iOS devices use it as the CallKit UUID).
public typealias CallID = String

/// Rules for call ids.
public enum CallIDRules {
  /// A fresh call id: a random UUID in lowercase canonical form.
  public static func generate() -> CallID {
    UUID().uuidString.lowercased()
  }

  /// Whether `callId` is acceptable on the wire.
  public static func isValid(_ callId: String) -> Bool {
    problem(with: callId) == nil
  }

  /// What is wrong with `callId`, or nil when it is valid.
  public static func problem(with callId: String) -> String? {
    var callId = callId
    return callId.withUTF8 { problem(withUTF8: $0) }
  }

  /// What is wrong with the call id whose UTF-8 bytes are `bytes`, or nil when it is valid: the
  /// decoder checks a frame's id in place, before (and without) making a `String` of it.
  public static func problem(withUTF8 bytes: UnsafeBufferPointer<UInt8>) -> String? {
    if bytes.isEmpty || bytes.count > Limits.maxCallIDBytes {
      return "must be 1 to \(Limits.maxCallIDBytes) characters"
    }
    return bytes.allSatisfy(isAllowed) ? nil : "may contain only A-Z, a-z, 0-9, '-', '_' and '.'"
  }

  private static func isAllowed(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
      return true
    default:
      return false
    }
  }

  /// Glare: of two calls between the same users ringing in opposite directions, the one
  /// whose call id is lower, comparing UTF-8 bytes, survives.
  public static func glareSurvivor(_ a: CallID, _ b: CallID) -> CallID {
    a.utf8.lexicographicallyPrecedes(b.utf8) ? a : b
  }

  /// The UUID a call id denotes (CallKit), when it is a UUID string in either case.
  public static func uuid(of callId: CallID) -> UUID? {
    UUID(uuidString: callId)
  }
}

extension ErrorCode {
  public static var unknownValueProblem: String { "is not a known error code" }
  /// Codes added by later servers.
  public static var lenientFallback: ErrorCode? { .internal }
}

extension EndReason {
  /// Reasons added by later servers.
  public static var lenientFallback: EndReason? { .failed }
}
