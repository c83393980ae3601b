/// Collects a connection's bytes into requests, one at a time and in order (pipelined requests
/// wait here until the one before them is answered). Lines end with CRLF or a bare LF (RFC 9112
/// §2.2); a bare CR is refused, as are heads over `maxHeadBytes` (431). The buffer is freed
/// whenever it empties, so an idle connection holds nothing.
package struct HTTPRequestReader {
  package enum Head: Equatable, Sendable {
    case needMore
    case head(HTTPRequestHead)
    case failure(HTTPError)
  }

  let maxHeadBytes: Int
  private(set) var buffered: [UInt8] = []
  /// Where the search for the end of the head resumes, and where the current line starts.
  private var scanned = 0
  private var lineStart = 0
  private var lines: [Range<Int>] = []

  package init(maxHeadBytes: Int) {
    self.maxHeadBytes = maxHeadBytes
  }

  var isEmpty: Bool { buffered.isEmpty }

  mutating func append(_ bytes: UnsafeRawBufferPointer) {
    buffered.append(contentsOf: bytes.bytes)
  }

  package mutating func append(_ bytes: [UInt8]) {
    buffered.append(contentsOf: bytes)
  }

  /// The next request's head, once all of it is here; its bytes leave the buffer.
  package mutating func nextHead() -> Head {
    while scanned < buffered.count {
      let byte = buffered[scanned]
      scanned += 1
      if byte == 0x0D {
        guard scanned < buffered.count else {
          scanned -= 1  // wait for the byte after it
          break
        }
        if buffered[scanned] != 0x0A { return .failure(.badRequest("a bare CR in the request head")) }
        continue
      }
      guard byte == 0x0A else { continue }
      var end = scanned - 1
      if end > lineStart, buffered[end - 1] == 0x0D { end -= 1 }
      let line = lineStart..<end
      lineStart = scanned
      if !line.isEmpty {
        lines.append(line)
        continue
      }
      // Empty lines before the request line are skipped (RFC 9112 §2.2); one after it ends the head.
      guard !lines.isEmpty else {
        consume(scanned)
        continue
      }
      if scanned > maxHeadBytes { return tooLarge() }
      let head = HTTPRequestHead.parse(lines.map { buffered[$0] })
      consume(scanned)
      switch head {
      case .success(let head): return .head(head)
      case .failure(let error): return .failure(error)
      }
    }
    if scanned > maxHeadBytes { return tooLarge() }
    return .needMore
  }

  /// The next `count` bytes (a body), once they are all here.
  package mutating func takeBody(_ count: Int) -> [UInt8]? {
    guard buffered.count >= count else { return nil }
    let body = Array(buffered[..<count])
    consume(count)
    return body
  }

  /// Everything buffered (what followed a WebSocket upgrade request).
  mutating func takeAll() -> [UInt8] {
    let rest = buffered
    consume(buffered.count)
    return rest
  }

  private mutating func tooLarge() -> Head {
    lines = []
    return .failure(
      HTTPError(
        status: 431, code: "headers-too-large", message: "request line and headers exceed \(maxHeadBytes) bytes"))
  }

  private mutating func consume(_ count: Int) {
    lines = []
    if count >= buffered.count {
      buffered = []
    } else {
      buffered.removeFirst(count)
    }
    scanned = 0
    lineStart = 0
  }
}
