import DialtoneProtocol

/// What the router tests read off a reply or a relayed message.
extension ServerMessage {
  var isAck: Bool {
    if case .ack = self { return true }
    return false
  }

  var errorCode: ErrorCode? {
    if case .error(let e) = self { return e.code }
    return nil
  }

  var endReason: EndReason? {
    if case .callEnded(let e) = self { return e.reason }
    return nil
  }
}
