import DialtoneProtocol
import Foundation
import Testing

enum Fixtures {
  static let callId = "6b8f2a3e-1c4d-4e8a-9f00-3d2b1a0c9e7f"
  static let sdp = "v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\n"
  static let candidateLine = "candidate:842163049 1 udp 1677729535 203.0.113.7 61234 typ srflx raddr 0.0.0.0 rport 0"
  static let alice = Peer(userId: "alice", deviceId: "phone", name: "Alice")
  static let bob = Peer(userId: "bob", deviceId: "laptop")
  static let candidate = IceCandidate(candidate: candidateLine, sdpMid: "0", sdpMLineIndex: 0, usernameFragment: "EsZ3")
  static let turn = IceServer(
    urls: ["turn:turn.example.com:3478?transport=udp", "turns:turn.example.com:443?transport=tcp"],
    username: "1732923200:alice", credential: "n0tAReal/Credential=")
  static let stun = IceServer(urls: ["stun:stun.example.com:3478"])

  static let callState = CallState(
    callId: callId, callerId: "alice", calleeId: "bob", callerDeviceId: "phone", calleeDeviceId: "laptop",
    video: true, state: .ended, createdAt: 1_732_880_000_000, answeredAt: 1_732_880_004_000,
    endedAt: 1_732_880_064_000, endReason: .hangup)

  /// One of every client message, with optional fields both present and absent.
  static let clientMessages: [ClientEnvelope] = [
    ClientEnvelope(id: "h1", message: .hello(.init(token: "eyJhbGciOiJIUzI1NiJ9.e30.sig"))),
    ClientEnvelope(
      id: "h2",
      message: .hello(
        .init(
          version: 1, token: nil, resume: .init(sessionId: "s_4f9c", lastSeq: 17),
          client: .init(name: "dialtone-ios", version: "1.0")))),
    ClientEnvelope(id: "h3", message: .hello(.init(version: 7, client: .init()))),
    ClientEnvelope(id: "h4", message: .hello(.init(token: "eyJ.e30.sig", features: ["preconnect", "something-new"]))),
    ClientEnvelope(id: nil, message: .ack(.init(seq: 0))),
    ClientEnvelope(id: nil, message: .ack(.init(seq: 9_007_199_254_740_991))),
    ClientEnvelope(id: "p1", message: .ping(.init())),
    ClientEnvelope(id: "m1", message: .invite(.init(callId: callId, to: "bob", video: false))),
    ClientEnvelope(
      id: "m2",
      message: .invite(.init(callId: callId, to: "bob", video: true, offer: .init(sdp: sdp), callerName: "Alice ☎️"))),
    ClientEnvelope(id: "m3", message: .ringing(.init(callId: callId))),
    ClientEnvelope(id: "m3p", message: .ringing(.init(callId: callId, preconnect: true))),
    ClientEnvelope(
      id: "m2p",
      message: .invite(.init(callId: callId, to: "bob", video: false, offer: .init(sdp: sdp), preconnect: true))),
    ClientEnvelope(id: "m10p", message: .offer(.init(callId: callId, sdp: sdp, toDevice: "laptop"))),
    ClientEnvelope(id: "m13p", message: .candidate(.init(callId: callId, candidate: candidate, toDevice: "laptop"))),
    ClientEnvelope(id: "m15p", message: .endOfCandidates(.init(callId: callId, toDevice: "laptop"))),
    ClientEnvelope(id: "m4", message: .accept(.init(callId: callId))),
    ClientEnvelope(id: "m5", message: .accept(.init(callId: callId, answer: .init(sdp: sdp)))),
    ClientEnvelope(id: "m6", message: .decline(.init(callId: callId))),
    ClientEnvelope(id: "m7", message: .busy(.init(callId: callId))),
    ClientEnvelope(id: "m8", message: .cancel(.init(callId: callId))),
    ClientEnvelope(id: "m9", message: .hangup(.init(callId: callId))),
    ClientEnvelope(id: "m10", message: .offer(.init(callId: callId, sdp: sdp))),
    ClientEnvelope(id: "m11", message: .offer(.init(callId: callId, sdp: sdp, iceRestart: true))),
    ClientEnvelope(id: "m12", message: .answer(.init(callId: callId, sdp: sdp))),
    ClientEnvelope(id: "m13", message: .candidate(.init(callId: callId, candidate: candidate))),
    ClientEnvelope(id: "m14", message: .candidate(.init(callId: callId, candidate: IceCandidate(candidate: "")))),
    ClientEnvelope(id: "m15", message: .endOfCandidates(.init(callId: callId))),
    ClientEnvelope(id: "m16", message: .iceRestartRequest(.init(callId: callId))),
    ClientEnvelope(id: "m17", message: .getCall(.init(callId: callId))),
    ClientEnvelope(
      id: "g1", message: .groupCreate(.init(callId: callId, members: ["bob", "carol"], video: true, title: "Standup"))),
    ClientEnvelope(id: "g2", message: .groupCreate(.init(callId: callId, members: ["bob"]))),
    ClientEnvelope(id: "g3", message: .groupRinging(.init(callId: callId))),
    ClientEnvelope(id: "g4", message: .groupDecline(.init(callId: callId))),
    ClientEnvelope(id: "g5", message: .groupJoin(.init(callId: callId))),
    ClientEnvelope(id: "g6", message: .groupLeave(.init(callId: callId))),
    ClientEnvelope(id: "g7", message: .groupEnd(.init(callId: callId))),
    ClientEnvelope(id: "g8", message: .roomJoin(.init(room: "book-club", callId: callId, video: false))),
    ClientEnvelope(id: "g9", message: .roomJoin(.init(room: "book-club"))),
    ClientEnvelope(id: "g10", message: .groupOffer(.init(callId: callId, stream: "publisher", sdp: "v=0\r\n"))),
    ClientEnvelope(id: "g11", message: .groupAnswer(.init(callId: callId, stream: "feed-7", sdp: "v=0\r\n"))),
    ClientEnvelope(
      id: "g12",
      message: .groupCandidate(
        .init(
          callId: callId, stream: "publisher",
          candidate: IceCandidate(candidate: "candidate:1 1 udp 2122260223 10.0.0.2 50000 typ host", sdpMid: "0")))),
    ClientEnvelope(id: "g13", message: .groupEndOfCandidates(.init(callId: callId, stream: "feed-7"))),
    ClientEnvelope(id: "g14", message: .getGroup(.init(callId: callId))),
    ClientEnvelope(id: "g15", message: .groupInvite(.init(callId: callId, members: ["dave", "erin"]))),
    ClientEnvelope(id: "g16", message: .groupRemove(.init(callId: callId, userId: "carol"))),
    ClientEnvelope(
      id: "g17", message: .groupOffer(.init(callId: callId, stream: "publisher", sdp: "v=0\r\n", restart: .connection))),
    ClientEnvelope(
      id: "g18", message: .groupRestart(.init(callId: callId, stream: "feed-4711", restart: .connection))),
    ClientEnvelope(id: "g19", message: .groupRestart(.init(callId: callId, stream: "subscriber", restart: .ice))),
    ClientEnvelope(id: "v1", message: .mediaState(.init(callId: callId, camera: false))),
    ClientEnvelope(id: "h5", message: .hold(.init(callId: callId, onHold: true))),
    ClientEnvelope(id: "h6", message: .hold(.init(callId: callId, onHold: false))),
    ClientEnvelope(
      id: "q1",
      message: .quality(
        .init(
          callId: callId, final: true,
          milestones: .init(ringing: 310, accepted: 2150, iceConnected: 2390, dtlsConnected: 2420, firstAudio: 2480),
          rttMs: 24.5, jitterMs: 3.2, lossPercent: 0.4, sendKbps: 38.2, receiveKbps: 37.9, localCandidateType: .host,
          remoteCandidateType: .srflx, iceRestarts: 0, durationMs: 61000))),
    ClientEnvelope(id: "q2", message: .quality(.init(callId: callId, final: false))),
  ]

  /// One of every server message.
  static let group = GroupCallState(
    callId: callId, creatorId: "alice", title: "Standup", video: false, state: .active, createdAt: 1_732_880_000_000,
    members: [
      GroupMember(userId: "alice", state: .joined, deviceId: "phone", name: "Alice", joinedAt: 1_732_880_000_000),
      GroupMember(userId: "bob", state: .ringing),
      GroupMember(
        userId: "carol", state: .left, deviceId: "web", joinedAt: 1_732_880_001_000, leftAt: 1_732_880_009_000),
    ])

  static let serverMessages: [ServerMessage] = [
    .welcome(
      .init(
        replyTo: "h1", sessionId: "s_4f9c", userId: "alice", deviceId: "phone", resumed: false, resync: false,
        iceServers: [stun, turn])),
    .welcome(
      .init(
        replyTo: "h2", version: 1, sessionId: "s_4f9c", userId: "alice", deviceId: "phone", resumed: true,
        resync: false, heartbeatSeconds: 10, maxMessageBytes: 65536, iceServers: [], iceServersTtl: 600)),
    .welcome(
      {
        var welcome = ServerMessage.Welcome(
          replyTo: "h4", sessionId: "s_4f9d", userId: "bob", deviceId: "laptop", resumed: false, resync: false,
          iceServers: [])
        welcome.features = ["preconnect"]
        return welcome
      }()),
    .ack(.init(replyTo: "p1")),
    .ack(.init(replyTo: "m1", callId: callId)),
    .ack(.init(replyTo: "m17", callId: callId, call: callState)),
    .error(.init(code: .badRequest, message: "malformed JSON")),
    .error(.init(replyTo: "m4", code: .invalidState, message: "call is not ringing", callId: callId)),
    .invite(.init(callId: callId, from: alice, video: false, createdAt: 1_732_880_000_000)),
    .invite(.init(callId: callId, from: alice, video: true, offer: .init(sdp: sdp), createdAt: 1_732_880_000_000)),
    .ringing(.init(callId: callId, from: bob)),
    .ringing(.init(callId: callId, from: bob, preconnect: true)),
    .invite(
      .init(
        callId: callId, from: alice, video: false, offer: .init(sdp: sdp), createdAt: 1_732_880_000_000,
        preconnect: true)),
    .accept(.init(callId: callId, from: bob, preconnected: true)),
    .offer(.init(callId: callId, from: alice, sdp: sdp, leg: true)),
    .candidate(.init(callId: callId, from: alice, candidate: candidate, leg: true)),
    .endOfCandidates(.init(callId: callId, from: alice, leg: true)),
    .accept(.init(callId: callId, from: bob)),
    .accept(.init(callId: callId, from: bob, answer: .init(sdp: sdp))),
    .offer(.init(callId: callId, from: alice, sdp: sdp)),
    .offer(.init(callId: callId, from: alice, sdp: sdp, iceRestart: true)),
    .answer(.init(callId: callId, from: bob, sdp: sdp)),
    .candidate(.init(callId: callId, from: alice, candidate: candidate)),
    .endOfCandidates(.init(callId: callId, from: alice)),
    .iceRestartRequest(.init(callId: callId, from: bob)),
    .callEnded(.init(callId: callId, reason: .hangup, from: bob)),
    .callEnded(.init(callId: callId, reason: .missed)),
    .callEnded(.init(callId: callId, reason: .glare, replacedBy: "0a1b2c3d-0000-4000-8000-000000000000")),
    .groupInvite(
      .init(
        callId: callId, from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), video: false, title: "Standup",
        memberCount: 3, createdAt: 1_732_880_000_000, group: group)),
    .groupUpdate(.init(callId: callId, group: group)),
    .groupMedia(.init(callId: callId, sfu: .janus)),
    .groupMedia(.init(callId: callId, sfu: .livekit, url: "wss://lk.example.com", token: "eyJ.e30.sig")),
    .groupOffer(
      .init(callId: callId, stream: "feed-7", sdp: "v=0\r\n", from: Peer(userId: "bob", deviceId: "laptop"))),
    .groupOffer(
      .init(
        callId: callId, stream: "feed-7", sdp: "v=0\r\n", from: Peer(userId: "bob", deviceId: "laptop"),
        restart: .connection)),
    .groupAnswer(.init(callId: callId, stream: "publisher", sdp: "v=0\r\n")),
    .groupCandidate(
      .init(
        callId: callId, stream: "feed-7",
        candidate: IceCandidate(candidate: "candidate:1 1 udp 2122260223 10.0.0.9 20000 typ host", sdpMLineIndex: 0))),
    .groupStreamEnded(.init(callId: callId, stream: "feed-7")),
    .groupEnded(.init(callId: callId, reason: .joinedElsewhere, from: Peer(userId: "bob", deviceId: "laptop"))),
    .groupEnded(.init(callId: callId, reason: .mediaFailed)),
    .groupEnded(.init(callId: callId, reason: .removed, from: Peer(userId: "alice", deviceId: "phone"))),
    .ack(.init(replyTo: "g14", callId: callId, group: group)),
    .mediaState(.init(callId: callId, from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), camera: true)),
    .hold(.init(callId: callId, from: Peer(userId: "bob", deviceId: "laptop"), onHold: true)),
    .hold(.init(callId: callId, from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), onHold: false)),
  ]
}

/// Decodes a client frame and returns the error it throws (or records an issue).
func clientError(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> ProtocolError? {
  do {
    let message = try MessageCodec.decodeClientMessage(text)
    Issue.record("expected an error, decoded \(message)", sourceLocation: sourceLocation)
    return nil
  } catch {
    return error
  }
}

/// Decodes a server frame and returns the error it throws (or records an issue).
func serverError(
  _ text: String, options: WireDecodingOptions = .lenient, sourceLocation: SourceLocation = #_sourceLocation
) -> ProtocolError? {
  do {
    let message = try MessageCodec.decodeServerMessage(text, options: options)
    Issue.record("expected an error, decoded \(message)", sourceLocation: sourceLocation)
    return nil
  } catch {
    return error
  }
}

func text(_ bytes: [UInt8]) -> String {
  String(decoding: bytes, as: UTF8.self)
}
