import DialtoneRedis
import DialtoneTestSupport
import Testing

extension RedisTests {
  /// A server of its own: this test kills it.
  @Suite struct ServerDeath {
    @Test func aKilledServerIsALostConnectionAndANewOneWorksAfterARestart() async throws {
      try await ScratchRedis.with { try await killAndRestart($0) }
    }

    private func killAndRestart(_ server: ScratchRedis) async throws {
      let redis = try server.connect(commandTimeout: .seconds(2))
      try redis.set("k", "v")
      let pipelined = try server.connect(commandTimeout: .seconds(2))
      let bulk = try server.connect(commandTimeout: .seconds(2))
      let subscriber = try RedisSubscriber(RedisConfiguration(port: server.port), channels: ["c"])

      await server.kill()

      let lost = #expect(throws: RedisError.self) { try redis.get("k") }
      #expect(lost?.isConnectionLost == true, "\(String(describing: lost))")
      #expect(!redis.isOpen)
      let lostPipeline = #expect(throws: RedisError.self) { try pipelined.pipeline([["PING"], ["PING"]]) }
      #expect(lostPipeline?.isConnectionLost == true, "\(String(describing: lostPipeline))")
      do {
        _ = try await first(1, of: subscriber)
        Issue.record("the subscriber's stream ended without an error")
      } catch {
        #expect((error as? RedisError)?.isConnectionLost == true, "\(error)")
      }
      // Megabytes to a reset connection: several writes, EPIPE after the first, not SIGPIPE.
      let big = RedisArgument.bytes(Array(repeating: 120, count: 64 * 1024))
      let lostBulk = #expect(throws: RedisError.self) {
        try bulk.pipeline(Array(repeating: ["SET", "big", big], count: 64))
      }
      #expect(lostBulk?.isConnectionLost == true, "\(String(describing: lostBulk))")
      // While it is down: an error at once, not a wait.
      let refused = #expect(throws: RedisError.self) { try server.connect() }
      guard case .connectionFailed = refused else {
        Issue.record("\(String(describing: refused))")
        return
      }

      try await server.restart()

      #expect(throws: RedisError.connectionLost(message: "the connection is closed")) { try redis.get("k") }
      let fresh = try server.connect()
      // No persistence: the restarted server is empty.
      #expect(try fresh.get("k") == nil)
      #expect(try fresh.incr("k") == 1)
    }
  }
}
