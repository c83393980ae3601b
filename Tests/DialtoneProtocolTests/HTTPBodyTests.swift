import DialtoneJSON
import DialtoneProtocol
import Foundation
import Testing

@Suite("HTTP bodies, push registration and push payloads")
struct HTTPBodyTests {
  static let iosRegistration = DeviceRegistration(
    installationId: "5E1D0C3A-7B9F-4C2E-8D61-0A4B3C2D1E0F", platform: .ios,
    voipToken: "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", bundleId: "com.example.chat",
    apnsEnvironment: .production)
  static let androidRegistration = DeviceRegistration(
    installationId: "inst-42", platform: .android, fcmToken: "dQw4w9WgXcQ:APA91bH-example_token")

  @Test func roundTripsAndExactShapes() throws {
    let bodies: [(any WireCodable, String)] = [
      (
        ErrorBody(code: .notFound, message: "no such device"),
        #"{"error":{"code":"not-found","message":"no such device"}}"#
      ),
      (HealthResponse(version: "0.1.0"), #"{"status":"ok","version":"0.1.0"}"#),
      (
        MeResponse(
          userId: "alice", deviceId: "phone", name: "Alice",
          devices: [LiveDevice(deviceId: "phone", connectedAt: 1_732_880_000_000)]),
        #"{"deviceId":"phone","devices":[{"connectedAt":1732880000000,"deviceId":"phone"}],"name":"Alice","userId":"alice"}"#
      ),
      (
        IceServersResponse(iceServers: [
          IceServer(urls: ["turn:127.0.0.1:3478"], username: "1732923200:alice", credential: "c2VjcmV0")
        ]),
        #"{"iceServers":[{"credential":"c2VjcmV0","urls":["turn:127.0.0.1:3478"],"username":"1732923200:alice"}],"ttl":43200}"#
      ),
      (
        CallHistoryResponse(
          calls: [
            CallRecord(
              callId: "c1", callerId: "alice", calleeId: "bob", answeredBy: "laptop", video: false, createdAt: 1000,
              answeredAt: 3000, endedAt: 63000, endReason: .hangup, durationMs: 60000)
          ], next: "c1"),
        #"{"calls":[{"answeredAt":3000,"answeredBy":"laptop","callId":"c1","calleeId":"bob","callerId":"alice","createdAt":1000,"durationMs":60000,"endReason":"hangup","endedAt":63000,"video":false}],"next":"c1"}"#
      ),
      (CallHistoryResponse(calls: []), #"{"calls":[]}"#),
      (
        Self.iosRegistration,
        #"{"apnsEnvironment":"production","bundleId":"com.example.chat","installationId":"5E1D0C3A-7B9F-4C2E-8D61-0A4B3C2D1E0F","platform":"ios","voipToken":"a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"}"#
      ),
      (
        DeviceInfo(Self.androidRegistration, deviceId: "pixel", updatedAt: 7),
        #"{"deviceId":"pixel","hasAlertToken":false,"hasFcmToken":true,"hasVoipToken":false,"installationId":"inst-42","platform":"android","updatedAt":7}"#
      ),
      (DeviceListResponse(devices: []), #"{"devices":[]}"#),
      (
        Fixtures.callState,
        #"{"answeredAt":1732880004000,"callId":"6b8f2a3e-1c4d-4e8a-9f00-3d2b1a0c9e7f","calleeDeviceId":"laptop","calleeId":"bob","callerDeviceId":"phone","callerId":"alice","createdAt":1732880000000,"endReason":"hangup","endedAt":1732880064000,"state":"ended","video":true}"#
      ),
    ]
    for (body, expected) in bodies {
      #expect(text(MessageCodec.encode(body)) == expected)
      try expectRoundTrip(body)
    }
  }

  private func expectRoundTrip<T: WireCodable>(_ body: T) throws {
    let decoded = try MessageCodec.decode(T.self, from: MessageCodec.encode(body))
    #expect(decoded == body)
    // Codable goes through the same shape.
    let viaFoundation = try JSONDecoder().decode(T.self, from: JSONEncoder().encode(body))
    #expect(viaFoundation == body)
  }

  @Test func codableMatchesWireShape() throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let peer = Fixtures.alice
    #expect(String(decoding: try encoder.encode(peer), as: UTF8.self) == peer.jsonString)
    let message = ClientEnvelope(
      id: "k", message: ClientMessage.candidate(.init(callId: "c1", candidate: Fixtures.candidate)))
    #expect(try JSONDecoder().decode(ClientEnvelope.self, from: encoder.encode(message)) == message)
    let envelope = ServerEnvelope(seq: 3, message: .ringing(.init(callId: "c1", from: peer)))
    #expect(try JSONDecoder().decode(ServerEnvelope.self, from: encoder.encode(envelope)) == envelope)
    // Codable decoding validates like the codec.
    #expect(throws: ProtocolError(.badRequest, "\"deviceId\" is required")) {
      try JSONDecoder().decode(Peer.self, from: Data(#"{"userId":"u"}"#.utf8))
    }
  }

  @Test func bodyDecodeErrors() {
    #expect(throws: ProtocolError(.badRequest, "empty body")) {
      try MessageCodec.decode(DeviceRegistration.self, from: [UInt8]())
    }
    #expect(throws: ProtocolError(.badRequest, "expected a JSON object")) {
      try MessageCodec.decode(DeviceRegistration.self, from: Array("[]".utf8))
    }
    #expect(throws: ProtocolError(.badRequest, "\"platform\" must be \"ios\" or \"android\"")) {
      try MessageCodec.decode(
        DeviceRegistration.self, from: Array(#"{"installationId":"i","platform":"windows"}"#.utf8))
    }
    #expect(throws: ProtocolError(.badRequest, "\"apnsEnvironment\" must be \"sandbox\" or \"production\"")) {
      try MessageCodec.decode(
        DeviceRegistration.self, from: Array(#"{"installationId":"i","platform":"ios","apnsEnvironment":"dev"}"#.utf8))
    }
    #expect(throws: ProtocolError(.badRequest, "\"voipToken\" must be a string")) {
      try MessageCodec.decode(
        DeviceRegistration.self, from: Array(#"{"installationId":"i","platform":"ios","voipToken":123}"#.utf8))
    }
    #expect(throws: ProtocolError(.badRequest, "\"error\" is required")) {
      try MessageCodec.decode(ErrorBody.self, from: Array("{}".utf8))
    }
    #expect(throws: ProtocolError(.badRequest, "\"error\" must be an object")) {
      try MessageCodec.decode(ErrorBody.self, from: Array(#"{"error":"x"}"#.utf8))
    }
    #expect(throws: ProtocolError(.badRequest, "\"error.code\" is required")) {
      try MessageCodec.decode(ErrorBody.self, from: Array(#"{"error":{"message":"x"}}"#.utf8))
    }
    #expect(throws: ProtocolError(.badRequest, "\"calls[0].video\" is required")) {
      try MessageCodec.decode(
        CallHistoryResponse.self,
        from: Array(#"{"calls":[{"callId":"c","callerId":"a","calleeId":"b","createdAt":1}]}"#.utf8))
    }
    #expect(
      throws: ProtocolError(
        .badRequest,
        "\"calls[0].endReason\" must be one of declined, busy, missed, cancelled, hangup, failed, connection-lost, answered-elsewhere, declined-elsewhere, glare"
      )
    ) {
      try MessageCodec.decode(
        CallHistoryResponse.self,
        from: Array(
          #"{"calls":[{"callId":"c","callerId":"a","calleeId":"b","video":true,"createdAt":1,"endReason":"exploded"}]}"#
            .utf8))
    }
    // Lenient decoding (a client reading a newer server) maps unknown values.
    let lenient = try? MessageCodec.decode(
      ErrorBody.self, from: Array(#"{"error":{"code":"teapot","message":"x"}}"#.utf8), options: .lenient)
    #expect(lenient == ErrorBody(code: .internal, message: "x"))
  }

  // MARK: DeviceRegistration.validate()

  @Test func validRegistrations() throws {
    try Self.iosRegistration.validate()
    try Self.androidRegistration.validate()
    var alertOnly = Self.iosRegistration
    alertOnly.voipToken = nil
    alertOnly.alertToken = "ABCDEF0123456789"
    alertOnly.apnsEnvironment = .sandbox
    try alertOnly.validate()
    #expect(alertOnly.normalized().alertToken == "abcdef0123456789")
  }

  private func expectInvalid(
    _ registration: DeviceRegistration, _ message: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    #expect(throws: ProtocolError(.badRequest, message), sourceLocation: sourceLocation) { try registration.validate() }
  }

  @Test func invalidIOSRegistrations() {
    var r = Self.iosRegistration
    r.bundleId = nil
    expectInvalid(r, "\"bundleId\" is required for platform ios")
    r = Self.iosRegistration
    r.bundleId = "com.example.chat.voip"
    expectInvalid(r, "\"bundleId\" must be the app's bundle id, without the \".voip\" suffix")
    r.bundleId = "com example"
    expectInvalid(r, "\"bundleId\" may contain only A-Z, a-z, 0-9, '-' and '.'")
    r = Self.iosRegistration
    r.apnsEnvironment = nil
    expectInvalid(r, "\"apnsEnvironment\" is required for platform ios (\"sandbox\" or \"production\")")
    r = Self.iosRegistration
    r.voipToken = nil
    expectInvalid(r, "platform ios needs \"voipToken\" or \"alertToken\"")
    for bad in ["xyz0", "abc", "", String(repeating: "ab", count: 201), "ab cd"] {
      r.voipToken = bad
      expectInvalid(r, "\"voipToken\" must be an even number (2 to 400) of hex digits")
    }
    r = Self.iosRegistration
    r.alertToken = "0g"
    expectInvalid(r, "\"alertToken\" must be an even number (2 to 400) of hex digits")
    r = Self.iosRegistration
    r.fcmToken = "f"
    expectInvalid(r, "\"fcmToken\" is only for platform android")
  }

  @Test func invalidAndroidRegistrations() {
    var r = Self.androidRegistration
    r.fcmToken = nil
    expectInvalid(r, "\"fcmToken\" is required for platform android")
    r.fcmToken = "has space"
    expectInvalid(r, "\"fcmToken\" must be 1 to 4096 printable ASCII characters without spaces")
    r.fcmToken = ""
    expectInvalid(r, "\"fcmToken\" must be 1 to 4096 printable ASCII characters without spaces")
    r = Self.androidRegistration
    r.voipToken = "abcd"
    expectInvalid(r, "\"voipToken\" is only for platform ios")
  }

  @Test func invalidInstallationIds() {
    var r = Self.androidRegistration
    r.installationId = ""
    expectInvalid(r, "\"installationId\" must be 1 to 128 characters")
    r.installationId = "a/b"
    expectInvalid(r, "\"installationId\" may contain only A-Z, a-z, 0-9, '-', '.', '_' and '~'")
    r.installationId = String(repeating: "i", count: 129)
    expectInvalid(r, "\"installationId\" must be 1 to 128 characters")
  }

  // MARK: Push payload

  @Test func incomingCallPushForms() throws {
    let push = IncomingCallPush(
      callId: Fixtures.callId, callerId: "alice", callerDeviceId: "phone", callerName: "Alice",
      callerHandle: "+15551234567",
      hasVideo: true, createdAt: 1_732_880_000_000)
    #expect(
      push.apnsPayload.serializedString
        == #"{"callId":"6b8f2a3e-1c4d-4e8a-9f00-3d2b1a0c9e7f","callerDeviceId":"phone","callerHandle":"+15551234567","callerId":"alice","callerName":"Alice","createdAt":1732880000000,"dialtone":1,"hasVideo":true,"type":"incoming-call"}"#
    )
    #expect(
      push.fcmData == [
        "dialtone": "1", "type": "incoming-call", "callId": Fixtures.callId, "callerId": "alice",
        "callerDeviceId": "phone",
        "callerName": "Alice", "callerHandle": "+15551234567", "hasVideo": "true", "createdAt": "1732880000000",
      ])
    #expect(try IncomingCallPush(json: push.apnsPayload) == push)
    // PushKit-style dictionary (with an aps member) and FCM string map both parse.
    var apns: [AnyHashable: Any] = ["aps": ["content-available": 1] as [String: Any]]
    for (key, value) in push.apnsPayload.objectValue ?? [:] {
      switch value {
      case .string(let s): apns[key] = s
      case .int(let i): apns[key] = i
      case .bool(let b): apns[key] = b
      default: break
      }
    }
    #expect(try IncomingCallPush(payload: apns) == push)
    #expect(try IncomingCallPush(payload: push.fcmData) == push)
    // "1"/"0" are accepted as booleans on FCM.
    var fcm = push.fcmData
    fcm["hasVideo"] = "0"
    #expect(try IncomingCallPush(payload: fcm).hasVideo == false)
  }

  @Test func callerHandleDefaultsToCallerId() throws {
    let push = IncomingCallPush(callId: "c1", callerId: "alice", hasVideo: false, createdAt: 5)
    #expect(push.callerHandle == "alice")
    #expect(
      push.jsonString
        == #"{"callId":"c1","callerHandle":"alice","callerId":"alice","createdAt":5,"dialtone":1,"hasVideo":false,"type":"incoming-call"}"#
    )
    // An older payload without callerHandle (and without hasVideo) still parses.
    let old = try IncomingCallPush(payload: [
      "dialtone": "1", "type": "incoming-call", "callId": "c1", "callerId": "alice", "createdAt": "5",
    ])
    #expect(old == push)
    let strict = try IncomingCallPush(
      jsonBytes: Array(
        #"{"dialtone":1,"type":"incoming-call","callId":"c1","callerId":"alice","hasVideo":false,"createdAt":5}"#.utf8))
    #expect(strict == push)
  }

  @Test func malformedPushPayloads() {
    #expect(throws: ProtocolError(.badRequest, "not a Dialtone push: \"dialtone\" is missing")) {
      try IncomingCallPush(payload: ["callId": "c1"])
    }
    #expect(throws: ProtocolError(.badRequest, "\"callId\" is required")) {
      try IncomingCallPush(payload: ["dialtone": 1, "type": "incoming-call", "callerId": "a", "createdAt": 1])
    }
    #expect(throws: ProtocolError(.badRequest, "\"type\" must be \"incoming-call\"")) {
      try IncomingCallPush(payload: ["dialtone": "1", "type": "message"])
    }
    #expect(throws: ProtocolError(.badRequest, "\"type\" must be \"incoming-call\"")) {
      try IncomingCallPush(payload: ["dialtone": 1, "type": "missed-call", "callId": "c", "callerId": "a"])
    }
    #expect(throws: ProtocolError(.badRequest, "\"hasVideo\" must be a boolean")) {
      try IncomingCallPush(payload: [
        "dialtone": "1", "type": "incoming-call", "callId": "c", "callerId": "a", "hasVideo": "maybe", "createdAt": "1",
      ])
    }
    #expect(throws: ProtocolError(.badRequest, "\"createdAt\" must be an integer")) {
      try IncomingCallPush(payload: [
        "dialtone": "1", "type": "incoming-call", "callId": "c", "callerId": "a", "createdAt": "soon",
      ])
    }
    #expect(throws: ProtocolError(.badRequest, "\"callerHandle\" must not be empty")) {
      try IncomingCallPush(payload: [
        "dialtone": 1, "type": "incoming-call", "callId": "c", "callerId": "a", "callerHandle": "", "createdAt": 1,
      ])
    }
    #expect(throws: ProtocolError(.badRequest, "\"callerHandle\" must be a string")) {
      try IncomingCallPush(payload: [
        "dialtone": 1, "type": "incoming-call", "callId": "c", "callerId": "a", "callerHandle": 42, "createdAt": 1,
      ])
    }
    let longHandle = String(repeating: "h", count: Limits.maxUserIDBytes + 1)
    let tooLong: JSONValue = [
      "dialtone": 1, "type": "incoming-call", "callId": "c", "callerId": "a", "callerHandle": .string(longHandle),
      "createdAt": 1,
    ]
    #expect(throws: ProtocolError(.badRequest, "\"callerHandle\" must be at most 128 bytes")) {
      try IncomingCallPush(json: tooLong, options: .strict)
    }
    // Lenient decoding (what devices use) does not enforce sizes.
    #expect((try? IncomingCallPush(json: tooLong, options: .lenient))?.callerHandle == longHandle)
  }

  @Test func missedCallPush() throws {
    let push = MissedCallPush(callId: Fixtures.callId, callerId: "alice", callerName: "Alice")
    #expect(
      push.apnsPayload.serializedString
        == #"{"aps":{"alert":{"body":"Alice","title":"Missed call"},"sound":"default"},"callId":"6b8f2a3e-1c4d-4e8a-9f00-3d2b1a0c9e7f","callerId":"alice","callerName":"Alice","dialtone":1,"type":"missed-call"}"#
    )
    #expect(push.json == push.apnsPayload)
    #expect(try MissedCallPush(json: push.apnsPayload) == push)
    // Without a name the body is the caller's user id; an empty name counts as none.
    let anonymous = MissedCallPush(callId: "c1", callerId: "alice")
    #expect(
      anonymous.apnsPayload.serializedString
        == #"{"aps":{"alert":{"body":"alice","title":"Missed call"},"sound":"default"},"callId":"c1","callerId":"alice","dialtone":1,"type":"missed-call"}"#
    )
    #expect(MissedCallPush(callId: "c1", callerId: "alice", callerName: "").alertBody == "alice")
    // Built from the incoming-call push of the same call.
    let incoming = IncomingCallPush(
      callId: Fixtures.callId, callerId: "alice", callerDeviceId: "phone", callerName: "Alice", hasVideo: false,
      createdAt: 1)
    #expect(MissedCallPush(missed: incoming) == push)
    // A notification's userInfo parses; aps is ignored.
    let userInfo: [AnyHashable: Any] = [
      "aps": ["alert": ["title": "Missed call", "body": "Alice"], "sound": "default"] as [String: Any],
      "dialtone": 1, "type": "missed-call", "callId": Fixtures.callId, "callerId": "alice", "callerName": "Alice",
    ]
    #expect(try MissedCallPush(payload: userInfo) == push)
    #expect(throws: ProtocolError(.badRequest, "\"type\" must be \"missed-call\"")) {
      try MissedCallPush(json: incoming.apnsPayload)
    }
    #expect(throws: ProtocolError(.badRequest, "not a Dialtone push: \"dialtone\" is missing")) {
      try MissedCallPush(payload: ["type": "missed-call", "callId": "c1", "callerId": "alice"])
    }
  }

  // MARK: Constants

  @Test func constants() {
    #expect(ProtocolVersion.current == 1)
    #expect(CloseCode.allCases.map(\.rawValue) == [1000, 1001, 1009, 4400, 4401, 4408, 4409, 4429, 4503])
    #expect(CloseCode.overLimit.shouldReconnect)
    #expect(CloseCode.replaced.shouldReconnect == false)
    #expect(CloseCode.goingAway.shouldReconnect)
    #expect(
      ErrorCode.allCases.map(\.rawValue) == [
        "bad-request", "unknown-type", "unauthorized", "forbidden", "not-found", "conflict", "invalid-state",
        "too-large",
        "rate-limited", "limit-exceeded", "unsupported-version", "internal",
      ])
    #expect(
      EndReason.allCases.map(\.rawValue) == [
        "declined", "busy", "missed", "cancelled", "hangup", "failed", "connection-lost", "answered-elsewhere",
        "declined-elsewhere", "glare",
      ])
    #expect(ErrorCode.notFound.httpStatus == 404)
    #expect(Limits.maxMessageBytes == 65536 && Limits.maxSDPBytes == 32768 && Limits.maxCandidateBytes == 1024)
    #expect(ProtocolDefaults.ringTimeoutSeconds == 45 && ProtocolDefaults.reconnectGraceSeconds == 30)
  }

  @Test func callIdRules() {
    let generated = CallIDRules.generate()
    #expect(CallIDRules.isValid(generated))
    #expect(generated == generated.lowercased())
    #expect(CallIDRules.uuid(of: generated) != nil)
    #expect(CallIDRules.uuid(of: generated.uppercased()) == CallIDRules.uuid(of: generated))
    #expect(CallIDRules.uuid(of: "call-1") == nil)
    #expect(CallIDRules.isValid("A-z_0.9"))
    #expect(!CallIDRules.isValid(""))
    #expect(!CallIDRules.isValid("é"))
    // Glare: the byte-wise lower id survives, whichever order they are given in.
    #expect(CallIDRules.glareSurvivor("b0", "a9") == "a9")
    #expect(CallIDRules.glareSurvivor("a9", "b0") == "a9")
    #expect(CallIDRules.glareSurvivor("B", "a") == "B")  // uppercase sorts before lowercase
    #expect(CallIDRules.glareSurvivor("ab", "abc") == "ab")
  }

  /// A nested object's location is made into text only for an error (`WireDecoder`'s lazy
  /// path): a field under an array element and two nested objects is still named by all of it.
  @Test func aFieldDeepInNestedObjectsIsNamedByItsWholePath() {
    let call = #"{"callId":"c","callerId":"a","calleeId":"b","video":true,"createdAt":1,"blocked":false}"#
    func body(_ report: String) -> [UInt8] {
      Array(
        #"{"call":\#(call),"quality":[{"deviceId":"d","receivedAt":1,"role":"caller","userId":"a","report":\#(report)}]}"#
          .utf8)
    }
    #expect(throws: ProtocolError(.badRequest, "\"quality[0].report.callId\" must not be empty")) {
      try MessageCodec.decode(CallDetailResponse.self, from: body(#"{"callId":""}"#))
    }
    #expect(throws: ProtocolError(.badRequest, "\"quality[0].report.milestones.firstAudio\" must be an integer")) {
      try MessageCodec.decode(CallDetailResponse.self, from: body(#"{"callId":"c","milestones":{"firstAudio":"x"}}"#))
    }
    #expect(throws: ProtocolError(.badRequest, "\"quality[0].report.milestones\" must be an object")) {
      try MessageCodec.decode(CallDetailResponse.self, from: body(#"{"callId":"c","milestones":1}"#))
    }
  }
}
