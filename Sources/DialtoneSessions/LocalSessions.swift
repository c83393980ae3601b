import DialtoneProtocol

/// Opening a session on one server, decided at once: the device's session here is resumed when
/// the client asks for it and every message after its last seq is still held; otherwise a new
/// one starts (`resync` when the resume asked for could not be honoured).
package enum LocalSessions {
  package static func open(_ opening: SessionOpening, existing: (any DeliverySession)?) -> SessionOpened {
    guard let resume = opening.resume else { return .fresh(sessionID: opening.freshID, resync: false) }
    if let local = existing as? LocalSession, local.id == resume.sessionId, local.canResume(from: resume.lastSeq) {
      return .resumed(sessionID: local.id, pending: [], replies: [:])
    }
    return .fresh(sessionID: opening.freshID, resync: true)
  }
}
