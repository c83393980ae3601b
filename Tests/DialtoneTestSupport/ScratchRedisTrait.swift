import DialtoneRedis
import Foundation
import Testing

/// One scratch server for a whole suite: started before its first test, stopped and deleted after
/// its last one. Tests reach it through `SharedRedis.server()`.
public struct ScratchRedisTrait: SuiteTrait, TestScoping {
  public init() {}

  public var isRecursive: Bool { false }

  public func provideScope(
    for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
  ) async throws {
    try await ScratchRedis.with { server in
      try await SharedRedis.$current.withValue(server) {
        // DIALTONE_TEST_REDIS=cluster: the engines' suites run on a Redis Cluster instead
        // (`SharedRedis.client()`); scripts/run-tests.sh runs them both ways.
        guard ProcessInfo.processInfo.environment["DIALTONE_TEST_REDIS"] == "cluster" else {
          return try await function()
        }
        try await ScratchRedisCluster.with { cluster in
          try await SharedRedisCluster.$current.withValue(cluster) { try await function() }
        }
      }
    }
  }
}

extension Trait where Self == ScratchRedisTrait {
  public static var scratchRedis: Self { Self() }
}

public enum SharedRedis {
  public struct NotRunning: Error, CustomStringConvertible {
    public var description: String { "no scratch Redis: the test must be inside a suite with the .scratchRedis trait" }
  }

  @TaskLocal public static var current: ScratchRedis?

  public static func server() throws -> ScratchRedis {
    guard let current else { throw NotRunning() }
    return current
  }

  /// A client of the suite's Redis: its Redis Cluster when it runs on one
  /// (`DIALTONE_TEST_REDIS=cluster`), else its one server.
  public static func client(commandTimeout: Duration = .seconds(5)) throws -> any RedisClient {
    if let cluster = SharedRedisCluster.current { return try cluster.connect(commandTimeout: commandTimeout) }
    return try server().connect(commandTimeout: commandTimeout)
  }

  /// A key no other test uses.
  public static func key(_ name: String) -> RedisArgument { .string(name + ":" + UUID().uuidString) }
}
