import DialtonePostgres
import DialtoneTestSupport
import Foundation
import Testing

extension PostgresTests {
  @Suite struct Pool {
    /// Connections the server sees with `name` as application_name: the truth, whatever the pool
    /// believes.
    private func serverSideCount(_ admin: PostgresConnection, _ name: String) throws -> Int64 {
      try admin.query("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", [.text(name)])
        .first?.int64(0) ?? -1
    }

    private func waitUntil(_ condition: () async throws -> Bool) async rethrows -> Bool {
      for _ in 0..<500 {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
      }
      return false
    }

    @Test func neverOpensMoreThanItsBoundUnderFiftyTasks() async throws {
      let name = "bound-" + UUID().uuidString.prefix(8)
      let server = try SharedPostgres.server()
      let pool = PostgresPool(
        PostgresConfiguration(url: try server.freshSchema(applicationName: name)), maxConnections: 4, maxWaiters: 64)
      let admin = try PostgresConnection(url: server.url())
      let seen = try await withThrowingTaskGroup(of: Int64.self) { group in
        for task in 0..<50 {
          group.addTask {
            try await pool.withConnection { connection in
              let echoed = try connection.query("SELECT $1::bigint", [.int64(Int64(task))]).first?.int64(0)
              #expect(echoed == Int64(task))
              // Held across a suspension, so that the other tasks pile up behind the bound.
              try await Task.sleep(for: .milliseconds(2))
              return try connection.query(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", [.text(name)]
              ).first?.int64(0) ?? -1
            }
          }
        }
        return try await group.reduce(into: [Int64]()) { $0.append($1) }
      }
      #expect(seen.count == 50)
      #expect(seen.allSatisfy { (1...4).contains($0) }, "\(seen)")
      let statistics = await pool.statistics
      #expect(statistics.peakOpen <= 4)
      #expect(statistics.opened <= 4)
      #expect(statistics.discarded == 0)
      #expect(try serverSideCount(admin, name) <= 4)
      await pool.close()
    }

    @Test func refusesCheckoutsBeyondItsWaiterBound() async throws {
      let pool = PostgresPool(
        PostgresConfiguration(url: try SharedPostgres.server().freshSchema()), maxConnections: 1, maxWaiters: 2)
      let (release, releaser) = AsyncStream<Void>.makeStream()
      let holder = Task {
        try await pool.withConnection { _ in
          for await _ in release { break }
        }
      }
      #expect(await waitUntil { await pool.statistics.open == 1 })
      let waiters = (0..<2).map { _ in
        Task { try await pool.withConnection { try $0.query("SELECT 1").first?.int64(0) } }
      }
      #expect(await waitUntil { await pool.statistics.waiting == 2 })
      await #expect(throws: PostgresError.poolExhausted(maxWaiters: 2)) {
        try await pool.withConnection { _ in }
      }
      releaser.finish()
      try await holder.value
      for waiter in waiters { #expect(try await waiter.value == 1) }
      #expect(await pool.statistics.opened == 1)
      await pool.close()
    }

    @Test func aCancelledWaiterLeavesTheQueue() async throws {
      let pool = PostgresPool(
        PostgresConfiguration(url: try SharedPostgres.server().freshSchema()), maxConnections: 1, maxWaiters: 1)
      let held = try await pool.checkout()
      let waiter = Task { try await pool.withConnection { _ in } }
      #expect(await waitUntil { await pool.statistics.waiting == 1 })
      waiter.cancel()
      await #expect(throws: PostgresError.cancelled) { try await waiter.value }
      #expect(await pool.statistics.waiting == 0)
      await pool.checkin(held)
      #expect(try await pool.withConnection { try $0.query("SELECT 1").first?.int64(0) } == 1)
      await pool.close()
      await #expect(throws: PostgresError.poolClosed) { try await pool.withConnection { _ in } }
    }

    @Test func replacesAConnectionThatBroke() async throws {
      let server = try SharedPostgres.server()
      let pool = PostgresPool(PostgresConfiguration(url: try server.freshSchema()), maxConnections: 1, maxWaiters: 4)
      let admin = try PostgresConnection(url: server.url())
      let first = try await pool.withConnection { $0.backendPID }
      let lost = await #expect(throws: PostgresError.self) {
        try await pool.withConnection { connection in
          try admin.query("SELECT pg_terminate_backend($1::int)", [.int64(Int64(connection.backendPID))])
          // The backend exits asynchronously: a statement fails once it is gone.
          _ = try await waitUntil {
            try connection.query("SELECT 1")
            return false
          }
        }
      }
      #expect(lost?.isConnectionLost == true, "\(String(describing: lost))")
      let statistics = await pool.statistics
      #expect(statistics.discarded == 1)
      #expect(statistics.open == 0)
      let second = try await pool.withConnection { $0.backendPID }
      #expect(second != first)
      await pool.close()
    }

    @Test func replacesAConnectionGivenBackInsideATransaction() async throws {
      let pool = PostgresPool(
        PostgresConfiguration(url: try SharedPostgres.server().freshSchema()), maxConnections: 1, maxWaiters: 1)
      let first = try await pool.withConnection { connection in
        try connection.execute("BEGIN")
        return connection.backendPID
      }
      #expect(await pool.statistics.discarded == 1)
      let second = try await pool.withConnection { $0.backendPID }
      #expect(second != first)
      await pool.close()
    }
  }
}
