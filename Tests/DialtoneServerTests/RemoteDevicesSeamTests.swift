import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// What another node of a cluster would be told: the seam's calls, recorded.
final class RecordingRemoteDevices: RemoteDevices {
  struct Delivery: Sendable, Equatable {
    let type: ServerMessageType?
    let userId: String
    let device: String?
    let skipping: Set<String>
  }

  enum Presence: Sendable, Equatable {
    case attached(String, session: String)
    case detached(String, session: String, ended: Bool)
  }

  private let state = Locked<(deliveries: [Delivery], presence: [Presence])>(([], []))
  /// user → devices the fake reports connected on other nodes.
  let elsewhere: [String: Set<String>]

  init(elsewhere: [String: Set<String>] = [:]) { self.elsewhere = elsewhere }

  var reachesOtherNodes: Bool { true }

  var deliveries: [Delivery] { state.withLock { $0.deliveries } }
  var presence: [Presence] { state.withLock { $0.presence } }

  func dispatch(_ event: CallEvent, connectedHere: Set<String>, to sink: any CallEffectSink) {
    sink.handle(event, connectedDevices: connectedHere.union(elsewhere[event.userId] ?? []))
  }

  func deliver(_ message: ServerMessage, to userId: String, device: String?, skipping: Set<String>) {
    let delivery = Delivery(type: message.knownType, userId: userId, device: device, skipping: skipping)
    state.withLock { $0.deliveries.append(delivery) }
  }

  func attached(_ identity: Identity, session: String, newSession: Bool) {
    state.withLock { $0.presence.append(.attached("\(identity.userId)/\(identity.deviceId)", session: session)) }
  }

  func detached(_ identity: Identity, session: String, ended: Bool) {
    state.withLock {
      $0.presence.append(.detached("\(identity.userId)/\(identity.deviceId)", session: session, ended: ended))
    }
  }
}

/// The hub's first cluster seam: effects for devices it has no session for go to `RemoteDevices`,
/// and it reports where devices attach. A single server's `NoRemoteDevices` changes nothing
/// (every other suite runs with it).
@Suite(.serialized) struct RemoteDevicesSeamTests {
  @Test func anInviteForAUserWithNoDeviceHereGoesToTheOtherNodes() async throws {
    let remote = RecordingRemoteDevices(elsewhere: ["bob": ["phone"]])
    let server = try await TestServer(remoteDevices: remote)
    let alice = try await server.connect("alice")
    let reply = try await alice.request(.invite(.init(callId: "seam-1", to: "bob", video: false)))
    #expect(reply.knownType == .ack)
    let invites = remote.deliveries.filter { $0.type == .invite }
    #expect(invites == [.init(type: .invite, userId: "bob", device: nil, skipping: [])])
    await server.stop()
  }

  @Test func devicesHereAreServedHereAndSkippedElsewhere() async throws {
    let remote = RecordingRemoteDevices(elsewhere: ["bob": ["laptop"]])
    let server = try await TestServer(remoteDevices: remote)
    let bob = try await server.connect("bob", device: "phone")
    let alice = try await server.connect("alice")
    _ = try await alice.request(.invite(.init(callId: "seam-2", to: "bob", video: false)))
    _ = try await bob.expect(.invite)
    let invites = remote.deliveries.filter { $0.type == .invite }
    #expect(invites == [.init(type: .invite, userId: "bob", device: nil, skipping: ["phone"])])
    await server.stop()
  }

  @Test func attachingDetachingAndEndingSessionsAreReported() async throws {
    let remote = RecordingRemoteDevices()
    let server = try await TestServer(remoteDevices: remote)
    let bob = try await server.connect("bob", device: "phone")
    let session = try #require(bob.sessionId)
    #expect(remote.presence == [.attached("bob/phone", session: session)])
    bob.close()
    let detached = await eventually { remote.presence.count == 2 }
    #expect(detached)
    #expect(remote.presence.last == .detached("bob/phone", session: session, ended: false))
    // The resume window passes: the session ends for good.
    let windowScheduled = await eventually { !server.clock.pendingDeadlines.isEmpty }
    #expect(windowScheduled)
    server.clock.advance(by: 61)
    let ended = await eventually { remote.presence.count == 3 }
    #expect(ended)
    #expect(remote.presence.last == .detached("bob/phone", session: session, ended: true))
    await server.stop()
  }
}
