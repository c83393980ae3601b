/// An origin's requests waiting for a stream, its current connection, and older ones that a
/// GOAWAY put to finishing what they had.
final class HTTP2OriginQueue {
  /// In order; requests a server refused go back to the front.
  var pending: [HTTP2Stream] = []
  var active: HTTP2Connection?
  var draining: [HTTP2Connection] = []
}
