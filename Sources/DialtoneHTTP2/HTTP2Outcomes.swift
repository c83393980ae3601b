/// What connections hand back to the engine while it drives them: answered or failed requests,
/// and requests a server refused before processing them (to send again elsewhere). The engine
/// completes them once the connection's I/O is over, outside nghttp2's callbacks.
final class HTTP2Outcomes {
  var finished: [(HTTP2Stream, Result<HTTP2Response, HTTP2Error>)] = []
  var refused: [HTTP2Stream] = []
}
