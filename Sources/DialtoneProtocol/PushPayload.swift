import Foundation

/// The data of an incoming-call push (APNs VoIP push / FCM high-priority data message).
///
/// APNs form (`apnsPayload`), native JSON types:
/// `{"dialtone":1,"type":"incoming-call","callId":"…","callerId":"alice","callerDeviceId":"phone",
///   "callerName":"Alice","video":false,"createdAt":1732880000000}`
/// FCM form (`fcmData`): the same keys, every value a string (FCM data values must be
/// strings): `"dialtone":"1"`, `"video":"false"`, `"createdAt":"1732880000000"`.
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
  public var video: Bool
  /// When the call was created, ms since the Unix epoch.
  public var createdAt: Int64

  public init(
    callId: CallID, callerId: String, callerDeviceId: String? = nil, callerName: String? = nil, video: Bool,
    createdAt: Int64
  ) {
    self.callId = callId
    self.callerId = callerId
    self.callerDeviceId = callerDeviceId
    self.callerName = callerName
    self.video = video
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
    o.set("video", video)
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
      "video": video ? "true" : "false",
      "createdAt": String(createdAt),
    ]
    if let callerDeviceId { data["callerDeviceId"] = callerDeviceId }
    if let callerName { data["callerName"] = callerName }
    return data
  }

  /// Parses either form. Booleans may be `true`/`false` or the strings `"true"`/`"false"`/
  /// `"1"`/`"0"`; integers may be numbers or decimal strings.
  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    let r = try FieldReader(json, path: path, options: options)
    guard r.value("dialtone") != nil else {
      throw ProtocolError(.badRequest, "not a Dialtone push: \"dialtone\" is missing")
    }
    let type = try r.string("type")
    guard type == Self.type else {
      throw ProtocolError(.badRequest, "\"type\" must be \"\(Self.type)\"")
    }
    callId = try r.callId()
    callerId = try r.userId("callerId")
    callerDeviceId = try r.optionalDeviceId("callerDeviceId")
    callerName = try r.optionalName("callerName")
    switch r.value("video") {
    case .bool(let flag)?: video = flag
    case .string("true")?, .string("1")?: video = true
    case .string("false")?, .string("0")?, nil: video = false
    default: throw r.wrongType("video", "a boolean")
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
    let value: JSONValue
    do {
      value = try JSONValue.parse(data, maxDepth: Limits.maxJSONDepth)
    } catch {
      throw ProtocolError(.badRequest, "push payload is not valid JSON: \(error)")
    }
    try self.init(json: value, path: "", options: .lenient)
  }
}
