import DialtoneCalls
import DialtoneJSON
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneSFU
@testable import DialtoneServer

private func hex(_ prefix: String) -> String { prefix + String(repeating: "a", count: 64 - prefix.count) }

/// Real HTTP/2 pushes to the APNs mock (TLS, self-signed) and FCM mock that the tests start.
@Suite(.serialized) struct PushTests {
  struct Rig {
    let server: TestServer
    let apns: APNsMock
    let fcm: FCMMock

    static func start(
      remoteDevices: any RemoteDevices = NoRemoteDevices(), _ extra: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> Rig {
      let apns = try APNsMock.start()
      let fcm = try FCMMock.start()
      let configure: (inout ServerConfiguration) -> Void = { c in
        c.apnsKeyFile = apns.keyFile
        c.apnsKeyID = apns.keyID
        c.apnsTeamID = apns.teamID
        c.apnsURL = apns.baseURL
        c.pushCAFile = apns.caFile
        c.fcmServiceAccountFile = fcm.serviceAccountFile
        c.fcmURL = fcm.baseURL
        c.pushRetryFirstDelay = 0.05
        extra(&c)
      }
      let server = try await TestServer(configure: configure, remoteDevices: remoteDevices)
      return Rig(server: server, apns: apns, fcm: fcm)
    }

    func register(_ user: String, device: String, body: String) async throws {
      let response = try await server.http("POST", "/v1/devices", token: server.token(user, device: device), body: body)
      guard response.status == 200 else {
        throw ProbeFailure(description: "registration failed: \(response.status) \(String(describing: response.json))")
      }
    }

    func registerIPhone(_ user: String, device: String = "iphone", voip: String, alert: String? = nil) async throws {
      let alertField = alert.map { #","alertToken":"\#($0)""# } ?? ""
      try await register(
        user, device: device,
        body:
          #"{"installationId":"\#(device)-install","platform":"ios","voipToken":"\#(voip)"\#(alertField),"bundleId":"com.example.chat","apnsEnvironment":"sandbox"}"#
      )
    }

    func registerAndroid(_ user: String, device: String = "pixel", token: String) async throws {
      try await register(
        user, device: device,
        body: #"{"installationId":"\#(device)-install","platform":"android","fcmToken":"\#(token)"}"#)
    }

    func stop() async {
      await server.stop()
      apns.process.stop()
      fcm.process.stop()
    }
  }

  @Test func anIPhoneAndAnAndroidPhoneEachGetOnePush() async throws {
    let rig = try await Rig.start()
    try await rig.registerIPhone("bob", voip: hex("ab"))
    try await rig.registerAndroid("bob", token: "fcm-token-1")
    let alice = try await rig.server.connect("alice", name: "Alice")
    _ = try await alice.request(.invite(.init(callId: "call-push-1", to: "bob", video: true)))

    let apnsLog = try await rig.apns.process.waitFor("the VoIP push") { $0.count >= 1 }
    let push = try #require(apnsLog.first)
    #expect(push["status"]?.intValue == 200)
    #expect(push["jwt"]?["valid"]?.boolValue == true)
    #expect(push["headers"]?["apns-push-type"]?.stringValue == "voip")
    #expect(push["headers"]?["apns-topic"]?.stringValue == "com.example.chat.voip")
    #expect(push["headers"]?["apns-priority"]?.stringValue == "10")
    #expect(push["headers"]?["apns-expiration"]?.stringValue == "0")
    #expect(push["payload"]?["callId"]?.stringValue == "call-push-1")
    #expect(push["payload"]?["callerName"]?.stringValue == "Alice")
    #expect(push["payload"]?["hasVideo"]?.boolValue == true)

    let fcmLog = try await rig.fcm.process.waitFor("the FCM message") {
      $0.contains { $0["kind"]?.stringValue == "send" }
    }
    let send = try #require(fcmLog.first { $0["kind"]?.stringValue == "send" })
    #expect(send["status"]?.intValue == 200)
    #expect(send["payload"]?["message"]?["android"]?["priority"]?.stringValue == "HIGH")
    #expect(send["payload"]?["message"]?["android"]?["ttl"]?.stringValue == "0s")
    #expect(send["payload"]?["message"]?["data"]?["callId"]?.stringValue == "call-push-1")

    // Cancelling never pushes: the devices learn it over signaling.
    _ = try await alice.request(.cancel(.init(callId: "call-push-1")))
    try await Task.sleep(for: .milliseconds(300))
    #expect(rig.apns.process.requests().count == 1)
    #expect(rig.fcm.sends.count == 1)
    await rig.stop()
  }

  @Test func aGroupRingPushesEveryMemberWithoutASocketWithTheGroupsFields() async throws {
    // LiveKit stands in for the SFU: a group ring needs one configured, not running.
    let rig = try await Rig.start { c in
      c.liveKitURL = "ws://127.0.0.1:9"
      c.liveKitAPIKey = LiveKitFixture.credentials.apiKey
      c.liveKitAPISecret = LiveKitFixture.credentials.apiSecret
    }
    try await rig.registerIPhone("bob", voip: hex("ab"))
    try await rig.registerAndroid("carol", token: "fcm-token-carol")
    try await rig.registerIPhone("dave", device: "iphone", voip: hex("dd"))
    let dave = try await rig.server.connect("dave", device: "iphone")  // has a socket: rung over it
    let alice = try await rig.server.connect("alice", name: "Alice")
    let created = try await alice.request(
      .groupCreate(.init(callId: "group-push-1", members: ["bob", "carol", "dave"], video: true, title: "Standup")))
    #expect(created.isAck)
    _ = try await alice.expect(.groupMedia)
    _ = try await dave.expect(.groupInvite)

    let apnsLog = try await rig.apns.process.waitFor("the group VoIP push") { $0.count >= 1 }
    let push = try #require(apnsLog.first)
    #expect(push["headers"]?["apns-push-type"]?.stringValue == "voip")
    #expect(push["payload"]?["callId"]?.stringValue == "group-push-1")
    #expect(push["payload"]?["callerId"]?.stringValue == "alice")
    #expect(push["payload"]?["callerName"]?.stringValue == "Alice")
    #expect(push["payload"]?["memberCount"]?.intValue == 4)
    #expect(push["payload"]?["title"]?.stringValue == "Standup")
    #expect(push["payload"]?["hasVideo"]?.boolValue == true)
    let fcmLog = try await rig.fcm.process.waitFor("the group FCM message") {
      $0.contains { $0["kind"]?.stringValue == "send" }
    }
    let data = fcmLog.first { $0["kind"]?.stringValue == "send" }?["payload"]?["message"]?["data"]
    #expect(data?["callId"]?.stringValue == "group-push-1")
    #expect(data?["memberCount"]?.stringValue == "4")
    #expect(data?["title"]?.stringValue == "Standup")
    // Dave has a socket: no push for him; ending the call pushes nobody.
    _ = try await alice.request(.groupEnd(.init(callId: "group-push-1")))
    try await Task.sleep(for: .milliseconds(300))
    #expect(rig.apns.process.requests().count == 1)
    #expect(rig.fcm.sends.count == 1)
    await rig.stop()
  }

  @Test func aConnectedDeviceIsNotPushed() async throws {
    let rig = try await Rig.start()
    try await rig.registerIPhone("bob", device: "iphone", voip: hex("ab"))
    let bob = try await rig.server.connect("bob", device: "iphone")
    let alice = try await rig.server.connect("alice")
    _ = try await alice.request(.invite(.init(callId: "call-push-2", to: "bob", video: false)))
    _ = try await bob.expect(.invite)
    try await Task.sleep(for: .milliseconds(300))
    #expect(rig.apns.process.requests().isEmpty)
    await rig.stop()
  }

  /// A device connected to another node of a cluster needs no push either; the user's others do.
  @Test func aDeviceConnectedToAnotherNodeIsNotPushed() async throws {
    let rig = try await Rig.start(remoteDevices: RecordingRemoteDevices(elsewhere: ["bob": ["iphone"]]))
    try await rig.registerIPhone("bob", device: "iphone", voip: hex("ac"))
    try await rig.registerAndroid("bob", device: "pixel", token: "fcm-remote-seam")
    let alice = try await rig.server.connect("alice")
    _ = try await alice.request(.invite(.init(callId: "call-push-remote", to: "bob", video: false)))
    let pushed = await eventually { !rig.fcm.process.requests().isEmpty }
    #expect(pushed)
    try await Task.sleep(for: .milliseconds(300))
    #expect(rig.apns.process.requests().isEmpty)
    await rig.stop()
  }

  @Test func deadTokensAreRemoved() async throws {
    let rig = try await Rig.start()
    try await rig.registerIPhone("bob", device: "old-iphone", voip: hex("410"))
    try await rig.registerIPhone("bob", device: "wrong-topic", voip: hex("4001"))
    try await rig.registerAndroid("bob", token: "unreg-token")
    let alice = try await rig.server.connect("alice")
    _ = try await alice.request(.invite(.init(callId: "call-push-3", to: "bob", video: false)))
    _ = try await rig.apns.process.waitFor("two APNs answers") { $0.count >= 2 }
    _ = try await rig.fcm.process.waitFor("the FCM answer") { $0.contains { $0["kind"]?.stringValue == "send" } }
    var remaining: [JSONValue] = ["x"]
    for _ in 0..<200 {
      remaining =
        try await rig.server.http("GET", "/v1/devices", token: rig.server.token("bob")).json?["devices"]?.arrayValue
        ?? []
      if remaining.isEmpty { break }
      try await Task.sleep(for: .milliseconds(20))
    }
    #expect(remaining.isEmpty)
    await rig.stop()
  }

  @Test func anExpiredProviderTokenIsReplaced() async throws {
    let rig = try await Rig.start()
    try await rig.registerIPhone("bob", voip: hex("403e"))
    let alice = try await rig.server.connect("alice")
    _ = try await alice.request(.invite(.init(callId: "call-push-4", to: "bob", video: false)))
    let log = try await rig.apns.process.waitFor("the retried push") { $0.contains { $0["status"]?.intValue == 200 } }
    #expect(log.count == 2)
    #expect(log[0]["status"]?.intValue == 403)
    #expect(log[0]["jwt"]?["raw"]?.stringValue != log[1]["jwt"]?["raw"]?.stringValue)
    await rig.stop()
  }

  @Test func serverErrorsAreRetriedWithABoundAndStopWhenTheCallEnds() async throws {
    let rig = try await Rig.start()
    try await rig.registerIPhone("bob", device: "flaky", voip: hex("5031"))
    try await rig.registerIPhone("carol", device: "throttled", voip: hex("429"))
    let alice = try await rig.server.connect("alice")
    _ = try await alice.request(.invite(.init(callId: "call-push-5", to: "bob", video: false)))
    let flaky = try await rig.apns.process.waitFor("the third attempt") {
      $0.contains { $0["status"]?.intValue == 200 }
    }
    #expect(flaky.map { $0["status"]?.intValue } == [503, 503, 200])

    // Throttled forever: retries stop when the call stops ringing, and never exceed the bound.
    _ = try await alice.request(.invite(.init(callId: "call-push-6", to: "carol", video: false)))
    _ = try await rig.apns.process.waitFor("a retry") { $0.filter { $0["status"]?.intValue == 429 }.count >= 2 }
    _ = try await alice.request(.cancel(.init(callId: "call-push-6")))
    try await Task.sleep(for: .milliseconds(500))
    let attempts = rig.apns.process.requests().filter { $0["status"]?.intValue == 429 }.count
    try await Task.sleep(for: .milliseconds(500))
    #expect(rig.apns.process.requests().filter { $0["status"]?.intValue == 429 }.count == attempts)
    #expect(attempts <= 6)
    await rig.stop()
  }

  @Test func aMissedCallGetsAnAlertPush() async throws {
    let rig = try await Rig.start()
    try await rig.registerIPhone("bob", voip: hex("ab"), alert: hex("cd"))
    let alice = try await rig.server.connect("alice", name: "Alice")
    _ = try await alice.request(.invite(.init(callId: "call-push-7", to: "bob", video: false)))
    _ = try await rig.apns.process.waitFor("the VoIP push") { $0.count >= 1 }
    try #require(await rig.server.clock.waitForTimer(dueIn: 45))
    rig.server.clock.advance(by: 46)
    #expect(try await alice.expect(.callEnded).endReason == .missed)
    let log = try await rig.apns.process.waitFor("the alert push") { $0.count >= 2 }
    let alert = log[1]
    #expect(alert["headers"]?["apns-push-type"]?.stringValue == "alert")
    #expect(alert["headers"]?["apns-topic"]?.stringValue == "com.example.chat")
    #expect(alert["token"]?.stringValue == hex("cd"))
    #expect(alert["payload"]?["aps"]?["alert"]?["body"]?.stringValue == "Alice")
    #expect(alert["status"]?.intValue == 200)
    await rig.stop()
  }

  /// Bob (iPhone, with an alert token) and Carol (Android) block Alice; Dave does not. Alice's
  /// 1:1 and group rings push Dave alone, the missed 1:1 call sends Bob no alert, and once Bob
  /// unblocks her the next call pushes him again.
  @Test func blockedRingsPushNobodyAndUnblockingPushesAgain() async throws {
    let rig = try await Rig.start { c in
      c.liveKitURL = "ws://127.0.0.1:9"
      c.liveKitAPIKey = LiveKitFixture.credentials.apiKey
      c.liveKitAPISecret = LiveKitFixture.credentials.apiSecret
    }
    try await rig.registerIPhone("bob", voip: hex("b1"), alert: hex("b2"))
    try await rig.registerAndroid("carol", token: "fcm-token-blocker")
    try await rig.registerIPhone("dave", voip: hex("d1"))
    for blocker in ["bob", "carol"] {
      #expect(try await rig.server.http("PUT", "/v1/blocks/alice", token: rig.server.token(blocker)).status == 204)
    }
    let alice = try await rig.server.connect("alice", name: "Alice")
    #expect(try await alice.request(.invite(.init(callId: "call-blocked-1", to: "bob", video: false))).isAck)
    #expect(try await alice.request(.invite(.init(callId: "call-blocked-2", to: "carol", video: false))).isAck)
    #expect(
      try await alice.request(.groupCreate(.init(callId: "group-blocked-1", members: ["bob", "carol", "dave"]))).isAck)
    _ = try await rig.apns.process.waitFor("Dave's group push") { $0.count >= 1 }
    try #require(await rig.server.clock.waitForTimer(dueIn: 45))
    rig.server.clock.advance(by: 46)
    var missed = 0
    for _ in 0..<20 where missed < 2 {
      if try await alice.next("the missed calls").message.endReason == .missed { missed += 1 }
    }
    #expect(missed == 2)

    #expect(try await rig.server.http("DELETE", "/v1/blocks/alice", token: rig.server.token("bob")).status == 204)
    // From another device: this one's queue holds the group call's updates.
    let laptop = try await rig.server.connect("alice", device: "laptop", name: "Alice")
    #expect(try await laptop.request(.invite(.init(callId: "call-blocked-3", to: "bob", video: false))).isAck)
    let log = try await rig.apns.process.waitFor("Bob's push once unblocked") {
      $0.contains { $0["payload"]?["callId"]?.stringValue == "call-blocked-3" }
    }
    try await Task.sleep(for: .milliseconds(300))
    let pushed = rig.apns.process.requests().map {
      "\($0["token"]?.stringValue ?? "?")/\($0["payload"]?["callId"]?.stringValue ?? "?")"
    }
    #expect(pushed == [hex("d1") + "/group-blocked-1", hex("b1") + "/call-blocked-3"], "\(log.count) pushes")
    #expect(rig.fcm.sends.isEmpty)
    await rig.stop()
  }

  /// Threads of this process with `name` (Linux shows at most 15 bytes of it).
  private static func threads(named name: String) -> Int {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.filter {
      (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?.trimmingCharacters(
        in: .whitespacesAndNewlines) == String(name.prefix(15))
    }.count
  }

  @Test func aStoppedServerLetsGoOfItsPushClients() async throws {
    let names = ["dialtone-http2", "dialtone-http-client"]
    let before = names.map(Self.threads(named:))
    let rig = try await Rig.start()
    try await rig.registerIPhone("bob", voip: hex("ab"))
    try await rig.registerAndroid("bob", token: "fcm-token-1")
    let alice = try await rig.server.connect("alice", name: "Alice")
    _ = try await alice.request(.invite(.init(callId: "call-push-stop", to: "bob", video: false)))
    _ = try await rig.apns.process.waitFor("the VoIP push") { $0.count >= 1 }
    _ = try await rig.fcm.process.waitFor("the FCM message") { $0.contains { $0["kind"]?.stringValue == "send" } }
    #expect(names.map(Self.threads(named:)) == before.map { $0 + 1 }, "one APNs and one FCM client thread")
    await rig.stop()
    // Their threads end once the server has stopped (a little after: they wake to see it).
    var after = names.map(Self.threads(named:))
    for _ in 0..<100 where after != before {
      try await Task.sleep(for: .milliseconds(100))
      after = names.map(Self.threads(named:))
    }
    #expect(after == before, "the push clients' threads outlived the server")
  }
}
