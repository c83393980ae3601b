import CRedis
import DialtoneSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// SUBSCRIBE on a connection of its own; messages arrive on `messages`, read by a dedicated thread
/// (not the cooperative pool, which a blocking read would starve).
///
/// The buffer holds at most `bufferLimit` unread messages. When a message arrives with the buffer
/// full, the stream ends with `RedisError.subscriberOverflow` after the buffered ones: what the
/// consumer received is always a gap-free prefix, and it learns it must resynchronise instead of
/// silently missing messages. A lost connection ends it with the connection error; `stop()` (or
/// the consumer cancelling its iteration) ends it normally.
public final class RedisSubscriber: Sendable {
  public let messages: AsyncThrowingStream<RedisMessage, any Error>
  private let reader: Reader

  public init(_ configuration: RedisConfiguration, channels: [String], bufferLimit: Int = 1024) throws(RedisError) {
    guard !channels.isEmpty else { throw .invalidRequest("subscribe to at least one channel") }
    guard bufferLimit > 0 else { throw .invalidRequest("the buffer must hold at least one message") }
    let link = try Self.subscribe(configuration, channels)
    var wake: [Int32] = [-1, -1]
    guard pipe(&wake) == 0 else {
      RedisConnection.free(link)
      throw .connectionFailed(message: "pipe() failed: errno \(errno)")
    }
    let (stream, continuation) = AsyncThrowingStream<RedisMessage, any Error>.makeStream(
      bufferingPolicy: .bufferingOldest(bufferLimit))
    let reader = Reader(
      link: link, wakeRead: wake[0], wakeWrite: wake[1], continuation: continuation, bufferLimit: bufferLimit)
    continuation.onTermination = { _ in reader.wake() }
    messages = stream
    self.reader = reader
    reader.thread = WorkerThread(name: "redis-subscriber") { reader.run() }
  }

  deinit { reader.stop() }

  /// Ends the stream and closes the connection; returns once the reader thread has finished
  /// (which it does at once: it only ever blocks in poll, which the wake pipe ends), at most 5 s.
  public func stop() { reader.stop() }

  /// Connects and waits for every channel's confirmation, so that a message published once the
  /// initialiser returns is delivered.
  private static func subscribe(_ configuration: RedisConfiguration, _ channels: [String]) throws(RedisError)
    -> RedisConnection.Link
  {
    // A subscriber writes nothing: no replicas to count, no WAIT.
    var subscriber = configuration
    subscriber.replicaWait.replicas = 0
    let connection = try RedisConnection(subscriber)
    guard let link = connection.detachLink() else {
      throw .connectionLost(message: "the connection is closed")
    }
    let arguments = ["SUBSCRIBE"] + channels.map(RedisArgument.string)
    guard case .plain(let context) = link else {
      guard case .tls(let tls) = link else { throw .connectionLost(message: "the connection is closed") }
      do throws(RedisError) {
        try tls.send([arguments])
        for _ in channels {
          let reply = try tls.receive()
          guard case .array(let parts) = reply, parts.first?.string == "subscribe" else {
            throw RedisError.unexpectedReply(reply)
          }
        }
      } catch {
        tls.close()
        throw error
      }
      return link
    }
    // Formatted as every other command (`RedisCommandFormat`); hiredis's blocking read sends it first.
    let queued = RedisConnection.append([arguments], to: context) == REDIS_OK
    for _ in channels {
      var raw: UnsafeMutableRawPointer?
      guard queued, redisGetReply(context, &raw) == REDIS_OK, let reply = raw else {
        let message = RedisConnection.errorText(context)
        redisFree(context)
        throw .connectionFailed(message: "SUBSCRIBE: \(message)")
      }
      let converted = RedisConnection.convert(reply.assumingMemoryBound(to: redisReply.self))
      freeReplyObject(reply)
      guard case .array(let parts) = converted, parts.first?.string == "subscribe" else {
        redisFree(context)
        throw .unexpectedReply(converted)
      }
    }
    return link
  }

  /// What the reader thread owns, and how to stop it.
  private final class Reader: @unchecked Sendable {
    // @unchecked: `link` and `wakeRead` are used only by the reader thread until it ends;
    // `thread` is set once, before anything else reads it; `stopped`, `closed` and writes to the
    // wake pipe are under `state`.
    private let link: RedisConnection.Link
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let continuation: AsyncThrowingStream<RedisMessage, any Error>.Continuation
    var thread: WorkerThread?
    private let state = Locked<(stopped: Bool, closed: Bool)>((false, false))
    private let bufferLimit: Int

    init(
      link: RedisConnection.Link, wakeRead: Int32, wakeWrite: Int32,
      continuation: AsyncThrowingStream<RedisMessage, any Error>.Continuation, bufferLimit: Int
    ) {
      self.bufferLimit = bufferLimit
      self.link = link
      self.wakeRead = wakeRead
      self.wakeWrite = wakeWrite
      self.continuation = continuation
    }

    func run() {
      continuation.finish(throwing: read())
      RedisConnection.free(link)
    }

    /// Until stopped (nil) or failed (the error).
    private func read() -> RedisError? {
      while true {
        let next: RedisReply?
        switch nextBuffered() {
        case .success(let reply): next = reply
        case .failure(let error): return error
        }
        if let reply = next {
          guard case .array(let parts) = reply, parts.count == 3, parts[0].string == "message",
            let channel = parts[1].string, let payload = parts[2].bytes
          else { continue }
          if case .dropped = continuation.yield(RedisMessage(channel: channel, payload: payload)) {
            return .subscriberOverflow(limit: bufferLimit)
          }
          continue
        }
        if case .tls(let tls) = link, tls.hasBufferedBytes {
          if let error = readMore() { return error }
          continue
        }
        var fds = [
          pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
          pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
        ]
        let ready = poll(&fds, 2, -1)
        if ready < 0 && errno == EINTR { continue }
        if ready < 0 { return .connectionLost(message: "poll failed: errno \(errno)") }
        if fds[1].revents != 0 { return nil }
        if let error = readMore() { return error }
      }
    }

    private var descriptor: Int32 {
      switch link {
      case .plain(let context): context.pointee.fd
      case .tls(let tls): tls.descriptor
      }
    }

    /// A reply already read in full, if any.
    private func nextBuffered() -> Result<RedisReply?, RedisError> {
      switch link {
      case .plain(let context):
        var raw: UnsafeMutableRawPointer?
        guard redisGetReplyFromReader(context, &raw) == REDIS_OK else {
          return .failure(.protocolError(message: RedisConnection.errorText(context)))
        }
        guard let raw else { return .success(nil) }
        defer { freeReplyObject(raw) }
        return .success(RedisConnection.convert(raw.assumingMemoryBound(to: redisReply.self)))
      case .tls(let tls):
        do {
          return .success(try tls.buffered())
        } catch {
          return .failure(error)
        }
      }
    }

    /// Reads what the socket has; the error that ends the stream, if it failed.
    private func readMore() -> RedisError? {
      switch link {
      case .plain(let context):
        guard redisBufferRead(context) != REDIS_OK else { return nil }
        return context.pointee.err == REDIS_ERR_EOF
          ? .connectionLost(message: "the server closed the connection")
          : .connectionLost(message: RedisConnection.errorText(context))
      case .tls(let tls):
        do {
          try tls.readMore()
          return nil
        } catch .timeout {
          return nil  // a quiet channel: poll again
        } catch {
          return error
        }
      }
    }

    /// Makes the reader thread stop at its next poll; never blocks.
    func wake() {
      state.withLock { state in
        guard !state.stopped else { return }
        state.stopped = true
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
      }
    }

    func stop() {
      wake()
      guard thread?.wait(upTo: .seconds(5)) == true else { return }
      state.withLock { state in
        guard !state.closed else { return }
        state.closed = true
        close(wakeRead)
        close(wakeWrite)
      }
    }
  }
}
