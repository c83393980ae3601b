import CRedis
import DialtoneTestSupport
import Testing

@testable import DialtoneRedis

/// `RedisCommandFormat` writes exactly the bytes hiredis's `redisFormatCommandArgv` writes (which
/// it replaced on every connection): generated commands with empty, binary, CRLF-carrying and
/// long arguments, and lengths across every digit count, pipelined in one buffer.
@Suite struct RedisCommandFormatTests {
  /// hiredis's bytes for one command (the oracle: the sources no longer call hiredis's formatter).
  private func hiredis(_ arguments: [RedisArgument]) throws -> [UInt8] {
    var target: UnsafeMutablePointer<CChar>?
    // Every argument in one buffer, a byte past the end so that no pointer into it is nil.
    let storage = arguments.flatMap(\.bytes) + [0]
    let length = storage.withUnsafeBufferPointer { buffer -> Int32 in
      let base = UnsafeRawPointer(buffer.baseAddress.unsafelyUnwrapped)
      var offset = 0
      var argv: [UnsafePointer<CChar>?] = arguments.map { argument in
        defer { offset += argument.bytes.count }
        return base.advanced(by: offset).assumingMemoryBound(to: CChar.self)
      }
      let lengths = arguments.map(\.bytes.count)
      return redisFormatCommandArgv(&target, Int32(arguments.count), &argv, lengths)
    }
    let formatted = try #require(target)
    defer { redisFreeCommand(formatted) }
    return Array(UnsafeRawBufferPointer(start: formatted, count: Int(length)))
  }

  private func argument(_ g: inout SeededGenerator) -> RedisArgument {
    switch g.below(6) {
    case 0: return .bytes([])
    case 1: return .bytes([13, 10, 0, 36, 42])
    case 2: return .string("héllo 😀 \(g.below(1_000_000))")
    case 3: return .integer(Int64(g.below(Int(Int32.max))) - 1_000)
    case 4: return .bytes((0..<g.pick([9, 10, 99, 100, 999, 1000, 10_000, 70_000])).map { _ in UInt8(g.below(256)) })
    default: return .string(String(repeating: "k", count: g.below(20)))
    }
  }

  @Test(arguments: [1, 2, 3, 4] as [UInt64])
  func generatedCommandsAreFormattedAsHiredisFormatsThem(seed: UInt64) throws {
    var g = SeededGenerator(seed: seed)
    var pipeline: [[RedisArgument]] = []
    var expected: [UInt8] = []
    for _ in 0..<50 {
      // Argument counts across one, two and three digits.
      let count = g.pick([1, 2, 9, 10, 11, 99, 100, 101, 250])
      let command = (0..<count).map { _ in argument(&g) }
      let formatted = try hiredis(command)
      #expect(RedisCommandFormat.encode([command]) == formatted)
      pipeline.append(command)
      expected += formatted
    }
    #expect(RedisCommandFormat.encode(pipeline) == expected)
  }

  @Test func noCommandsAreNoBytes() {
    #expect(RedisCommandFormat.encode([]).isEmpty)
  }
}
