import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// The relay's fast lane (`RequestPipeline`: plain candidates of a connected call skip the general
/// outcome) gives every client exactly the bytes the general path gives: the same script of
/// generated messages runs against a server with the lane and one without, and each client's
/// frames are compared byte for byte. The scripts mix relayed candidates both ways with
/// escapes and non-ASCII text, refusals (strangers, the other device of the callee, unknown and
/// invalid call ids, oversize fields, malformed frames), repeated request ids, legs that do not
/// exist, and a hangup half-way (after which the answering device's candidates still reach the
/// caller, and the caller's are refused).
@Suite(.serialized) struct RelayFastLaneTests {
  private static let candidateLines = [
    "candidate:1 1 udp 2122260223 192.168.1.20 54321 typ host",
    "candidate:2 1 tcp 1518280447 10.0.0.1 9 typ host tcptype active",
    "",
    "candidate:\"quoted\" \\ back\\slash / slash\ttab\nnewline\u{1}control",
    "candidate:3 1 udp 1 h\u{E9}llo \u{65E5}\u{672C} \u{1F389} \u{2028} end",
    String(repeating: "x", count: Limits.maxCandidateBytes),
    String(repeating: "y", count: Limits.maxCandidateBytes + 1),
  ]

  /// One client frame of the script, as text.
  /// A generated frame, and the request id its answer carries (nil: a frame without a usable id,
  /// answered, if at all, by an error without one).
  private static func frame(
    _ g: inout SeededGenerator, callIds: [String], ids: inout [String], n: Int
  ) -> (text: String, answeredID: String?) {
    var id: String? = "m\(n)"
    if !ids.isEmpty, g.chance(15) { id = g.pick(ids) }  // a retried request id
    if g.chance(3) { id = nil }
    if let id { ids.append(id) }
    if g.chance(3) {
      return (g.pick([#"{"type":"candidate","id":"\#(id ?? "z")","callId":"#, "not json", "[]"]), nil)
    }
    let callId = g.pick(callIds)
    if g.chance(4) {
      // Written by hand: escapes the codec would not write, keys out of order, an unknown field.
      let extra = g.chance(50) ? #","unknown":1"# : ""
      let line = #""candidate":"candidate:9 1 udp 1 \u00e9\/x \ud83c\udf89 typ host""#
      let text = #"{"callId":"\#(callId)","candidate":{"sdpMid":"0",\#(line)\#(extra)},"type":"candidate""#
      return (text + (id.map { #","id":"\#($0)""# } ?? "") + "}", id)
    }
    let toDevice: String? = g.chance(8) ? g.pick(["phone", "laptop", "nowhere"]) : nil
    let message: ClientMessage
    if g.chance(6) {
      message = .endOfCandidates(.init(callId: callId, toDevice: toDevice))
    } else {
      let candidate = IceCandidate(
        candidate: g.pick(candidateLines),
        sdpMid: g.pick([nil, "0", "audio\"\u{E9}", String(repeating: "m", count: Limits.maxCandidateFieldBytes + 1)]),
        sdpMLineIndex: g.pick([nil, 0, 1, Limits.maxSDPMLineIndex + 1]),
        usernameFragment: g.pick([nil, "uf", "\u{FC}f"]))
      message = .candidate(.init(callId: callId, candidate: candidate, toDevice: toDevice))
    }
    return (MessageCodec.encodeString(message, id: id), id)
  }

  /// Reads the probe's frames until the answer to `id` (everything sent to it before is read).
  private static func settle(_ probe: SignalingProbe, _ id: String) async throws {
    while try await probe.next("answer to \(id)").message.replyTo != id {}
  }

  /// Runs the script of `seed` on a server, with or without the fast lane: each client's frames.
  private func run(seed: UInt64, fastLane: Bool) async throws -> [String: [String]] {
    let server = try await TestServer {
      $0.relayFastLane = fastLane
      $0.limits.messagesPerSecond = 100_000
    }
    #expect(server.server.hub.takesRelayFastLane == fastLane)
    let frames = try await Self.script(seed: seed) { try await server.connect($0, device: $1) }
    await server.stop()
    return frames
  }

  /// The script of `seed` on whatever server `connect` opens sessions on (a user and device): Alice
  /// calls Bob, whose phone answers (his laptop hears the call end), Carol is a stranger; then
  /// generated frames, each settled by a ping. Each client's frames after the set-up.
  static func script(
    seed: UInt64, connect: (String, String) async throws -> SignalingProbe
  ) async throws -> [String: [String]] {
    let alice = try await connect("alice", "phone")
    let bob = try await connect("bob", "phone")
    let laptop = try await connect("bob", "laptop")
    let carol = try await connect("carol", "phone")
    let call = "c-fast-lane"
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    _ = try await laptop.expect(.invite)
    #expect(try await bob.act(.accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n")))).isAck)
    _ = try await alice.expect(.accept)
    _ = try await laptop.expect(.callEnded)
    let clients = ["alice": alice, "bob": bob, "laptop": laptop, "carol": carol]
    for probe in clients.values {
      probe.send(ClientEnvelope(id: "setup", message: .ping(.init())))
      try await Self.settle(probe, "setup")
      _ = probe.takeRawFrames()
    }

    var g = SeededGenerator(seed: seed)
    var ids: [String: [String]] = [:]
    let steps = 120
    for n in 0..<steps {
      if n == steps / 2 {
        alice.send(ClientEnvelope(id: "hangup", message: .hangup(.init(callId: call))))
        try await Self.settle(alice, "hangup")
      }
      let name = g.pick(["alice", "bob", "bob", "alice", "laptop", "carol"])
      let probe = try #require(clients[name])
      let (frame, answeredID) = Self.frame(
        &g, callIds: [call, call, call, "c-none", ""], ids: &ids[name, default: []], n: n)
      probe.sendRaw(frame)
      // The message's own answer, then a ping's: the message is handled before the next one is
      // sent, so the frames' order (and seqs) do not depend on which socket the server reads
      // first. The answer is awaited on its own because a cluster node answers a request about a
      // call it does not run when the call's node has (forwarded through Redis), and a ping sent
      // meanwhile is answered at once, before it: the two runs' orders differed under load.
      if let answeredID { try await Self.settle(probe, answeredID) }
      let ping = "p\(n)"
      probe.send(ClientEnvelope(id: ping, message: .ping(.init())))
      try await Self.settle(probe, ping)
    }
    var frames: [String: [String]] = [:]
    for (name, probe) in clients {
      probe.send(ClientEnvelope(id: "last", message: .ping(.init())))
      try await Self.settle(probe, "last")
      frames[name] = probe.takeRawFrames()
    }
    return frames
  }

  @Test(arguments: [1, 2, 3] as [UInt64])
  func theFastLaneWritesWhatTheGeneralPathWrites(seed: UInt64) async throws {
    Self.compare(fast: try await run(seed: seed, fastLane: true), general: try await run(seed: seed, fastLane: false))
  }

  /// Each client got the same frames, byte for byte, and candidates were relayed both ways.
  static func compare(fast: [String: [String]], general: [String: [String]]) {
    #expect(fast.keys.sorted() == general.keys.sorted())
    for (name, expected) in general {
      let got = fast[name] ?? []
      #expect(got.count == expected.count, "\(name): \(got.count) frames against \(expected.count)")
      for (index, (a, b)) in zip(got, expected).enumerated() where a != b {
        Issue.record("\(name), frame \(index): fast \(a) against general \(b)")
        break
      }
    }
    // The script did relay candidates (the lane was used), both ways.
    #expect(general["bob"]?.contains { $0.contains(#""type":"candidate""#) } == true)
    #expect(general["alice"]?.contains { $0.contains(#""type":"candidate""#) } == true)
  }
}
