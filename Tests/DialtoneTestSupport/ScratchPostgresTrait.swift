import Testing

/// One scratch server for a whole suite: started before its first test, stopped and deleted after
/// its last one. Tests reach it through `SharedPostgres.server()`.
public struct ScratchPostgresTrait: SuiteTrait, TestScoping {
  public init() {}

  public var isRecursive: Bool { false }

  public func provideScope(
    for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
  ) async throws {
    try await ScratchPostgres.with { server in
      try await SharedPostgres.$current.withValue(server) { try await function() }
    }
  }
}

extension Trait where Self == ScratchPostgresTrait {
  public static var scratchPostgres: Self { Self() }
}

public enum SharedPostgres {
  public struct NotRunning: Error, CustomStringConvertible {
    public var description: String {
      "no scratch PostgreSQL: the test must be inside a suite with the .scratchPostgres trait"
    }
  }

  @TaskLocal public static var current: ScratchPostgres?

  public static func server() throws -> ScratchPostgres {
    guard let current else { throw NotRunning() }
    return current
  }
}
