import DialtoneNet

extension FuzzTargets {
  /// Bytes on an HTTP connection, to the server's request reader (request lines, header fields,
  /// limits, framing, pipelining) and what reads a head after it: body framing and the
  /// WebSocket handshake. The first byte says how big the pieces are that the rest arrives in:
  /// read whole or in pieces, the same heads must come out.
  public static func httpHead(_ data: UnsafePointer<UInt8>, _ size: Int) {
    guard size > 0 else { return }
    let piece = max(1, Int(data[0]))
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let whole = heads(input, piece: Int.max)
    let pieces = heads(input, piece: piece)
    guard whole == pieces else { fatalError("split reads disagree: \(whole) vs \(pieces)") }
    for case .head(let head) in whole {
      _ = head.bodyLength()
      _ = WebSocketHandshake.accept(head)
    }
  }

  /// Every head in `input` until the reader needs more or refuses; bodies are skipped by length.
  private static func heads(_ input: [UInt8], piece: Int) -> [HTTPRequestReader.Head] {
    var reader = HTTPRequestReader(maxHeadBytes: 2048)
    var results: [HTTPRequestReader.Head] = []
    var body = 0
    var start = 0
    repeat {
      let end = start + min(piece, input.count - start)
      reader.append(Array(input[start..<end]))
      start = end
      while true {
        if body > 0 {
          guard reader.takeBody(body) != nil else { break }
          body = 0
        }
        let head = reader.nextHead()
        if case .needMore = head { break }
        results.append(head)
        guard case .head(let parsed) = head else { return results }
        if case .success(let length) = parsed.bodyLength() { body = min(length ?? 0, 1 << 20) }
      }
    } while start < input.count
    return results
  }
}
