import DialtoneProtocol
import Testing

/// The rules each client message type carries (`ClientMessageType.rules`), over every type.
struct ClientMessageRulesTests {
  /// A write-behind node asks for room before handling every message but a relayed 1:1
  /// candidate's (`RequestPipeline`): only that one may be refused once handled.
  @Test func onlyARelayedCandidateMayBeRefusedOnceHandled() {
    for type in ClientMessageType.allCases {
      let rules = type.rules
      #expect(rules.mayBeRefusedOnceHandled == (type == .candidate), "\(type.rawValue)")
      // Handled again when sent again, it must change nothing: relayed as it came, on a 1:1 call.
      if rules.mayBeRefusedOnceHandled {
        #expect(rules.desk == .oneToOne && rules.relayed && !rules.startsACall, "\(type.rawValue)")
      }
    }
  }
}
