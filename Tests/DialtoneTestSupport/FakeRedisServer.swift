import DialtoneRedis
import DialtoneSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A Redis stand-in on 127.0.0.1 that speaks RESP: every command (its arguments as text) goes to
/// `answer`, whose reply is sent back, in order, on the connection it came on. For client logic
/// a real server cannot be made to show on cue (a WAIT that comes back short, a slot map that
/// changes between two reads). Each connection is served by a thread of its own; `stop` closes
/// everything.
public final class FakeRedisServer: Sendable {
  public let port: Int
  private let listener: Int32
  private let answer: @Sendable ([String]) -> RedisReply
  private let clients = Locked<(open: [Int32], stopped: Bool)>(([], false))

  public init(answer: @escaping @Sendable ([String]) -> RedisReply) throws {
    self.answer = answer
    (listener, port) = try LoopbackListener.listeningSocket()
    let thread = Thread { [self] in acceptLoop() }
    thread.name = "fake-redis-accept"
    thread.start()
  }

  deinit { stop() }

  public func stop() {
    let open = clients.withLock { state -> [Int32] in
      guard !state.stopped else { return [] }
      state.stopped = true
      defer { state.open.removeAll() }
      return state.open + [listener]
    }
    // shutdown wakes the threads blocked in accept or recv; each closes its own descriptor.
    for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
  }

  private func acceptLoop() {
    while true {
      let client = accept(listener, nil, nil)
      guard client >= 0 else { break }
      let admitted = clients.withLock { state -> Bool in
        guard !state.stopped else { return false }
        state.open.append(client)
        return true
      }
      guard admitted else {
        close(client)
        break
      }
      let thread = Thread { [self] in serve(client) }
      thread.name = "fake-redis-client"
      thread.start()
    }
    close(listener)
  }

  private func serve(_ fd: Int32) {
    var reader = Reader(fd: fd)
    while let command = reader.command() {
      let encoded = Self.encode(answer(command))
      let sent = encoded.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      guard sent == encoded.count else { break }
    }
    clients.withLock { $0.open.removeAll { $0 == fd } }
    close(fd)
  }

  static func encode(_ reply: RedisReply) -> [UInt8] {
    switch reply {
    case .status(let text): return Array("+\(text)\r\n".utf8)
    case .error(let prefix, let message):
      return Array("-\(prefix.isEmpty ? "" : prefix + " ")\(message)\r\n".utf8)
    case .integer(let value): return Array(":\(value)\r\n".utf8)
    case .bulk(let bytes): return Array("$\(bytes.count)\r\n".utf8) + bytes + Array("\r\n".utf8)
    case .null: return Array("$-1\r\n".utf8)
    case .array(let elements): return Array("*\(elements.count)\r\n".utf8) + elements.flatMap(encode)
    }
  }

  /// Reads the RESP arrays of bulk strings that clients send commands as.
  private struct Reader {
    let fd: Int32
    var buffer: [UInt8] = []

    init(fd: Int32) { self.fd = fd }

    mutating func command() -> [String]? {
      guard let header = line(), header.first == "*", let count = Int(header.dropFirst()), count > 0 else { return nil }
      var arguments: [String] = []
      for _ in 0..<count {
        guard let size = line(), size.first == "$", let length = Int(size.dropFirst()), length >= 0,
          let bytes = take(length + 2)
        else { return nil }
        arguments.append(String(decoding: bytes.prefix(length), as: UTF8.self))
      }
      return arguments
    }

    private mutating func line() -> String? {
      while true {
        if let end = buffer.firstIndex(of: UInt8(ascii: "\n")), end > 0, buffer[end - 1] == UInt8(ascii: "\r") {
          let text = String(decoding: buffer[..<(end - 1)], as: UTF8.self)
          buffer.removeFirst(end + 1)
          return text
        }
        guard fill() else { return nil }
      }
    }

    private mutating func take(_ count: Int) -> [UInt8]? {
      while buffer.count < count { guard fill() else { return nil } }
      defer { buffer.removeFirst(count) }
      return Array(buffer.prefix(count))
    }

    private mutating func fill() -> Bool {
      var chunk = [UInt8](repeating: 0, count: 4096)
      let read = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      guard read > 0 else { return false }
      buffer += chunk.prefix(read)
      return true
    }
  }
}
