import DialtoneRedis
import Foundation
import Testing

/// One scratch server for a whole suite: started before its first test, stopped and deleted after
/// its last one. Tests reach it through `SharedRedis.server()`.
struct ScratchRedisTrait: SuiteTrait, TestScoping {
  var isRecursive: Bool { false }

  func provideScope(
    for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
  ) async throws {
    let server = try await ScratchRedis.start()
    do {
      try await SharedRedis.$current.withValue(server) { try await function() }
    } catch {
      await server.stop()
      throw error
    }
    await server.stop()
  }
}

extension Trait where Self == ScratchRedisTrait {
  static var scratchRedis: Self { Self() }
}

enum SharedRedis {
  struct NotRunning: Error, CustomStringConvertible {
    var description: String { "no scratch Redis: the test must be inside a suite with the .scratchRedis trait" }
  }

  @TaskLocal static var current: ScratchRedis?

  static func server() throws -> ScratchRedis {
    guard let current else { throw NotRunning() }
    return current
  }

  /// A key no other test uses.
  static func key(_ name: String) -> RedisArgument { .string(name + ":" + UUID().uuidString) }
}

/// Every test of this target, under one scratch server.
@Suite(.scratchRedis) struct RedisTests {}
