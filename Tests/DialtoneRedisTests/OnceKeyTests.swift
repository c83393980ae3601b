import DialtoneCluster
import DialtoneProtocol
import Testing

@Suite struct OnceKeyBehaviour {
  /// A candidate's key is the same bytes however it is built: keys are stored in Redis and
  /// compared across nodes (a node of another version during a rolling restart included).
  @Test func aCandidatesKeyIsItsPartsJoinedByNulAsBefore() {
    let cases: [(leg: Bool, mid: String?, fragment: String?)] = [
      (false, "0", "u1"), (true, nil, nil), (false, nil, "é"), (false, "e\u{301}", "ü🙂"),
    ]
    for (leg, mid, fragment) in cases {
      let message = ServerMessage.Candidate(
        callId: "call-1", from: Peer(userId: "alice", deviceId: "phone"),
        candidate: IceCandidate(
          candidate: "candidate:1 1 udp 1 127.0.0.1 9 typ host", sdpMid: mid, usernameFragment: fragment),
        leg: leg)
      let joined = [
        "c", "call-1", "alice", "phone", leg ? "leg" : "", "candidate:1 1 udp 1 127.0.0.1 9 typ host", mid ?? "",
        fragment ?? "",
      ].joined(separator: "\u{0}")
      // Compared as bytes: `String`'s `==` takes canonically equivalent spellings as equal.
      #expect(OnceKey.of(.candidate(message)).map { Array($0.utf8) } == Array(joined.utf8))
    }
    #expect(OnceKey.of(.ack(.init(replyTo: "r1", callId: "c1"))) == nil)
  }
}
