import DialtoneProtocol

extension FuzzTargets {
  /// Any bytes a client sends as a frame: decoding never crashes, and what decodes re-encodes to
  /// the same message (the server relays what it decoded).
  public static func clientMessage(_ data: UnsafePointer<UInt8>, _ size: Int) {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    guard let envelope = try? MessageCodec.decodeClientMessage(bytes) else { return }
    let again = try? MessageCodec.decodeClientMessage(MessageCodec.encode(envelope))
    if again != envelope {
      fatalError("re-encoding changed the message: \(envelope) became \(String(describing: again))")
    }
    return
  }
}
