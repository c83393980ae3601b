import Testing

/// One scratch server for a whole suite: started before its first test, stopped and deleted after
/// its last one. Tests reach it through `SharedPostgres.server()`.
struct ScratchPostgresTrait: SuiteTrait, TestScoping {
  var isRecursive: Bool { false }

  func provideScope(
    for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
  ) async throws {
    let server = try await ScratchPostgres.start()
    do {
      try await SharedPostgres.$current.withValue(server) { try await function() }
    } catch {
      await server.stop()
      throw error
    }
    await server.stop()
  }
}

extension Trait where Self == ScratchPostgresTrait {
  static var scratchPostgres: Self { Self() }
}

enum SharedPostgres {
  struct NotRunning: Error, CustomStringConvertible {
    var description: String { "no scratch PostgreSQL: the test must be inside a suite with the .scratchPostgres trait" }
  }

  @TaskLocal static var current: ScratchPostgres?

  static func server() throws -> ScratchPostgres {
    guard let current else { throw NotRunning() }
    return current
  }
}

/// Every test of this target, under one scratch server.
@Suite(.scratchPostgres) struct PostgresTests {}
