import DialtoneJSON
import DialtoneProtocol
import DialtonePush
import Foundation
import Testing

@testable import DialtoneServer
@testable import DialtoneStorage

private let voip = String(repeating: "ab", count: 32)
private let alert = String(repeating: "cd", count: 32)

private func ios(_ installation: String, voipToken: String? = voip, alertToken: String? = alert) -> String {
  var fields = [
    #""installationId":"\#(installation)""#, #""platform":"ios""#, #""bundleId":"com.example.chat""#,
    #""apnsEnvironment":"production""#,
  ]
  if let voipToken { fields.append(#""voipToken":"\#(voipToken)""#) }
  if let alertToken { fields.append(#""alertToken":"\#(alertToken)""#) }
  return "{" + fields.joined(separator: ",") + "}"
}

@Suite(.serialized) struct DeviceRegistryTests {
  @Test func registersListsAndDeletesOwnInstallations() async throws {
    let server = try await TestServer()
    let alicePhone = server.token("alice", device: "phone")

    let created = try await server.http("POST", "/v1/devices", token: alicePhone, body: ios("inst-1"))
    #expect(created.status == 200)
    #expect(created.json?["deviceId"]?.stringValue == "phone")
    #expect(created.json?["hasVoipToken"]?.boolValue == true)
    #expect(created.json?["voipToken"] == nil)  // tokens are never echoed

    let android = #"{"installationId":"inst-2","platform":"android","fcmToken":"fcm:token-1"}"#
    #expect(
      try await server.http("POST", "/v1/devices", token: server.token("alice", device: "pixel"), body: android).status
        == 200)

    let listed = try await server.http("GET", "/v1/devices", token: alicePhone)
    #expect(
      listed.json?["devices"]?.arrayValue?.compactMap { $0["installationId"]?.stringValue } == ["inst-1", "inst-2"])
    #expect(
      try await server.http("GET", "/v1/devices", token: server.token("bob")).json?["devices"]?.arrayValue?.isEmpty
        == true)

    // Bob cannot delete Alice's installation; Alice can, once.
    #expect(try await server.http("DELETE", "/v1/devices/inst-1", token: server.token("bob")).status == 404)
    #expect(try await server.http("DELETE", "/v1/devices/inst-1", token: alicePhone).status == 204)
    #expect(try await server.http("DELETE", "/v1/devices/inst-1", token: alicePhone).status == 404)
    #expect(try await server.http("GET", "/v1/devices").status == 401)
    await server.stop()
  }

  @Test func aTokenRegisteredAgainMovesToItsNewOwner() async throws {
    let server = try await TestServer()
    _ = try await server.http("POST", "/v1/devices", token: server.token("alice"), body: ios("old-install"))
    // The app was reinstalled and Bob signed in on the same phone: same PushKit token.
    _ = try await server.http(
      "POST", "/v1/devices", token: server.token("bob"), body: ios("new-install", alertToken: nil))

    let store = try SQLiteStore.open(dataDirectory: server.dataDirectory)
    let alices = try await store.devices(of: "alice")
    #expect(alices.count == 1)
    #expect(alices.first?.token(.voip) == nil)  // moved to Bob
    #expect(alices.first?.token(.alert)?.token == alert)
    #expect(try await store.devices(of: "bob").first?.token(.voip)?.token == voip)

    // Once a row has no token left it disappears.
    try await store.removeToken(alert, kind: .alert)
    #expect(try await store.devices(of: "alice").isEmpty)
    await server.stop()
  }

  @Test(arguments: [
    (#"{"installationId":"i","platform":"windows"}"#, "platform"),
    (#"{"installationId":"i","platform":"ios","voipToken":"\#(voip)","apnsEnvironment":"production"}"#, "bundleId"),
    (
      #"{"installationId":"i","platform":"ios","voipToken":"xyz","bundleId":"b","apnsEnvironment":"production"}"#,
      "voipToken"
    ),
    (#"{"installationId":"i","platform":"android"}"#, "fcmToken"),
    (#"{"platform":"android","fcmToken":"t"}"#, "installationId"),
    (#"not json"#, ""),
  ])
  func invalidRegistrationsAreClearErrors(_ body: String, _ field: String) async throws {
    let server = try await TestServer()
    let response = try await server.http("POST", "/v1/devices", token: server.token("alice"), body: body)
    #expect(response.status == 400)
    #expect(response.json?["error"]?["code"]?.stringValue == "bad-request")
    let message = response.json?["error"]?["message"]?.stringValue ?? ""
    #expect(field.isEmpty || message.contains(field), "message: \(message)")
    await server.stop()
  }
}
