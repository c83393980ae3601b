import DialtoneClient

/// A socket that closes at once: no server there (a device offline, a refused connection).
struct DeadSocket: SignalingSocket {
  let events: AsyncStream<SignalingSocketEvent>
  init() {
    let (stream, sink) = AsyncStream<SignalingSocketEvent>.makeStream()
    sink.yield(.closed(code: nil))
    sink.finish()
    events = stream
  }
  func send(_ text: String) {}
  func close(code: Int) {}
}
