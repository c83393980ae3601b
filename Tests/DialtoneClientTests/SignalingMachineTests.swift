import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

/// `SignalingMachine` driven directly, at virtual times: the link's phases, the session's
/// seq/ack/resume, re-sent requests, rate limits and the keepalive.
@Suite struct SignalingMachineTests {
  static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  static func configuration() -> SignalingClient.Configuration {
    var configuration = SignalingClient.Configuration(url: "ws://test.invalid/v1/ws")
    configuration.backoff = [.seconds(1), .seconds(4)]
    return configuration
  }

  static func welcome(resumed: Bool = false, session: String = "s1") -> String {
    MessageCodec.encodeString(
      .welcome(
        .init(
          replyTo: "x-hello", sessionId: session, userId: "alice", deviceId: "phone", resumed: resumed, resync: false,
          iceServers: [])),
      seq: nil)
  }

  static func frame(_ message: ServerMessage, seq: UInt64) -> String {
    MessageCodec.encodeString(message, seq: seq)
  }

  /// A started machine whose socket 1 was welcomed.
  static func welcomed() -> SignalingMachine {
    var m = SignalingMachine(configuration: configuration(), idPrefix: "x", now: t0)
    _ = m.handle(.start, now: t0)
    _ = m.handle(.tokenFetched("token"), now: t0)
    _ = m.handle(.received(socket: 1, welcome()), now: t0)
    return m
  }

  static func sent(_ effects: [SignalingMachine.Effect]) -> [String] {
    effects.compactMap {
      guard case .send(_, let text) = $0, let envelope = try? MessageCodec.decodeClientMessage(text) else { return nil }
      return envelope.message.type.rawValue
    }
  }

  @Test func itConnectsWithItsTokenAndIsWelcomed() {
    var m = SignalingMachine(configuration: Self.configuration(), idPrefix: "x", now: Self.t0)
    #expect(m.handle(.start, now: Self.t0) == [.fetchToken])
    let opened = m.handle(.tokenFetched("token"), now: Self.t0)
    guard case .open(1, let hello)? = opened.first else {
      Issue.record("no socket: \(opened)")
      return
    }
    #expect(hello.contains("\"type\":\"hello\"") && hello.contains("\"token\":\"token\""))
    #expect(
      opened.dropFirst() == [
        .arm(.welcome(socket: 1), after: .seconds(10)), .arm(.keepalive(socket: 1), after: .seconds(12.5)),
      ])
    // A request made before the welcome goes out with it.
    let (id, early) = m.submit(.ping(.init()), now: Self.t0) ?? ("", [])
    #expect(id == "x-1" && early.isEmpty)
    let welcomed = m.handle(.received(socket: 1, Self.welcome()), now: Self.t0)
    #expect(welcomed.prefix(1) == [.cancel(.welcome(socket: 1))])
    #expect(Self.sent(welcomed) == ["ping"])
    #expect(m.userId == "alice")
  }

  // Server messages are processed once, acked every few or after a moment; an answer goes to
  // its request.
  @Test func messagesAreAckedAndAnswersReachTheirRequest() {
    var m = Self.welcomed()
    let ringing = ServerMessage.ringing(.init(callId: "c", from: Peer(userId: "bob", deviceId: "b")))
    #expect(
      m.handle(.received(socket: 1, Self.frame(ringing, seq: 1)), now: Self.t0)
        == [.arm(.ack, after: .seconds(ProtocolDefaults.ackIntervalSeconds)), .deliver(.message(ringing))])
    // The same seq again is a replay: acknowledged, not processed.
    #expect(m.handle(.received(socket: 1, Self.frame(ringing, seq: 1)), now: Self.t0).isEmpty)
    #expect(Self.sent(m.handle(.timerFired(.ack), now: Self.t0)) == ["ack"])
    guard let (id, _) = m.submit(.hangup(.init(callId: "c")), now: Self.t0) else { return }
    let ack = ServerMessage.ack(.init(replyTo: id, callId: "c"))
    let answered = m.handle(.received(socket: 1, Self.frame(ack, seq: 2)), now: Self.t0)
    #expect(answered.suffix(2) == [.reply(id: id, ack), .drained])
    #expect(!m.hasPending)
  }

  // A relayed candidate's ack comes without a seq: it answers its request, and is neither
  // counted towards the client's own ack nor taken for the last seq (resumed from, replayed).
  @Test func anAckWithoutASeqAnswersItsRequestAndCountsForNoAck() {
    var m = Self.welcomed()
    let candidate = IceCandidate(candidate: "candidate:1 1 udp 1 127.0.0.1 9 typ host")
    guard let (id, _) = m.submit(.candidate(.init(callId: "c", candidate: candidate)), now: Self.t0) else { return }
    let ack = ServerMessage.ack(.init(replyTo: id, callId: "c"))
    let answered = m.handle(.received(socket: 1, MessageCodec.encodeString(ack, seq: nil)), now: Self.t0)
    #expect(answered.contains(.reply(id: id, ack)))
    #expect(!answered.contains { if case .arm(.ack, _) = $0 { true } else { false } })
    #expect(!m.hasPending)
    // The next numbered message is seq 1, processed (not a replay) and acked.
    let ringing = ServerMessage.ringing(.init(callId: "c", from: Peer(userId: "bob", deviceId: "b")))
    #expect(
      m.handle(.received(socket: 1, Self.frame(ringing, seq: 1)), now: Self.t0)
        == [.arm(.ack, after: .seconds(ProtocolDefaults.ackIntervalSeconds)), .deliver(.message(ringing))])
    // A resume asks from seq 1.
    _ = m.handle(.closed(socket: 1, code: nil, jitter: 1), now: Self.t0)
    guard case .open(2, let hello)? = m.handle(.tokenFetched("token"), now: Self.t0).first else {
      Issue.record("no socket")
      return
    }
    #expect(hello.contains("\"lastSeq\":1"))
  }

  // A request refused as rate-limited goes again after the server's wait, with its id.
  @Test func aRateLimitedRequestGoesAgain() {
    var m = Self.welcomed()
    guard let (id, _) = m.submit(.hangup(.init(callId: "c")), now: Self.t0) else { return }
    let limited = ServerMessage.error(.init(replyTo: id, code: .rateLimited, message: "slow", retryAfterMs: 300))
    #expect(
      m.handle(.received(socket: 1, Self.frame(limited, seq: 1)), now: Self.t0).contains(
        .arm(.retry(id: id), after: .milliseconds(300))))
    let again = m.handle(.timerFired(.retry(id: id)), now: Self.t0)
    guard case .send(1, let text)? = again.first else {
      Issue.record("not sent again")
      return
    }
    #expect((try? MessageCodec.decodeClientMessage(text))?.id == id)
  }

  // A dropped welcomed socket reconnects at once and resumes; a socket that never got a welcome
  // waits its jittered backoff; the session resumes, and requests never answered go again.
  @Test func reconnectsResumeAndResend() {
    var m = Self.welcomed()
    _ = m.handle(
      .received(socket: 1, Self.frame(.ringing(.init(callId: "c", from: Peer(userId: "b", deviceId: "b"))), seq: 7)),
      now: Self.t0)
    guard let (id, _) = m.submit(.hangup(.init(callId: "c")), now: Self.t0) else { return }
    let dropped = m.handle(.closed(socket: 1, code: nil, jitter: 1), now: Self.t0)
    #expect(dropped.contains(.deliver(.disconnected)) && dropped.last == .fetchToken)
    let opened = m.handle(.tokenFetched("token"), now: Self.t0)
    guard case .open(2, let hello)? = opened.first else { return }
    #expect(hello.contains("\"lastSeq\":7") && hello.contains("\"sessionId\":\"s1\""))
    // This socket fails before its welcome: a backoff, scaled by the jitter.
    #expect(
      m.handle(.closed(socket: 2, code: nil, jitter: 0.5), now: Self.t0).last == .arm(.reconnect, after: .seconds(2)))
    #expect(m.handle(.timerFired(.reconnect), now: Self.t0) == [.fetchToken])
    _ = m.handle(.tokenFetched("token"), now: Self.t0)
    let resumed = m.handle(.received(socket: 3, Self.welcome(resumed: true)), now: Self.t0)
    // The hangup never answered goes again, with its id (the server applies it once).
    #expect(Self.sent(resumed) == ["hangup"])
    #expect(resumed.contains(.send(socket: 3, MessageCodec.encodeString(.hangup(.init(callId: "c")), id: id))))
    #expect(!resumed.contains(.deliver(.resynced)))
    // A new session where one was asked for: the app re-fetches its calls.
    _ = m.handle(.closed(socket: 3, code: nil, jitter: 1), now: Self.t0)
    _ = m.handle(.tokenFetched("token"), now: Self.t0)
    #expect(m.handle(.received(socket: 4, Self.welcome(session: "s2")), now: Self.t0).contains(.deliver(.resynced)))
  }

  // A close the server means (token refused, replaced) stops for good; events of an old socket
  // change nothing.
  @Test func aFinalCloseStopsAndFailsWhatIsPending() {
    var m = Self.welcomed()
    _ = m.submit(.hangup(.init(callId: "c")), now: Self.t0)
    let stopped = m.handle(.closed(socket: 1, code: CloseCode.unauthorized.rawValue, jitter: 1), now: Self.t0)
    #expect(stopped.suffix(2) == [.deliver(.stopped(reason: "closed by the server with 4401")), .failAll])
    #expect(!m.isRunning && m.submit(.ping(.init()), now: Self.t0) == nil)
    #expect(m.handle(.received(socket: 1, Self.welcome()), now: Self.t0).isEmpty)
    #expect(m.handle(.tokenFetched("late"), now: Self.t0).isEmpty)
  }

  // Half a heartbeat of silence: a ping; unanswered, the socket is closed.
  @Test func anIdleSocketIsPingedAndADeadOneClosed() {
    var m = Self.welcomed()
    #expect(
      m.handle(.timerFired(.keepalive(socket: 1)), now: Self.t0) == [.arm(.keepalive(socket: 1), after: .seconds(12.5))]
    )
    let later = Self.t0.addingTimeInterval(12.5)
    let pinged = m.handle(.timerFired(.keepalive(socket: 1)), now: later)
    #expect(Self.sent(pinged) == ["ping"] && pinged.last == .arm(.ping(socket: 1), after: .seconds(10)))
    #expect(
      m.handle(.timerFired(.ping(socket: 1)), now: later) == [.close(socket: 1, code: CloseCode.goingAway.rawValue)])
    // A network change closes the socket at once (its close starts the next attempt).
    var n = Self.welcomed()
    #expect(n.handle(.networkChanged, now: Self.t0) == [.close(socket: 1, code: CloseCode.goingAway.rawValue)])
  }

  // Stopping once the last requests are answered (the hangup of an app about to quit): a
  // welcomed socket that answers none of them for `drainStall` is given up at once for a fresh
  // one, which resumes and re-sends them; each answer gives the socket a fresh window; the watch
  // ends once everything is answered, or with the stop.
  @Test func whileDrainingASocketThatAnswersNothingIsReplaced() {
    var m = Self.welcomed()
    guard let (ping, _) = m.submit(.ping(.init()), now: Self.t0),
      let (hangup, _) = m.submit(.hangup(.init(callId: "c")), now: Self.t0)
    else { return }
    let stall = SignalingMachine.Effect.arm(.drainStall(socket: 1), after: .seconds(1))
    #expect(m.handle(.drain, now: Self.t0) == [stall])
    #expect(m.handle(.drain, now: Self.t0).isEmpty)
    let pong = ServerMessage.ack(.init(replyTo: ping))
    #expect(
      m.handle(.received(socket: 1, Self.frame(pong, seq: 1)), now: Self.t0).suffix(2) == [
        .reply(id: ping, pong), stall,
      ])
    // Nothing more comes: the socket is given up without waiting for its close.
    #expect(
      m.handle(.timerFired(.drainStall(socket: 1)), now: Self.t0) == [
        .cancel(.keepalive(socket: 1)), .close(socket: 1, code: CloseCode.goingAway.rawValue), .deliver(.disconnected),
        .fetchToken,
      ])
    #expect(m.handle(.closed(socket: 1, code: nil, jitter: 1), now: Self.t0).isEmpty)
    _ = m.handle(.tokenFetched("token"), now: Self.t0)
    let resumed = m.handle(.received(socket: 2, Self.welcome(resumed: true)), now: Self.t0)
    #expect(resumed.contains(.send(socket: 2, MessageCodec.encodeString(.hangup(.init(callId: "c")), id: hangup))))
    #expect(resumed.last == .arm(.drainStall(socket: 2), after: .seconds(1)))
    let ack = ServerMessage.ack(.init(replyTo: hangup, callId: "c"))
    #expect(
      m.handle(.received(socket: 2, Self.frame(ack, seq: 2)), now: Self.t0).suffix(3) == [
        .reply(id: hangup, ack), .cancel(.drainStall(socket: 2)), .drained,
      ])

    // A stop meanwhile ends the watch.
    var n = Self.welcomed()
    _ = n.submit(.hangup(.init(callId: "c")), now: Self.t0)
    _ = n.handle(.drain, now: Self.t0)
    #expect(n.handle(.stop, now: Self.t0).contains(.cancel(.drainStall(socket: 1))))
  }

  // Outside a drain nothing is watched: a silent socket is the keepalive's business.
  @Test func withoutADrainNoSocketIsReplacedForSilence() {
    var m = Self.welcomed()
    _ = m.submit(.hangup(.init(callId: "c")), now: Self.t0)
    #expect(m.handle(.timerFired(.drainStall(socket: 1)), now: Self.t0).isEmpty)
  }
}
