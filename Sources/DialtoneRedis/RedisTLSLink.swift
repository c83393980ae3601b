import CRedis
import DialtoneTLS

/// A connection to Redis over TLS (`rediss://`): Debian's hiredis 0.14 has no TLS, so the bytes
/// go through `TLSClientStream` (the commands formatted by `RedisCommandFormat`) while hiredis
/// still parses the replies (a `redisReader`). Used by one thread at a time, under its
/// connection's lock or on its subscriber's thread.
final class RedisTLSLink {
  private let stream: TLSClientStream
  private let reader: UnsafeMutablePointer<redisReader>
  private let commandTimeout: Duration

  init(_ configuration: RedisConfiguration, _ tls: TLSClientSettings) throws(RedisError) {
    guard let reader = redisReaderCreate() else {
      throw .connectionFailed(message: "hiredis could not allocate a reader")
    }
    do {
      stream = try TLSClientStream(
        host: configuration.host, port: configuration.port, settings: tls,
        connectTimeout: configuration.connectTimeout, ioTimeout: configuration.commandTimeout)
    } catch {
      redisReaderFree(reader)
      throw .connectionFailed(message: error.description)
    }
    self.reader = reader
    commandTimeout = configuration.commandTimeout
  }

  deinit {
    stream.close()
    redisReaderFree(reader)
  }

  var descriptor: Int32 { stream.descriptor }

  /// Sends the commands in one write.
  func send(_ commands: [[RedisArgument]]) throws(RedisError) {
    do {
      try stream.write(RedisCommandFormat.encode(commands))
    } catch {
      throw Self.lost(error, commandTimeout)
    }
  }

  /// The next reply, reading until it is complete (each read bounded by the command timeout).
  func receive() throws(RedisError) -> RedisReply {
    while true {
      if let reply = try buffered() { return reply }
      try readMore()
    }
  }

  /// A reply already received in full, if any (no read).
  func buffered() throws(RedisError) -> RedisReply? {
    var raw: UnsafeMutableRawPointer?
    guard redisReaderGetReply(reader, &raw) == REDIS_OK else {
      throw .protocolError(message: RedisTLSLink.readerError(reader))
    }
    guard let raw else { return nil }
    defer { freeReplyObject(raw) }
    return RedisConnection.convert(raw.assumingMemoryBound(to: redisReply.self))
  }

  /// Whether decrypted bytes wait that a `poll` on the socket would not see.
  var hasBufferedBytes: Bool { stream.hasBufferedBytes }

  /// Reads what has arrived (waiting up to the command timeout) into the reply parser.
  func readMore() throws(RedisError) {
    var bytes: [UInt8] = []
    do {
      try stream.read(appendingTo: &bytes)
    } catch {
      throw Self.lost(error, commandTimeout)
    }
    let fed = bytes.withUnsafeBytes { raw in
      redisReaderFeed(reader, raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count)
    }
    guard fed == REDIS_OK else { throw .protocolError(message: RedisTLSLink.readerError(reader)) }
  }

  func close() { stream.close() }

  private static func lost(_ error: TLSError, _ timeout: Duration) -> RedisError {
    switch error {
    case .timeout: .timeout(message: "no reply within \(timeout)")
    default: .connectionLost(message: error.description)
    }
  }

  private static func readerError(_ reader: UnsafeMutablePointer<redisReader>) -> String {
    withUnsafeBytes(of: &reader.pointee.errstr) { raw in
      String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
  }
}
