import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A response read off a raw socket: the status line's code, the head and the body.
public struct RawHTTPResponse: Sendable {
  public let status: Int
  public let head: String
  public let body: String
  /// The header fields, names lowercased (the last of repeated ones).
  public var headers: [String: String] {
    var fields: [String: String] = [:]
    for line in head.split(separator: "\r\n").dropFirst() {
      let pair = line.split(separator: ":", maxSplits: 1)
      if pair.count == 2 { fields[pair[0].lowercased()] = pair[1].trimmingCharacters(in: .whitespaces) }
    }
    return fields
  }
  public var errorCode: String? {
    let json = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
    return (json?["error"] as? [String: Any])?["code"] as? String
  }
}

/// An HTTP/1.1 connection that writes exact bytes, for requests no client library would send.
/// Every read has a receive timeout, so a server that never answers fails the test instead of
/// hanging it.
public final class RawHTTPConnection {
  public let fd: Int32
  private var buffered: [UInt8] = []

  public init(port: Int, receiveTimeout: Int = 5) throws {
    guard let fd = connectLoopback(port: port) else { throw ConnectionRefused(port: port) }
    var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    self.fd = fd
  }

  deinit { close(fd) }

  public func send(_ text: String) { send(Array(text.utf8)) }

  public func send(_ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
      let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      if sent <= 0 { return }  // the server closed: the read that follows says how
      offset += sent
    }
  }

  /// One response (head and a `Content-Length` body), or nil when the connection closed or timed out first.
  public func readResponse() -> RawHTTPResponse? {
    var headEnd: Int?
    for _ in 0..<1024 {
      if let end = find([13, 10, 13, 10]) {
        headEnd = end
        break
      }
      guard fill() else { return nil }
    }
    guard let headEnd else { return nil }
    let head = String(decoding: buffered[..<headEnd], as: UTF8.self)
    let statusLine = head.split(separator: "\r\n", maxSplits: 1).first ?? ""
    let parts = statusLine.split(separator: " ")
    guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else { return nil }
    let length =
      head.split(separator: "\r\n").dropFirst().compactMap { line -> Int? in
        let pair = line.split(separator: ":", maxSplits: 1)
        guard pair.count == 2, pair[0].lowercased() == "content-length" else { return nil }
        return Int(pair[1].trimmingCharacters(in: .whitespaces))
      }.first ?? 0
    let bodyStart = headEnd + 4
    for _ in 0..<1024 where buffered.count < bodyStart + length {
      guard fill() else { break }
    }
    let bodyEnd = min(buffered.count, bodyStart + length)
    let body = String(decoding: buffered[bodyStart..<bodyEnd], as: UTF8.self)
    buffered.removeFirst(bodyEnd)
    return RawHTTPResponse(status: status, head: head, body: body)
  }

  /// Whether the server closed the connection (EOF or reset) with nothing more to read, rather
  /// than sending something or leaving it open until the receive timeout.
  public func isClosedByServer() -> Bool {
    guard buffered.isEmpty else { return false }
    var byte: UInt8 = 0
    let count = recv(fd, &byte, 1, 0)
    return count == 0 || (count < 0 && errno == ECONNRESET)
  }

  private func fill() -> Bool {
    var chunk = [UInt8](repeating: 0, count: 16 * 1024)
    let count = recv(fd, &chunk, chunk.count, 0)
    guard count > 0 else { return false }
    buffered.append(contentsOf: chunk.prefix(count))
    return true
  }

  private func find(_ needle: [UInt8]) -> Int? {
    guard buffered.count >= needle.count else { return nil }
    for start in 0...(buffered.count - needle.count) where buffered[start..<start + needle.count].elementsEqual(needle)
    {
      return start
    }
    return nil
  }
}

/// Runs blocking socket I/O on a Dispatch thread: blocked on the (two-thread) cooperative pool,
/// it would starve the in-process server's own tasks and time out.
public func blockingIO<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { continuation in
    DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
  }
}

/// No server accepted a connection on 127.0.0.1:`port`.
public struct ConnectionRefused: Error, CustomStringConvertible {
  public let port: Int
  public var description: String { "nothing accepted a connection on 127.0.0.1:\(port)" }
}
