import DialtoneNet

extension FuzzTargets {
  /// What a client could send once its WebSocket is open, to the server's frame parser
  /// (unmasking, fragmentation, control frames, UTF-8, close codes, the size limit). The first
  /// byte says how big the pieces are that the rest arrives in: read whole or in pieces, the
  /// same events must come out, and nothing after a close or a failure.
  public static func webSocketFrames(_ data: UnsafePointer<UInt8>, _ size: Int) {
    guard size > 0 else { return }
    let piece = max(1, Int(data[0]))
    let input = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    let whole = frameEvents(input, piece: Int.max)
    let pieces = frameEvents(input, piece: piece)
    guard whole == pieces else { fatalError("split reads disagree: \(whole) vs \(pieces)") }
    if let end = whole.firstIndex(where: Self.ends), end != whole.count - 1 {
      fatalError("events after the end: \(whole)")
    }
  }

  private static func ends(_ event: WebSocketFrameParser.Event) -> Bool {
    switch event {
    case .close, .failure: return true
    default: return false
    }
  }

  private static func frameEvents(_ input: UnsafeRawBufferPointer, piece: Int) -> [WebSocketFrameParser.Event] {
    var parser = WebSocketFrameParser(maxMessageBytes: 4096)
    var events: [WebSocketFrameParser.Event] = []
    var start = 0
    while start < input.count {
      let end = start + min(piece, input.count - start)
      let slice = UnsafeRawBufferPointer(rebasing: input[start..<end])
      var index = 0
      while let event = parser.next(slice, &index) { events.append(event) }
      start = end
    }
    return events
  }
}
