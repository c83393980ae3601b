import DialtoneJSON
import DialtonePostgres
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer
@testable import DialtoneStorage

private let answer = SessionDescription(sdp: "v=0\r\no=- 3 4 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n")

extension StoreContractTests {
  /// The whole server on PostgreSQL (`--database-url`).
  @Suite struct Server {
    @Test func aServerOnPostgreSQLKeepsItsHistoryThere() async throws {
      let url = try SharedPostgres.server().freshSchema()
      let server = try await TestServer(configure: { $0.databaseURL = url })
      let alice = try await server.connect("alice")
      let bob = try await server.connect("bob")
      let call = callID()
      _ = try await alice.invite(call, to: "bob")
      _ = try await bob.expect(.invite)
      #expect(try await bob.act(.accept(.init(callId: call, answer: answer))).isAck)
      _ = try await alice.expect(.accept)
      server.clock.advance(by: 3)
      #expect(try await alice.act(.hangup(.init(callId: call))).isAck)
      _ = try await bob.expect(.callEnded)
      let history = try await server.http("GET", "/v1/calls", token: server.token("bob"))
      let records = history.json?["calls"]?.arrayValue ?? []
      #expect(records.map { $0["callId"]?.stringValue } == [call])
      #expect(records.first?["endReason"]?.stringValue == "hangup")
      await server.stop()

      // Not in the data directory: in the database, where another store finds it.
      let store = try await PostgresStore.open(url: url)
      #expect(try await store.history(of: "alice", limit: 10, before: nil).map(\.callId) == [call])
      #expect(!FileManager.default.fileExists(atPath: server.dataDirectory + "/dialtone.sqlite"))
    }

    @Test func aDatabaseThatCannotBeReachedIsAStartupError() async throws {
      let port = try LoopbackListener.freePort()
      var configuration = ServerConfiguration()
      configuration.port = 0
      configuration.dataDirectory = NSTemporaryDirectory() + "dialtone-test-\(UUID().uuidString)"
      defer { try? FileManager.default.removeItem(atPath: configuration.dataDirectory) }
      configuration.authSecret = testSecret
      configuration.logLevel = .error
      configuration.databaseURL = "postgres://dialtone:hunter2@127.0.0.1:\(port)/postgres"
      do {
        _ = try await DialtoneServer(configuration: configuration)
        Issue.record("the server started without its database")
      } catch {
        let message = String(describing: error)
        #expect(message.contains("cannot open the PostgreSQL database postgres://dialtone:***@127.0.0.1:\(port)"))
        #expect(!message.contains("hunter2"))
      }
    }

    @Test func theDatabaseURLMustBePostgreSQL() throws {
      let parsed = try ServerConfiguration.parse(
        arguments: ["--database-url", "postgresql://u@db.example/dialtone"], environment: [:])
      #expect(parsed.databaseURL == "postgresql://u@db.example/dialtone")
      let fromEnvironment = try ServerConfiguration.parse(
        arguments: [], environment: ["DIALTONE_DATABASE_URL": "postgres://u@127.0.0.1/d"])
      #expect(fromEnvironment.databaseURL == "postgres://u@127.0.0.1/d")
      #expect(try ServerConfiguration.parse(arguments: [], environment: [:]).databaseURL == nil)
      #expect(throws: ConfigurationError("--database-url must be a postgres:// or postgresql:// URL")) {
        try ServerConfiguration.parse(arguments: ["--database-url", "mysql://u@h/d"], environment: [:])
      }
    }
  }
}

/// A server of its own: this test kills it.
@Suite struct PostgresStoreReconnectTests {
  @Test func bothStoresCarryOnAfterTheServerRestarts() async throws {
    try await ScratchPostgres.with { try await killAndRestart($0) }
  }

  private func killAndRestart(_ server: ScratchPostgres) async throws {
    let url = try server.freshSchema()
    let store = try await PostgresStore.open(url: url, threads: 1)
    let live = try await PostgresLiveCallStore.open(url: url)
    let record = StoreContractTests.record("before", at: 1000)
    try StoreContractTests.end([(record, false)], in: live)
    #expect(try await store.history(of: "alice", limit: 10, before: nil) == [record])
    #expect(try await live.isCallIdUsed("before"))

    // The scratch server commits without waiting for its log (synchronous_commit=off): what
    // this test wrote must be on disk before the crash.
    try PostgresConnection(url: server.url()).execute("CHECKPOINT")
    await server.kill()
    await #expect(throws: PostgresError.self) { try await live.isCallIdUsed("before") }
    try await server.restart()

    // Connections lost meanwhile are opened again, without a restart of this server.
    try StoreContractTests.end([(StoreContractTests.record("after", at: 2000), false)], in: live)
    #expect(try await live.isCallIdUsed("after"))
    #expect(try await store.history(of: "alice", limit: 10, before: nil).map(\.callId) == ["after", "before"])
  }
}
