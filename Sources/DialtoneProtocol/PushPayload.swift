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
  /// Set for a group call ring: how many members it has (the creator included). The caller
  /// fields then describe the creator, and the device answers with `group-join`.
  public var memberCount: Int64?
  /// A group call's title, if it has one.
  public var title: String?

  public var isGroup: Bool { memberCount != nil }

  /// `callerHandle` defaults to `callerId`.
  public init(
    callId: CallID, callerId: String, callerDeviceId: String? = nil, callerName: String? = nil,
    callerHandle: String? = nil, hasVideo: Bool, createdAt: Int64, memberCount: Int64? = nil, title: String? = nil
  ) {
    self.memberCount = memberCount
    self.title = title
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

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(callId: "", callerId: "", callerHandle: "", hasVideo: false, createdAt: 0)
  }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.precheck("dialtone", equals: nil, missing: notDialtonePush)
    try c.precheck("type", equals: "incoming-call", missing: nil)
    // A missing `callerHandle` (older payloads) means `callerId`, which is read after it.
    var handle: String? = callerHandle
    try c.string("callId", &callId, .callId)
    try c.string("callerDeviceId", &callerDeviceId, .deviceId)
    try c.string("callerHandle", &handle, .userId)
    try c.string("callerId", &callerId, .userId)
    try c.string("callerName", &callerName, .name)
    try c.pushInteger("createdAt", &createdAt)
    try c.marker("dialtone", Self.formatVersion, missing: notDialtonePush)
    try c.pushBool("hasVideo", &hasVideo)
    try c.pushInteger("memberCount", &memberCount)
    try c.string("title", &title, .title)
    try c.constant("type", "incoming-call")
    callerHandle = handle ?? callerId
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
    if let memberCount { data["memberCount"] = String(memberCount) }
    if let title { data["title"] = title }
    return data
  }

  // Parsing (`wire`) accepts either form. Booleans may be `true`/`false` or the strings
  // `"true"`/`"false"`/`"1"`/`"0"`; integers may be numbers or decimal strings. A missing
  // `hasVideo` means `false`; a missing `callerHandle` (older payloads) means `callerId`.

  /// Parses a push dictionary as delivered by PushKit (`PKPushPayload.dictionaryPayload`) or
  /// an FCM data map. Values must be JSON-representable.
  public init(payload: [AnyHashable: Any]) throws(ProtocolError) {
    try self.init(jsonBytes: try pushJSON(payload), options: .lenient)
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
  public var apnsPayload: JSONValue { json }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", callerId: "") }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.precheck("dialtone", equals: nil, missing: notDialtonePush)
    try c.precheck("type", equals: "missed-call", missing: nil)
    try c.derived(
      "aps", ["alert": ["title": .string(Self.alertTitle), "body": .string(alertBody)], "sound": "default"])
    try c.string("callId", &callId, .callId)
    try c.string("callerId", &callerId, .userId)
    try c.string("callerName", &callerName, .name)
    try c.marker("dialtone", IncomingCallPush.formatVersion, missing: notDialtonePush)
    try c.constant("type", "missed-call")
  }

  /// Parses a notification's `userInfo` dictionary.
  public init(payload: [AnyHashable: Any]) throws(ProtocolError) {
    try self.init(jsonBytes: try pushJSON(payload), options: .lenient)
  }
}

private let notDialtonePush = #"not a Dialtone push: "dialtone" is missing"#

/// Converts a push dictionary (PushKit / UserNotifications / FCM) to JSON.
private func pushJSON(_ payload: [AnyHashable: Any]) throws(ProtocolError) -> Data {
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
  return data
}
