/// `{"error":{"code":"...","message":"..."}}`: the body of every HTTP error response.
public struct ErrorBody: WireCodable, Hashable {
  public var code: ErrorCode
  public var message: String

  public init(code: ErrorCode, message: String) {
    self.code = code
    self.message = message
  }

  public init(_ error: ProtocolError) {
    self.init(code: error.code, message: error.message)
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(code: .internal, message: "") }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    var inner = Inner(code: code, message: message)
    try c.object("error", &inner)
    code = inner.code
    message = inner.message
  }

  /// The `error` member.
  private struct Inner: WireCodable {
    var code: ErrorCode
    var message: String

    init(code: ErrorCode, message: String) {
      self.code = code
      self.message = message
    }

    init(wirePlaceholder _: WirePlaceholder) { self.init(code: .internal, message: "") }

    mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.enumeration("code", &code)
      try c.string("message", &message, .any)
    }
  }
}

/// `GET /healthz`: `{"status":"ok","version":"..."}`.
public struct HealthResponse: WireCodable, Hashable {
  public var status: String
  /// The server's software version.
  public var version: String

  public init(status: String = "ok", version: String) {
    self.status = status
    self.version = version
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(version: "") }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("status", &status, .nonEmpty)
    try c.string("version", &version, .any)
  }
}

/// A live signaling connection of a user (`MeResponse.devices`).
public struct LiveDevice: WireCodable, Hashable {
  public var deviceId: String
  /// When the current socket of this device completed its `hello`, ms since the Unix epoch.
  public var connectedAt: Int64

  public init(deviceId: String, connectedAt: Int64) {
    self.deviceId = deviceId
    self.connectedAt = connectedAt
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(deviceId: "", connectedAt: 0) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("connectedAt", &connectedAt, 0...Int64.max)
    try c.string("deviceId", &deviceId, .deviceId)
  }
}

/// `GET /v1/me`: who the token says you are, and your live devices.
public struct MeResponse: WireCodable, Hashable {
  public var userId: String
  public var deviceId: String
  public var name: String?
  public var devices: [LiveDevice]

  public init(userId: String, deviceId: String, name: String? = nil, devices: [LiveDevice]) {
    self.userId = userId
    self.deviceId = deviceId
    self.name = name
    self.devices = devices
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(userId: "", deviceId: "", devices: []) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("deviceId", &deviceId, .deviceId)
    try c.objects("devices", &devices)
    try c.string("name", &name, .name)
    try c.string("userId", &userId, .userId)
  }
}

/// `GET /v1/ice-servers`: `{"iceServers":[...],"ttl":43200}`.
public struct IceServersResponse: WireCodable, Hashable {
  public var iceServers: [IceServer]
  /// Seconds the credentials stay valid; refresh before they expire.
  public var ttl: Int

  public init(iceServers: [IceServer], ttl: Int = ProtocolDefaults.iceServersTTLSeconds) {
    self.iceServers = iceServers
    self.ttl = ttl
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(iceServers: []) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.objects("iceServers", &iceServers)
    try c.integer("ttl", &ttl, 0...Int64(Int32.max))
  }
}

/// A page of a call history, newest first: `GET /v1/calls` (`CallHistoryResponse`) and
/// `GET /v1/group-calls` (`GroupCallHistoryResponse`), the one shape for both.
public struct HistoryResponse<Record: WireCodable & Hashable>: WireCodable, Hashable {
  public var calls: [Record]
  /// Cursor for the next (older) page: pass it as `before`. Absent on the last page.
  public var next: String?

  public init(calls: [Record], next: String? = nil) {
    self.calls = calls
    self.next = next
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(calls: []) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.objects("calls", &calls)
    try c.string("next", &next, .nonEmpty)
  }
}

/// `GET /v1/calls`: a page of call history, newest first.
public typealias CallHistoryResponse = HistoryResponse<CallRecord>

// MARK: - Push registration

/// A push platform.
public enum PushPlatform: String, WireEnum {
  public static var unknownValueProblem: String { #"must be "ios" or "android""# }

  case ios
  case android
}

/// Which APNs gateway a token belongs to (development builds: sandbox).
public enum APNsEnvironment: String, WireEnum {
  public static var unknownValueProblem: String { #"must be "sandbox" or "production""# }

  case sandbox
  case production
}

/// `POST /v1/devices`: registers (or replaces) the push tokens of one app installation for
/// the token's (user, device).
///
/// iOS: `bundleId`, `apnsEnvironment` and at least one of `voipToken` (PushKit, used to ring)
/// and `alertToken` (ordinary notifications), hex. Android: `fcmToken`.
/// Decoding checks types only; call `validate()` for the platform rules.
public struct DeviceRegistration: WireCodable, Hashable {
  public var installationId: String
  public var platform: PushPlatform
  public var voipToken: String?
  public var alertToken: String?
  public var fcmToken: String?
  public var bundleId: String?
  public var apnsEnvironment: APNsEnvironment?

  public init(
    installationId: String, platform: PushPlatform, voipToken: String? = nil, alertToken: String? = nil,
    fcmToken: String? = nil, bundleId: String? = nil, apnsEnvironment: APNsEnvironment? = nil
  ) {
    self.installationId = installationId
    self.platform = platform
    self.voipToken = voipToken
    self.alertToken = alertToken
    self.fcmToken = fcmToken
    self.bundleId = bundleId
    self.apnsEnvironment = apnsEnvironment
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(installationId: "", platform: .ios) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("alertToken", &alertToken, .any)
    try c.enumeration("apnsEnvironment", &apnsEnvironment)
    try c.string("bundleId", &bundleId, .any)
    try c.string("fcmToken", &fcmToken, .any)
    try c.string("installationId", &installationId, .any)
    try c.enumeration("platform", &platform)
    try c.string("voipToken", &voipToken, .any)
  }

  /// Checks the platform rules; the error is a `bad-request` naming the field.
  public func validate() throws(ProtocolError) {
    if let problem = Self.installationIdProblem(installationId) {
      throw ProtocolError(.badRequest, "\"installationId\" \(problem)")
    }
    switch platform {
    case .ios:
      guard let bundleId else { throw ProtocolError(.badRequest, "\"bundleId\" is required for platform ios") }
      if let problem = Self.bundleIdProblem(bundleId) {
        throw ProtocolError(.badRequest, "\"bundleId\" \(problem)")
      }
      guard apnsEnvironment != nil else {
        throw ProtocolError(
          .badRequest, "\"apnsEnvironment\" is required for platform ios (\"sandbox\" or \"production\")")
      }
      if voipToken == nil && alertToken == nil {
        throw ProtocolError(.badRequest, "platform ios needs \"voipToken\" or \"alertToken\"")
      }
      for (key, token) in [("voipToken", voipToken), ("alertToken", alertToken)] {
        if let token, let problem = Self.hexTokenProblem(token) {
          throw ProtocolError(.badRequest, "\"\(key)\" \(problem)")
        }
      }
      if fcmToken != nil {
        throw ProtocolError(.badRequest, "\"fcmToken\" is only for platform android")
      }
    case .android:
      guard let fcmToken else { throw ProtocolError(.badRequest, "\"fcmToken\" is required for platform android") }
      if fcmToken.isEmpty || fcmToken.utf8.count > Limits.maxFCMTokenBytes
        || fcmToken.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F })
      {
        throw ProtocolError(
          .badRequest, "\"fcmToken\" must be 1 to \(Limits.maxFCMTokenBytes) printable ASCII characters without spaces")
      }
      if voipToken != nil { throw ProtocolError(.badRequest, "\"voipToken\" is only for platform ios") }
      if alertToken != nil { throw ProtocolError(.badRequest, "\"alertToken\" is only for platform ios") }
    }
  }

  /// A copy with APNs tokens in lowercase hex (the form APNs URLs use).
  public func normalized() -> DeviceRegistration {
    var copy = self
    copy.voipToken = voipToken?.lowercased()
    copy.alertToken = alertToken?.lowercased()
    return copy
  }

  static func installationIdProblem(_ id: String) -> String? {
    let utf8 = id.utf8
    if utf8.isEmpty || utf8.count > Limits.maxInstallationIDBytes {
      return "must be 1 to \(Limits.maxInstallationIDBytes) characters"
    }
    for byte in utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
        UInt8(ascii: "~"):
        continue
      default:
        return "may contain only A-Z, a-z, 0-9, '-', '.', '_' and '~'"
      }
    }
    return nil
  }

  static func bundleIdProblem(_ bundleId: String) -> String? {
    let utf8 = bundleId.utf8
    if utf8.isEmpty || utf8.count > Limits.maxBundleIDBytes {
      return "must be 1 to \(Limits.maxBundleIDBytes) characters"
    }
    for byte in utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."):
        continue
      default:
        return "may contain only A-Z, a-z, 0-9, '-' and '.'"
      }
    }
    if bundleId.hasSuffix(".voip") {
      return "must be the app's bundle id, without the \".voip\" suffix"
    }
    return nil
  }

  static func hexTokenProblem(_ token: String) -> String? {
    let utf8 = token.utf8
    guard !utf8.isEmpty, utf8.count <= Limits.maxAPNsTokenHexDigits, utf8.count % 2 == 0,
      utf8.allSatisfy({ byte in
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
          || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
      })
    else {
      return "must be an even number (2 to \(Limits.maxAPNsTokenHexDigits)) of hex digits"
    }
    return nil
  }
}

/// One push registration as listed by `GET /v1/devices` and returned by `POST /v1/devices`.
/// Tokens are not echoed back; only whether each is present.
public struct DeviceInfo: WireCodable, Hashable {
  public var installationId: String
  /// The signaling device id (the token's `device` claim) this installation rings as.
  public var deviceId: String
  public var platform: PushPlatform
  public var bundleId: String?
  public var apnsEnvironment: APNsEnvironment?
  public var hasVoipToken: Bool
  public var hasAlertToken: Bool
  public var hasFcmToken: Bool
  /// ms since the Unix epoch.
  public var updatedAt: Int64

  public init(
    installationId: String, deviceId: String, platform: PushPlatform, bundleId: String? = nil,
    apnsEnvironment: APNsEnvironment? = nil, hasVoipToken: Bool = false, hasAlertToken: Bool = false,
    hasFcmToken: Bool = false, updatedAt: Int64
  ) {
    self.installationId = installationId
    self.deviceId = deviceId
    self.platform = platform
    self.bundleId = bundleId
    self.apnsEnvironment = apnsEnvironment
    self.hasVoipToken = hasVoipToken
    self.hasAlertToken = hasAlertToken
    self.hasFcmToken = hasFcmToken
    self.updatedAt = updatedAt
  }

  /// The public view of a registration.
  public init(_ registration: DeviceRegistration, deviceId: String, updatedAt: Int64) {
    self.init(
      installationId: registration.installationId, deviceId: deviceId, platform: registration.platform,
      bundleId: registration.bundleId, apnsEnvironment: registration.apnsEnvironment,
      hasVoipToken: registration.voipToken != nil, hasAlertToken: registration.alertToken != nil,
      hasFcmToken: registration.fcmToken != nil, updatedAt: updatedAt)
  }

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(installationId: "", deviceId: "", platform: .ios, updatedAt: 0)
  }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.enumeration("apnsEnvironment", &apnsEnvironment)
    try c.string("bundleId", &bundleId, .any)
    try c.string("deviceId", &deviceId, .deviceId)
    try c.bool("hasAlertToken", &hasAlertToken, absent: false)
    try c.bool("hasFcmToken", &hasFcmToken, absent: false)
    try c.bool("hasVoipToken", &hasVoipToken, absent: false)
    try c.string("installationId", &installationId, .nonEmpty)
    try c.enumeration("platform", &platform)
    try c.integer("updatedAt", &updatedAt, 0...Int64.max)
  }
}

/// `GET /v1/devices`: `{"devices":[DeviceInfo]}`.
public struct DeviceListResponse: WireCodable, Hashable {
  public var devices: [DeviceInfo]

  public init(devices: [DeviceInfo]) {
    self.devices = devices
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(devices: []) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.objects("devices", &devices)
  }
}
