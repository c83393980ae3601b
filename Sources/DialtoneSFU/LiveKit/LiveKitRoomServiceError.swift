package enum LiveKitRoomServiceError: Error, Sendable, Hashable, CustomStringConvertible {
  case invalidServerURL(String)
  case token(LiveKitAccessTokenError)
  /// No response: connection refused, TLS, timeout.
  case transport(String)
  /// A non-2xx answer. `code` and `message` are the Twirp error's `code` and `msg` when the body
  /// is one (a proxy in front of LiveKit may answer with something else).
  case twirp(status: Int, code: String?, message: String?)
  case malformedResponse(String)

  /// LiveKit answers `not_found` for a room or participant that is already gone, which a
  /// caller tearing a call down usually treats as done.
  package var isNotFound: Bool {
    if case .twirp(_, "not_found"?, _) = self { return true }
    return false
  }

  package var description: String {
    switch self {
    case .invalidServerURL(let text):
      return "LiveKit server URL \"\(text)\" is not http(s):// or ws(s):// followed by host[:port]"
    case .token(let error): return "\(error)"
    case .transport(let reason): return "LiveKit server API unreachable: \(reason)"
    case .twirp(let status, let code, let message):
      return "LiveKit server API answered \(status) \(code ?? "(no Twirp code)"): \(message ?? "")"
    case .malformedResponse(let reason): return "LiveKit server API response is malformed: \(reason)"
    }
  }
}
