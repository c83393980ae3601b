import DialtoneCalls
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer

/// What another node of a cluster would be told: the seam's calls, recorded.
final class RecordingRemoteDevices: RemoteDevices {
  enum Presence: Sendable, Equatable {
    case detached(String, session: String, ended: Bool)
  }

  private let state = Locked<[Presence]>([])
  /// user → devices the fake reports connected on other nodes.
  let elsewhere: [String: Set<String>]

  init(elsewhere: [String: Set<String>] = [:]) { self.elsewhere = elsewhere }

  var presence: [Presence] { state.current }

  func dispatch(_ event: CallEvent, connectedHere: Set<String>, to sink: any CallEffectSink) {
    sink.handle(event, connectedDevices: connectedHere.union(elsewhere[event.userId] ?? []))
  }

  func detached(_ identity: Identity, session: String, ended: Bool) {
    state.withLock { $0.append(.detached("\(identity.userId)/\(identity.deviceId)", session: session, ended: ended)) }
  }
}

/// The hub's first cluster seam: it reports sockets closing and sessions ending to the other
/// nodes. A single server's `NoRemoteDevices` changes nothing (every other suite runs with it).
@Suite(.serialized) struct RemoteDevicesSeamTests {
  @Test func detachingAndEndingSessionsAreReported() async throws {
    let remote = RecordingRemoteDevices()
    let server = try await TestServer(remoteDevices: remote)
    let bob = try await server.connect("bob", device: "phone")
    let session = try #require(bob.sessionId)
    #expect(remote.presence.isEmpty)
    bob.close()
    let detached = await eventually { remote.presence.count == 1 }
    #expect(detached)
    #expect(remote.presence.last == .detached("bob/phone", session: session, ended: false))
    // The resume window passes: the session ends for good. Its own timer (60 s) must be armed
    // before time moves: any timer would not do, the socket's hello deadline (5 s) is pending
    // from the open, and the hub reports the detach before it arms the window.
    let windowScheduled = await server.clock.waitForTimer(dueIn: 60)
    try #require(windowScheduled)
    server.clock.advance(by: 61)
    let ended = await eventually { remote.presence.count == 2 }
    #expect(ended)
    #expect(remote.presence.last == .detached("bob/phone", session: session, ended: true))
    await server.stop()
  }
}
