/// What each fuzz harness (FuzzTesting/) does with one input, here so that `make test` replays
/// the seed corpus and every input that once crashed (FuzzTesting/Regressions) through exactly
/// the same code, without sanitizers.
public enum FuzzTargets {
  /// A target by the name of its harness, without the `Fuzz` prefix ("ClientMessage", ...).
  public static let all: [String: @Sendable (UnsafePointer<UInt8>, Int) -> Void] = [
    "ClientMessage": clientMessage, "ServerMessage": serverMessage, "HTTPBodies": httpBodies,
    "PushPayload": pushPayload, "SDP": sdp, "JWT": jwt, "HTTPRequest": httpRequest,
    "WebSocketFrames": webSocketFrames, "HTTPHead": httpHead,
  ]
}
