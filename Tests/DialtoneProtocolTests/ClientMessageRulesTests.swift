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

/// `CallIDRules.problem(with:)` reads a native string's bytes in place: every byte value at the
/// start, the middle and the end of an id, and the length limits, answer as the rule says.
struct CallIDRulesTests {
  @Test func everyByteAnywhereInAnIdIsJudgedByTheRule() {
    let allowed = Set(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.".utf8))
    let refusal = "may contain only A-Z, a-z, 0-9, '-', '_' and '.'"
    for byte in UInt8(0)...0xFF {
      for position in [0, 17, 35] {
        var bytes = Array("0f8a1c2e-3b4d-4e5f-8a6b-7c8d9e0f1a2b".utf8)
        bytes[position] = byte
        // A byte that is not UTF-8 alone becomes U+FFFD's three bytes: refused as well.
        let callId = String(decoding: bytes, as: UTF8.self)
        let expected = allowed.contains(byte) ? nil : refusal
        #expect(CallIDRules.problem(with: callId) == expected, "byte \(byte) at \(position)")
        #expect(CallIDRules.isValid(callId) == (expected == nil))
      }
    }
    #expect(CallIDRules.problem(with: "é") == refusal)
    #expect(CallIDRules.problem(with: "") == "must be 1 to \(Limits.maxCallIDBytes) characters")
    #expect(CallIDRules.problem(with: String(repeating: "a", count: Limits.maxCallIDBytes)) == nil)
    #expect(
      CallIDRules.problem(with: String(repeating: "a", count: Limits.maxCallIDBytes + 1))
        == "must be 1 to \(Limits.maxCallIDBytes) characters")
  }
}
