import DialtoneCalls
import DialtoneCluster
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneStorage

/// A cluster's placement as a table: calls listed run on the named node, the rest here.
final class RecordingPlacement: CallPlacement {
  struct Forward: Sendable, Equatable {
    let type: ClientMessageType
    let id: String
    let from: String
    let session: String
    let node: String
  }

  struct Reply: Sendable, Equatable {
    let type: ServerMessageType?
    let replyTo: String?
    let origin: ForwardedRequest.Origin
    /// Sent back without a seq (`replyUnstored`).
    var unstored = false
  }

  private let state = Locked<(forwards: [Forward], replies: [Reply])>(([], []))
  let owners: [CallID: String]
  /// Calls this node is taking over, until the hub says they run here.
  let takingOver: Locked<Set<CallID>>

  /// Whether relayed candidates' acks go back unstored (a write-behind cluster's placement).
  let repliesUnstored: Bool

  init(owners: [CallID: String] = [:], takingOver: Set<CallID> = [], repliesUnstored: Bool = false) {
    self.owners = owners
    self.repliesUnstored = repliesUnstored
    self.takingOver = Locked(takingOver)
  }

  var forwards: [Forward] { state.withLock { $0.forwards } }
  var replies: [Reply] { state.withLock { $0.replies } }

  func location(of callId: CallID) -> CallLocation { owners[callId].map { .node($0) } ?? .here }

  var thisNode: String { "here" }

  func running(_ callId: CallID, users: [String]) {}
  func answered(_ callId: CallID) {}
  func finished(_ callId: CallID) {}
  func isBeingTakenOver(_ callId: CallID) -> Bool { takingOver.current.contains(callId) }
  func takenOver(_ callIds: Set<CallID>) { takingOver.withLock { $0.subtract(callIds) } }

  func forward(_ message: ClientMessage, id: String, from: Identity, session: String, to node: String?) {
    let forward = Forward(
      type: message.type, id: id, from: "\(from.userId)/\(from.deviceId)", session: session, node: node ?? "?")
    state.withLock { $0.forwards.append(forward) }
  }

  func reply(_ reply: ServerMessage, to request: ForwardedRequest) {
    let recorded = Reply(type: reply.knownType, replyTo: reply.replyTo, origin: request.origin)
    state.withLock { $0.replies.append(recorded) }
  }

  func replyUnstored(_ reply: ServerMessage, to request: ForwardedRequest) {
    let recorded = Reply(type: reply.knownType, replyTo: reply.replyTo, origin: request.origin, unstored: true)
    state.withLock { $0.replies.append(recorded) }
  }
}

/// The hub's second cluster seam: a request about a call another node runs is forwarded there
/// and answered from there, once; a request forwarded here runs here and is answered back.
/// A single server's `LocalCalls` runs everything here (every other suite).
@Suite(.serialized) struct CallPlacementSeamTests {
  /// Sends a ping and reads up to its answer: whatever else was queued comes first.
  private func messagesUntilPing(_ probe: SignalingProbe) async throws -> [ServerMessage] {
    let id = "ping-\(UUID().uuidString)"
    probe.send(ClientEnvelope(id: id, message: .ping(.init())))
    var seen: [ServerMessage] = []
    for _ in 0..<20 {
      let message = try await probe.next("ping").message
      if message.replyTo == id { return seen }
      seen.append(message)
    }
    throw ProbeFailure(description: "no answer to the ping in 20 messages")
  }

  @Test func aRequestAboutACallElsewhereIsForwardedOnceAndAnsweredFromThere() async throws {
    let placement = RecordingPlacement(owners: ["far-1": "n2"])
    let server = try await TestServer(placement: placement)
    let alice = try await server.connect("alice")
    let session = try #require(alice.sessionId)
    let hangup = ClientEnvelope(id: "h1", message: .hangup(.init(callId: "far-1")))
    alice.send(hangup)
    alice.send(hangup)  // a retry before the answer came: not forwarded again
    #expect(try await messagesUntilPing(alice).isEmpty, "nothing answers here")
    #expect(placement.forwards == [.init(type: .hangup, id: "h1", from: "alice/phone", session: session, node: "n2")])

    server.server.hub.deliver(.replyArrived(sessionID: session, requestID: "h1", reply: .ack(.init(replyTo: "h1"))))
    #expect(try await alice.next("ack").message.replyTo == "h1")
    // Remembered like a reply of this node: a later retry gets it again, still one forward.
    alice.send(hangup)
    #expect(try await alice.next("ack again").message.replyTo == "h1")
    #expect(placement.forwards.count == 1)
    // Calls nobody else runs are still handled here.
    #expect(try await alice.request(.hangup(.init(callId: "near-1"))).knownType == .error)
    await server.stop()
  }

  @Test func aRequestAboutACallBeingTakenOverWaitsUntilItRunsHere() async throws {
    let placement = RecordingPlacement(takingOver: ["taken-1"])
    let server = try await TestServer(placement: placement)
    let origin = ForwardedRequest.Origin(node: "n2", sessionID: "s_alice")
    let alice = Identity(userId: "alice", deviceId: "phone", name: nil)
    let hangup = ForwardedRequest(message: .hangup(.init(callId: "taken-1")), id: "h1", from: alice, origin: origin)
    server.server.hub.deliver(.forwarded(hangup))
    // Another request on the hub's queue, answered: the hangup before it is still waiting.
    server.server.hub.deliver(
      .forwarded(ForwardedRequest(message: .ping(.init()), id: "p1", from: alice, origin: origin)))
    let pinged = await eventually { placement.replies.contains { $0.replyTo == "p1" } }
    #expect(pinged)
    #expect(!placement.replies.contains { $0.replyTo == "h1" })
    // The take-over ends (here the journal had no such call): the hangup is handled then.
    server.server.hub.deliver(
      .cluster(.adopt([], groups: [], ended: [], connected: [], then: nil, attempted: ["taken-1"])))
    let answered = await eventually { placement.replies.contains { $0.replyTo == "h1" } }
    #expect(answered)
    #expect(placement.replies.last == .init(type: .error, replyTo: "h1", origin: origin))
    #expect(!placement.isBeingTakenOver("taken-1"))
    await server.stop()
  }

  @Test func aRequestForwardedHereRunsHereAndItsAnswerGoesBack() async throws {
    let placement = RecordingPlacement()
    let server = try await TestServer(placement: placement)
    let bob = try await server.connect("bob")
    let origin = ForwardedRequest.Origin(node: "n2", sessionID: "s_alice")
    let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
    server.server.hub.deliver(
      .forwarded(
        ForwardedRequest(
          message: .invite(.init(callId: "near-2", to: "bob", video: false)), id: "i1", from: alice, origin: origin)))
    let invite = try await bob.expect(.invite)
    #expect(invite.callId == "near-2")
    let answered = await eventually { !placement.replies.isEmpty }
    #expect(answered)
    #expect(placement.replies == [.init(type: .ack, replyTo: "i1", origin: origin)])
    // The call runs here: bob's decline is routed here, and its effect goes to alice's node.
    #expect(try await bob.request(.decline(.init(callId: "near-2"))).knownType == .ack)

    // Alice's quality report, forwarded too: checked against the call here, stored here, and
    // answered back (a report for a call she was not in is refused the same way).
    let report = QualityReport(callId: "near-2", final: true, rttMs: 20)
    server.server.hub.deliver(
      .forwarded(ForwardedRequest(message: .quality(report), id: "q1", from: alice, origin: origin)))
    server.server.hub.deliver(
      .forwarded(
        ForwardedRequest(
          message: .quality(QualityReport(callId: "near-2", final: true)), id: "q2",
          from: Identity(userId: "carol", deviceId: "phone", name: nil), origin: origin)))
    let reported = await eventually { placement.replies.count == 3 }
    #expect(reported)
    #expect(placement.replies.contains(.init(type: .ack, replyTo: "q1", origin: origin)))
    #expect(placement.replies.contains(.init(type: .error, replyTo: "q2", origin: origin)))
    let stored = try await SQLiteStore.open(dataDirectory: server.dataDirectory).qualityReports(of: "near-2")
    #expect(stored.map(\.userId) == ["alice"])
    await server.stop()
  }

  /// Alice, on another node ("n2"), invites Bob here: her requests come forwarded (`forward`).
  private struct ForwardedInvite {
    let server: TestServer
    let bob: SignalingProbe
    let origin = ForwardedRequest.Origin(node: "n2", sessionID: "s_alice")

    init(_ placement: RecordingPlacement, call: CallID) async throws {
      server = try await TestServer(placement: placement)
      bob = try await server.connect("bob")
      forward(.invite(.init(callId: call, to: "bob", video: false)), id: "i1")
      _ = try await bob.expect(.invite)
    }

    func forward(_ message: ClientMessage, id: String) {
      let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
      server.server.hub.deliver(.forwarded(ForwardedRequest(message: message, id: id, from: alice, origin: origin)))
    }
  }

  @Test func aForwardedRequestSentAgainIsAnsweredAgainButHandledOnce() async throws {
    let placement = RecordingPlacement()
    let rig = try await ForwardedInvite(placement, call: "near-3")
    let (server, bob) = (rig.server, rig.bob)
    // Alice's node got no answer in time (or she resumed elsewhere) and sends the candidate twice.
    let trickle = ClientMessage.candidate(.init(callId: "near-3", candidate: candidate(1)))
    rig.forward(trickle, id: "c1")
    rig.forward(trickle, id: "c1")
    let answered = await eventually { placement.replies.count == 3 }
    #expect(answered)
    #expect(placement.replies.map(\.replyTo) == ["i1", "c1", "c1"])
    _ = try await bob.expect(.candidate)
    try await bob.expectQuiet()
    await server.stop()
  }

  /// A relayed candidate another node forwarded here: where the placement sends its ack back
  /// without a seq (a write-behind cluster's), it goes that way, the invite's as before; and it is
  /// not remembered: sent again, the candidate is handled afresh (in a cluster its copy's once-key
  /// keeps it from being stored twice) and acked again the same way.
  @Test func aForwardedCandidatesAckGoesBackUnstoredWhereThePlacementCanAndIsNotRemembered() async throws {
    let placement = RecordingPlacement(repliesUnstored: true)
    let rig = try await ForwardedInvite(placement, call: "near-4")
    let (server, bob, origin) = (rig.server, rig.bob, rig.origin)
    let trickle = ClientMessage.candidate(.init(callId: "near-4", candidate: candidate(1)))
    rig.forward(trickle, id: "c1")
    let answered = await eventually { placement.replies.count == 2 }
    #expect(answered)
    #expect(
      placement.replies == [
        .init(type: .ack, replyTo: "i1", origin: origin),
        .init(type: .ack, replyTo: "c1", origin: origin, unstored: true),
      ])
    _ = try await bob.expect(.candidate)
    rig.forward(trickle, id: "c1")
    let again = await eventually { placement.replies.count == 3 }
    #expect(again)
    #expect(placement.replies.last == .init(type: .ack, replyTo: "c1", origin: origin, unstored: true))
    _ = try await bob.expect(.candidate)
    await server.stop()
  }
}
