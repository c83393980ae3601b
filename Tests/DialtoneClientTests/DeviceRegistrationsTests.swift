import DialtoneClient
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

/// A fake device API: records requests, can fail, and can hold a request open to check that
/// only one is in flight at a time.
private actor FakeDeviceAPI: DeviceRegistrationAPI {
  enum Request: Equatable {
    case post(voip: String?, alert: String?)
    case delete
  }
  struct Down: Error {}

  private(set) var requests: [Request] = []
  private(set) var maxInFlight = 0
  private var inFlight = 0
  private var failing = false
  private var gate: CheckedContinuation<Void, Never>?
  private var holding = false

  func setFailing(_ value: Bool) { failing = value }
  func hold() { holding = true }
  func release() {
    holding = false
    gate?.resume()
    gate = nil
  }
  var isHeld: Bool { gate != nil }

  func register(_ registration: DeviceRegistration) async throws {
    #expect(registration.installationId == "inst-1")
    #expect(registration.platform == .ios)
    #expect(registration.bundleId == "com.example.app")
    #expect(registration.apnsEnvironment == .sandbox)
    try await run(.post(voip: registration.voipToken, alert: registration.alertToken))
  }

  func unregister(installationId: String) async throws {
    #expect(installationId == "inst-1")
    try await run(.delete)
  }

  private func run(_ request: Request) async throws {
    inFlight += 1
    maxInFlight = max(maxInFlight, inFlight)
    defer { inFlight -= 1 }
    requests.append(request)
    if holding { await withCheckedContinuation { gate = $0 } }
    if failing { throw Down() }
  }
}

@Suite struct DeviceRegistrationsTests {
  private func make(_ api: FakeDeviceAPI) -> DeviceRegistrations {
    DeviceRegistrations(api: api, installationId: "inst-1", bundleId: "com.example.app", apnsEnvironment: .sandbox)
  }

  // Every POST carries both tokens (it replaces the whole registration).
  @Test func everyPostCarriesBothTokens() async {
    let api = FakeDeviceAPI()
    let registrations = make(api)
    await registrations.setVoIPToken("v1")
    await registrations.settled()
    await registrations.setAlertToken("a1")
    await registrations.settled()
    await registrations.setVoIPToken("v2")
    await registrations.settled()
    #expect(
      await api.requests == [
        .post(voip: "v1", alert: nil), .post(voip: "v1", alert: "a1"), .post(voip: "v2", alert: "a1"),
      ])
  }

  // An invalidated VoIP token re-posts the alert token alone; with neither, the device is deleted.
  @Test func invalidationRepostsTheAlertTokenOrDeletes() async {
    let api = FakeDeviceAPI()
    let registrations = make(api)
    await registrations.setVoIPToken("v1")
    await registrations.setAlertToken("a1")
    await registrations.settled()
    await registrations.setVoIPToken(nil)
    await registrations.settled()
    #expect(await api.requests.last == .post(voip: nil, alert: "a1"))
    await registrations.setAlertToken(nil)
    await registrations.settled()
    #expect(await api.requests.last == .delete)
  }

  // One request at a time: changes made meanwhile go out together afterwards, and the same
  // state is not sent twice.
  @Test func oneRequestAtATime() async {
    let api = FakeDeviceAPI()
    let registrations = make(api)
    await api.hold()
    await registrations.setVoIPToken("v1")
    #expect(await eventually { await api.isHeld })
    await registrations.setAlertToken("a1")
    await registrations.setVoIPToken("v2")
    await api.release()
    await registrations.settled()
    #expect(await api.requests == [.post(voip: "v1", alert: nil), .post(voip: "v2", alert: "a1")])
    #expect(await api.maxInFlight == 1)
    await registrations.setVoIPToken("v2")
    await registrations.settled()
    #expect(await api.requests.count == 2)
  }

  // A failure is not retried in a loop; the next change (or launch) registers again.
  @Test func aFailureWaitsForTheNextChange() async {
    let api = FakeDeviceAPI()
    let registrations = make(api)
    await api.setFailing(true)
    await registrations.setVoIPToken("v1")
    await registrations.settled()
    #expect(await api.requests == [.post(voip: "v1", alert: nil)])
    await api.setFailing(false)
    // PushKit hands the same token over again at the next launch: it is sent again.
    await registrations.setVoIPToken("v1")
    await registrations.settled()
    #expect(await api.requests == [.post(voip: "v1", alert: nil), .post(voip: "v1", alert: nil)])
  }

  @Test func tokensAreLowerCaseHex() {
    #expect(DeviceRegistrations.hex([0x00, 0x0f, 0xa0, 0xff]) == "000fa0ff")
    #expect(DeviceRegistrations.hex([UInt8]()) == "")
  }
}
