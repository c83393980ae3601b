import DialtoneJSON
import Foundation

/// The data of an incoming-call push (APNs VoIP push / FCM high-priority data message).
///
/// APNs form (`apnsPayload`), native JSON types:
/// `{"dialtone":1,"type":"incoming-call","callId":"…","callerId":"alice","callerDeviceId":"phone",
///   "callerName":"Alice","callerHandle":"alice","hasVideo":false,"createdAt":1732880000000}`
/// FCM form (`fcmData`): the same keys, every value a string (FCM data values must be
/// strings): `"dialtone":"1"`, `"hasVideo":"false"`, `"createdAt":"1732880000000"`.
/// `init(payload:)` accepts both forms.
///
/// A push only wakes the device; the call itself (offer, candidates, end) comes over
/// signaling once the device connects. Pushes are never sent to cancel a call.
public struct IncomingCallPush: WireCodable, Hashable {
  /// Value of the `type` key.
  public static let type = "incoming-call"
  /// Value of the `dialtone` key (push payload format version).
  public static let formatVersion = 1

  public var callId: CallID
  public var callerId: String
  public var callerDeviceId: String?
  public var callerName: String?
  /// The identifier CallKit shows for the caller (the `CXHandle` value, type `.generic`),
  /// e.g. the caller's user id or phone number. At most `Limits.maxUserIDBytes` bytes.
  public var callerHandle: String
  public var hasVideo: Bool
  /// When the call was created, ms since the Unix epoch.
  public var createdAt: Int64

  /// `callerHandle` defaults to `callerId`.
  public init(
    callId: CallID, callerId: String, callerDeviceId: String? = nil, callerName: String? = nil,
    callerHandle: String? = nil, hasVideo: Bool, createdAt: Int64
  ) {
    self.callId = callId
    self.callerId = callerId
    self.callerDeviceId = callerDeviceId
    self.callerName = callerName
    self.callerHandle = callerHandle ?? callerId
    self.hasVideo = hasVideo
    self.createdAt = createdAt
  }

  /// The APNs body (native JSON types). The server may add an `aps` member.
  public var apnsPayload: JSONValue { json }

  public var json: JSONValue {
    var o = ObjectBuilder()
    o.set("dialtone", Self.formatVersion)
    o.set("type", Self.type)
    o.set("callId", callId)
    o.set("callerId", callerId)
    o.set("callerDeviceId", callerDeviceId)
    o.set("callerName", callerName)
    o.set("callerHandle", callerHandle)
    o.set("hasVideo", hasVideo)
    o.set("createdAt", createdAt)
    return o.json
  }

  /// The FCM `data` map (every value a string).
  public var fcmData: [String: String] {
    var data: [String: String] = [
      "dialtone": String(Self.formatVersion),
      "type": Self.type,
      "callId": callId,
      "callerId": callerId,
      "callerHandle": callerHandle,
      "hasVideo": hasVideo ? "true" : "false",
      "createdAt": String(createdAt),
    ]
    if let callerDeviceId { data["callerDeviceId"] = callerDeviceId }
    if let callerName { data["callerName"] = callerName }
    return data
  }

  /// Parses either form. Booleans may be `true`/`false` or the strings `"true"`/`"false"`/
  /// `"1"`/`"0"`; integers may be numbers or decimal strings. A missing `hasVideo` means
  /// `false`; a missing `callerHandle` (older payloads) means `callerId`.
  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    let r = try FieldReader(json, path: path, options: options)
    try r.checkPushHeader(type: Self.type)
    callId = try r.callId()
    callerId = try r.userId("callerId")
    callerDeviceId = try r.optionalDeviceId("callerDeviceId")
    callerName = try r.optionalName("callerName")
    callerHandle = try r.optionalUserId("callerHandle") ?? callerId
    switch r.value("hasVideo") {
    case .bool(let flag)?: hasVideo = flag
    case .string("true")?, .string("1")?: hasVideo = true
    case .string("false")?, .string("0")?, nil: hasVideo = false
    default: throw r.wrongType("hasVideo", "a boolean")
    }
    switch r.value("createdAt") {
    case .string(let text)?:
      guard let number = Int64(text), number >= 0 else { throw r.wrongType("createdAt", "an integer") }
      createdAt = number
    default:
      createdAt = try r.timestamp("createdAt")
    }
  }

  /// Parses a push dictionary as delivered by PushKit (`PKPushPayload.dictionaryPayload`) or
  /// an FCM data map. Values must be JSON-representable.
  public init(payload: [AnyHashable: Any]) throws(ProtocolError) {
    try self.init(json: try pushJSON(payload), path: "", options: .lenient)
  }
}

/// A missed-call notification: an ordinary APNs alert push (`apns-push-type: alert`, topic
/// `<bundleId>`) to an iOS installation's alert token after a call rang out unanswered.
///
/// `apnsPayload` (= `json`):
/// `{"aps":{"alert":{"title":"Missed call","body":"Alice"},"sound":"default"},"dialtone":1,
///   "type":"missed-call","callId":"…","callerId":"alice","callerName":"Alice"}`
/// The alert body is `callerName`, or `callerId` when there is no (non-empty) name.
/// Decoding ignores `aps` (it is derived from the other fields).
public struct MissedCallPush: WireCodable, Hashable {
  /// Value of the `type` key.
  public static let type = "missed-call"
  /// The alert title.
  public static let alertTitle = "Missed call"

  public var callId: CallID
  public var callerId: String
  public var callerName: String?

  public init(callId: CallID, callerId: String, callerName: String? = nil) {
    self.callId = callId
    self.callerId = callerId
    self.callerName = callerName
  }

  /// The missed-call notification for the call an incoming-call push announced.
  public init(missed call: IncomingCallPush) {
    self.init(callId: call.callId, callerId: call.callerId, callerName: call.callerName)
  }

  /// The alert body: the caller's name, or their user id when there is no name.
  public var alertBody: String {
    if let callerName, !callerName.isEmpty { return callerName }
    return callerId
  }

  /// The APNs body, including `aps`.
  public var apnsPayload: JSONValue {
    let alert: JSONValue = ["title": .string(Self.alertTitle), "body": .string(alertBody)]
    var o = ObjectBuilder()
    o.members["aps"] = ["alert": alert, "sound": "default"]
    o.set("dialtone", IncomingCallPush.formatVersion)
    o.set("type", Self.type)
    o.set("callId", callId)
    o.set("callerId", callerId)
    o.set("callerName", callerName)
    return o.json
  }

  public var json: JSONValue { apnsPayload }

  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    let r = try FieldReader(json, path: path, options: options)
    try r.checkPushHeader(type: Self.type)
    callId = try r.callId()
    callerId = try r.userId("callerId")
    callerName = try r.optionalName("callerName")
  }

  /// Parses a notification's `userInfo` dictionary.
  public init(payload: [AnyHashable: Any]) throws(ProtocolError) {
    try self.init(json: try pushJSON(payload), path: "", options: .lenient)
  }
}

extension FieldReader {
  /// Checks the `dialtone` and `type` keys of a push payload.
  fileprivate func checkPushHeader(type expected: String) throws(ProtocolError) {
    guard value("dialtone") != nil else {
      throw ProtocolError(.badRequest, "not a Dialtone push: \"dialtone\" is missing")
    }
    let type = try string("type")
    guard type == expected else {
      throw ProtocolError(.badRequest, "\"type\" must be \"\(expected)\"")
    }
  }
}

/// Converts a push dictionary (PushKit / UserNotifications / FCM) to JSON.
private func pushJSON(_ payload: [AnyHashable: Any]) throws(ProtocolError) -> JSONValue {
  var object: [String: Any] = [:]
  for (key, value) in payload {
    guard let key = key.base as? String else { continue }
    object[key] = value
  }
  guard JSONSerialization.isValidJSONObject(object),
    let data = try? JSONSerialization.data(withJSONObject: object)
  else {
    throw ProtocolError(.badRequest, "push payload is not a JSON object")
  }
  do {
    return try JSONValue.parse(data, maxDepth: Limits.maxJSONDepth)
  } catch {
    throw ProtocolError(.badRequest, "push payload is not valid JSON: \(error)")
  }
}
