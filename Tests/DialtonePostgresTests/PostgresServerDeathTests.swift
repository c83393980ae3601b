import DialtonePostgres
import DialtoneTestSupport
import Testing

extension PostgresTests {
  /// A server of its own: this test kills it.
  @Suite struct ServerDeath {
    @Test func aKilledServerIsALostConnectionAndThePoolRecoversAfterARestart() async throws {
      try await ScratchPostgres.with { try await killAndRestart($0) }
    }

    private func killAndRestart(_ server: ScratchPostgres) async throws {
      let direct = try PostgresConnection(url: server.url())
      let pool = PostgresPool(PostgresConfiguration(url: server.url()), maxConnections: 2, maxWaiters: 4)
      #expect(try await pool.withConnection { try $0.query("SELECT 1").first?.int64(0) } == 1)
      #expect(await pool.statistics.idle == 1)

      await server.kill()

      let lost = #expect(throws: PostgresError.self) { try direct.query("SELECT 1") }
      #expect(lost?.isConnectionLost == true, "\(String(describing: lost))")
      #expect(!direct.isAlive)
      // While it is down: an error at once, not a wait.
      let refused = await #expect(throws: PostgresError.self) { try await pool.withConnection { _ in } }
      guard case .connectionFailed = refused else {
        Issue.record("\(String(describing: refused))")
        return
      }

      try await server.restart()

      #expect(try await pool.withConnection { try $0.query("SELECT 2").first?.int64(0) } == 2)
      let statistics = await pool.statistics
      #expect(statistics.discarded == 1)
      #expect(statistics.open == 1)
      #expect(try PostgresConnection(url: server.url()).query("SELECT 3").first?.int64(0) == 3)
      await pool.close()
    }
  }
}
