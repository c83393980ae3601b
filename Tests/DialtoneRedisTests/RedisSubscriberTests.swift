import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  @Suite struct Subscriber {
    private func subscribe(_ channels: [String], bufferLimit: Int = 1024) throws -> RedisSubscriber {
      let server = try SharedRedis.server()
      return try RedisSubscriber(RedisConfiguration(port: server.port), channels: channels, bufferLimit: bufferLimit)
    }

    private func channel(_ name: String) -> String { name + ":" + UUID().uuidString }

    @Test func deliversEveryMessageInOrderWithItsChannel() async throws {
      let a = channel("a")
      let b = channel("b")
      let subscriber = try subscribe([a, b])
      let publisher = try SharedRedis.server().connect()
      let sent = (0..<200).map { index in
        RedisMessage(channel: index % 2 == 0 ? a : b, payload: index == 7 ? Array(0...255) : Array("m\(index)".utf8))
      }
      let counts = try publisher.pipeline(sent.map { ["PUBLISH", .string($0.channel), .bytes($0.payload)] })
      #expect(counts == Array(repeating: .integer(1), count: sent.count))
      let received = try await first(sent.count, of: subscriber)
      #expect(received == sent)
      subscriber.stop()
    }

    @Test func stopEndsTheStreamAndUnsubscribes() async throws {
      let name = channel("stop")
      let subscriber = try subscribe([name])
      let publisher = try SharedRedis.server().connect()
      try publisher.command(["PUBLISH", .string(name), "before"])
      subscriber.stop()
      var received: [RedisMessage] = []
      for try await message in subscriber.messages { received.append(message) }
      #expect(received.count <= 1)
      #expect(await eventually(within: 5) { (try? subscribers(of: name, publisher)) == 0 })
      subscriber.stop()
    }

    /// The consumer reads nothing while 10 messages arrive for a buffer of 3: it then gets the
    /// first 3 and the overflow error, never a stream with a gap.
    @Test func aFullBufferEndsTheStreamWithAnError() async throws {
      let name = channel("full")
      let subscriber = try subscribe([name], bufferLimit: 3)
      let publisher = try SharedRedis.server().connect()
      _ = try publisher.pipeline((0..<10).map { ["PUBLISH", .string(name), .string("m\($0)")] })
      // The reader closes its connection once the stream has ended.
      #expect(await eventually(within: 5) { (try? subscribers(of: name, publisher)) == 0 })
      var received: [String] = []
      do {
        for try await message in subscriber.messages {
          received.append(String(decoding: message.payload, as: UTF8.self))
        }
        Issue.record("the stream ended without an error")
      } catch {
        #expect(error as? RedisError == .subscriberOverflow(limit: 3))
      }
      #expect(received == ["m0", "m1", "m2"])
    }

    @Test func aCancelledConsumerStopsTheReader() async throws {
      let name = channel("cancel")
      let subscriber = try subscribe([name])
      let publisher = try SharedRedis.server().connect()
      let consumer = Task {
        for try await _ in subscriber.messages {}
      }
      consumer.cancel()
      _ = await consumer.result
      #expect(await eventually(within: 5) { (try? subscribers(of: name, publisher)) == 0 })
      // Alive until here: its deinit would stop the reader too.
      withExtendedLifetime(subscriber) {}
    }

    @Test func refusesNoChannelsAndAnEmptyBuffer() throws {
      #expect(throws: RedisError.self) { try subscribe([]) }
      #expect(throws: RedisError.self) { try subscribe(["c"], bufferLimit: 0) }
    }

    private func subscribers(of channel: String, _ redis: RedisConnection) throws -> Int64? {
      try redis.command(["PUBSUB", "NUMSUB", .string(channel)]).elements?.last?.integer
    }
  }
}

/// The first `count` messages; the subscriber is stopped if they have not all come within 10 s,
/// so a lost message fails the test instead of hanging it.
func first(_ count: Int, of subscriber: RedisSubscriber) async throws -> [RedisMessage] {
  let watchdog = Task {
    try await Task.sleep(for: .seconds(10))
    subscriber.stop()
  }
  defer { watchdog.cancel() }
  var received: [RedisMessage] = []
  for try await message in subscriber.messages {
    received.append(message)
    if received.count == count { break }
  }
  return received
}
