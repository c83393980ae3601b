import DialtoneProtocol

@testable import DialtoneCalls

/// The messages a router's effects send, with their recipients (the routers' tests read them).
func sends(_ effects: [CallEffect]) -> [(ServerMessage, Recipient)] {
  effects.compactMap {
    if case .send(let m, let r) = $0 { return (m, r) }
    return nil
  }
}
