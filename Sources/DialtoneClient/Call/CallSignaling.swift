import DialtoneProtocol

/// A call-scoped request the engine sends to the server.
public enum CallSignalingRequest: Sendable, Equatable {
  case invite(callId: CallID, to: String, video: Bool, offer: SessionDescription)
  case ringing(callId: CallID)
  case accept(callId: CallID, answer: SessionDescription?)
  case decline(callId: CallID)
  case cancel(callId: CallID)
  case hangup(callId: CallID)
  case offer(callId: CallID, sdp: String, iceRestart: Bool)
  case answer(callId: CallID, sdp: String)
  case candidate(callId: CallID, candidate: IceCandidate)
  case endOfCandidates(callId: CallID)
  case iceRestartRequest(callId: CallID)

  /// The wire message, for `SignalingClient.request { id in request.clientMessage(id: id) }`.
  public func clientMessage(id: String) -> ClientMessage {
    switch self {
    case .invite(let c, let to, let video, let offer):
      return .invite(.init(id: id, callId: c, to: to, video: video, offer: offer))
    case .ringing(let c): return .ringing(.init(id: id, callId: c))
    case .accept(let c, let answer): return .accept(.init(id: id, callId: c, answer: answer))
    case .decline(let c): return .decline(.init(id: id, callId: c))
    case .cancel(let c): return .cancel(.init(id: id, callId: c))
    case .hangup(let c): return .hangup(.init(id: id, callId: c))
    case .offer(let c, let sdp, let r): return .offer(.init(id: id, callId: c, sdp: sdp, iceRestart: r))
    case .answer(let c, let sdp): return .answer(.init(id: id, callId: c, sdp: sdp))
    case .candidate(let c, let cand): return .candidate(.init(id: id, callId: c, candidate: cand))
    case .endOfCandidates(let c): return .endOfCandidates(.init(id: id, callId: c))
    case .iceRestartRequest(let c): return .iceRestartRequest(.init(id: id, callId: c))
    }
  }
}

/// How a `CallEngine` talks to the server. The app wires it to `SignalingClient.request`.
/// The engine calls `send` from one task, in order.
public protocol CallSignaling: Sendable {
  func send(_ request: CallSignalingRequest) async throws
}
