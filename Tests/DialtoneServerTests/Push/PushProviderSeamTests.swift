import DialtoneCalls
import DialtoneProtocol
import DialtonePush
import DialtoneSQLite
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneStorage

extension PushTokenKind {
  /// A provider the server does not ship, to show that adding one needs no other change.
  fileprivate static let testPush = PushTokenKind(rawValue: "test-push")
}

/// A third push provider: records what it is asked to send; a token named "dead" is invalid.
private actor RecordingProvider: PushProvider {
  nonisolated var purposes: [PushTokenKind: PushPurpose] { [.testPush: .incomingCall] }
  private(set) var sent: [(PushMessage, PushToken)] = []

  func send(_ message: PushMessage, to token: PushToken) async -> PushOutcome {
    sent.append((message, token))
    return token.token == "dead" ? .invalidToken("gone") : .delivered
  }

  var sentCallIds: [String] {
    sent.compactMap {
      if case .incomingCall(let push) = $0.0 { return push.callId + "@" + $0.1.token } else { return nil }
    }
  }
}

@Suite struct PushProviderSeamTests {
  private func temporaryStore() throws -> (SQLiteStore, String) {
    let directory = NSTemporaryDirectory() + "dialtone-push-\(UUID().uuidString)"
    return (try SQLiteStore.open(dataDirectory: directory), directory)
  }

  private func ringing(_ callId: CallID, callee: String) -> CallEvent {
    .ringing(
      callId: callId, caller: Peer(userId: "alice", deviceId: "phone"), calleeId: callee, video: false,
      createdAt: Date(timeIntervalSince1970: 1_800_000_000))
  }

  // A provider of a new token kind gets the ring for its tokens, and its dead tokens go away,
  // with no change to the dispatcher or the store.
  @Test func aNewProviderIsOneConformance() async throws {
    let (store, directory) = try temporaryStore()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    _ = try await store.upsert(
      installationId: "web-1", platform: .android, tokens: [PushToken(kind: .testPush, token: "live", topic: "app")],
      userId: "bob", deviceId: "browser", now: 1)
    _ = try await store.upsert(
      installationId: "web-2", platform: .android, tokens: [PushToken(kind: .testPush, token: "dead")],
      userId: "bob", deviceId: "old-browser", now: 1)
    let provider = RecordingProvider()
    let dispatcher = PushDispatcher(store: store, providers: [provider], log: Log(level: .error, subsystem: "push"))

    dispatcher.handle(ringing("call-1", callee: "bob"), connectedDevices: [])
    await dispatcher.drain()
    #expect(Set(await provider.sentCallIds) == ["call-1@live", "call-1@dead"])
    #expect(await provider.sent.first { $0.1.token == "live" }?.1.topic == "app")
    // The invalid token is forgotten, and with it the installation that had nothing else.
    #expect(try await store.devices(of: "bob").map(\.installationId) == ["web-1"])

    // A connected device is not pushed; a missed call is not this provider's business.
    dispatcher.handle(ringing("call-2", callee: "bob"), connectedDevices: ["browser"])
    dispatcher.handle(
      .ended(
        CallRecord(
          callId: "call-2", callerId: "alice", calleeId: "bob", answeredBy: nil, video: false,
          createdAt: 1, answeredAt: nil, endedAt: 2, endReason: .missed, durationMs: nil)),
      connectedDevices: [])
    await dispatcher.drain()
    #expect(await provider.sent.count == 2)
  }

  // Tokens are rows: a registration replaces the installation's set, and a token moves to the
  // installation that registers it last.
  @Test func tokensAreRowsThatMoveAndAreReplaced() async throws {
    let (store, directory) = try temporaryStore()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let voip = PushToken(kind: .voip, token: "aa", topic: "com.example", environment: "sandbox")
    let alert = PushToken(kind: .alert, token: "bb", topic: "com.example", environment: "sandbox")
    _ = try await store.upsert(
      installationId: "i1", platform: .ios, tokens: [voip, alert], userId: "alice",
      deviceId: "phone", now: 1)
    _ = try await store.upsert(
      installationId: "i2", platform: .ios, tokens: [voip], userId: "bob", deviceId: "phone",
      now: 2)
    #expect(try await store.devices(of: "alice").first?.tokens == [alert])
    #expect(try await store.devices(of: "bob").first?.tokens == [voip])
    _ = try await store.upsert(
      installationId: "i1", platform: .ios, tokens: [PushToken(kind: .alert, token: "cc")],
      userId: "alice", deviceId: "phone", now: 3)
    #expect(try await store.devices(of: "alice").first?.tokens.map(\.token) == ["cc"])
    // The last token taken away: the installation is gone.
    _ = try await store.upsert(
      installationId: "i3", platform: .ios, tokens: [PushToken(kind: .alert, token: "cc")],
      userId: "carol", deviceId: "pad", now: 4)
    #expect(try await store.devices(of: "alice").isEmpty)
    #expect(try await store.remove(installationId: "i3", userId: "carol"))
    #expect(try await store.remove(installationId: "i3", userId: "carol") == false)
  }

  // A database of schema 2 (a column per token kind) keeps every registration on upgrade.
  @Test func aVersion2DatabaseIsMigratedToTokenRows() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-migrate-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = (directory as NSString).appendingPathComponent("dialtone.sqlite")
    do {
      let old = try oldDatabase(at: path, schema: 2)
      try old.execute(
        """
        INSERT INTO devices VALUES ('alice', 'i1', 'phone', 'ios', 'v1', 'a1', NULL, 'com.example', 'sandbox', 10);
        INSERT INTO devices VALUES ('alice', 'i2', 'pixel', 'android', NULL, NULL, 'f1', NULL, NULL, 20);
        INSERT INTO devices VALUES ('bob', 'i3', 'pad', 'ios', NULL, 'a3', NULL, 'com.example', 'production', 30);
        """)
    }
    let store = try SQLiteStore(path: path)
    #expect(try await store.schemaVersion() == Int64(SQLiteStore.migrations.count))
    let alice = try await store.devices(of: "alice")
    #expect(alice.map(\.installationId) == ["i1", "i2"])
    #expect(
      alice[0].tokens == [
        PushToken(kind: .alert, token: "a1", topic: "com.example", environment: "sandbox"),
        PushToken(kind: .voip, token: "v1", topic: "com.example", environment: "sandbox"),
      ])
    #expect(alice[0].info.bundleId == "com.example" && alice[0].info.apnsEnvironment == .sandbox)
    #expect(alice[1].tokens == [PushToken(kind: .fcm, token: "f1")])
    #expect(alice[1].platform == .android && alice[1].updatedAt == 20)
    let bob = try await store.devices(of: "bob")
    #expect(bob.first?.info.hasAlertToken == true && bob.first?.info.hasVoipToken == false)
  }
}
