import DialtoneProtocol

extension FuzzTargets {
  /// Any bytes a server sends (as the SDK reads them, leniently and strictly): decoding never
  /// crashes, and a known message re-encodes to itself.
  public static func serverMessage(_ data: UnsafePointer<UInt8>, _ size: Int) {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    _ = try? MessageCodec.decodeServerMessage(bytes, options: .strict)
    guard let envelope = try? MessageCodec.decodeServerMessage(bytes), envelope.message.knownType != nil else {
      return
    }
    let again = try? MessageCodec.decodeServerMessage(MessageCodec.encode(envelope))
    if again != envelope {
      fatalError("re-encoding changed the message: \(envelope) became \(String(describing: again))")
    }
    return
  }
}
