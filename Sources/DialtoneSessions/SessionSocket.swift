/// The socket a session writes its frames to: the gateway's WebSocket connection. Sessions know
/// nothing of the network thread; writing only queues the frame for it.
package protocol SessionSocket: AnyObject, Sendable {
  var id: UInt64 { get }
  func send(text bytes: [UInt8])
  /// May wait briefly to share a write with the next frame (order is kept).
  func sendCoalesced(text bytes: [UInt8])
  func close(code: UInt16, reason: String)
}
