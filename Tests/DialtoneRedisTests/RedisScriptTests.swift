import DialtoneRedis
import DialtoneTestSupport
import Testing

extension RedisTests {
  /// A server of its own: these tests flush its script cache and count its commands, one at a
  /// time (the lease test's scripts would otherwise land in the counts).
  @Suite(.scratchRedis, .serialized) struct Scripts {
    private func connect() throws -> RedisConnection { try SharedRedis.server().connect() }

    @Test func theScriptNameIsTheSHA1TheServerComputes() throws {
      #expect(RedisScript("abc").sha1 == "a9993e364706816aba3e25717850c26c9cd0d89d")
      #expect(RedisScript("").sha1 == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
      let redis = try connect()
      // 55, 56, 64 and 200 bytes (the padding edges), and multi-byte UTF-8.
      let sources = [45, 46, 54, 190].map { "return '" + String(repeating: "x", count: $0) + "'" } + ["return 'é😀'"]
      for source in sources {
        #expect(try redis.command(["SCRIPT", "LOAD", .string(source)]).string == RedisScript(source).sha1)
      }
    }

    @Test func evalUsesEVALSHAAndFallsBackToEVALOnNOSCRIPT() throws {
      let redis = try connect()
      let script = RedisScript("return {KEYS[1], ARGV[1], #KEYS, #ARGV}")
      func run() throws -> RedisReply { try redis.eval(script, keys: ["k"], arguments: [.bytes([0, 255]), "b"]) }
      let expected = RedisReply.array([.bulk(Array("k".utf8)), .bulk([0, 255]), .integer(1), .integer(2)])

      // A fresh server does not know it: NOSCRIPT, then EVAL, which caches it.
      #expect(try run() == expected)
      #expect(try redis.command(["SCRIPT", "EXISTS", .string(script.sha1)]) == .array([.integer(1)]))
      #expect(try calls(redis, "eval") == 1)
      // Now EVALSHA alone.
      #expect(try run() == expected)
      #expect(try calls(redis, "eval") == 1)
      #expect(try calls(redis, "evalsha") == 2)
      // As after a server restart.
      try redis.command(["SCRIPT", "FLUSH"])
      #expect(try run() == expected)
      #expect(try calls(redis, "eval") == 2)
      // Other script errors are thrown, not retried.
      let failing = RedisScript("return redis.call('INCR', KEYS[1])")
      try redis.command(["RPUSH", "list", "x"])
      let error = #expect(throws: RedisError.self) { try redis.eval(failing, keys: ["list"]) }
      #expect(error?.serverPrefix == "WRONGTYPE", "\(String(describing: error))")
    }

    @Test func aLeaseIsExtendedAndReleasedOnlyByItsHolder() async throws {
      let redis = try connect()
      let lease = SharedRedis.key("lease")
      #expect(try redis.acquireLease(lease, holder: "node-a", duration: .seconds(30)))
      #expect(try !redis.acquireLease(lease, holder: "node-b", duration: .seconds(30)))

      #expect(try !redis.extendLease(lease, holder: "node-b", duration: .seconds(300)))
      let before = try #require(try redis.command(["PTTL", lease]).integer)
      #expect(before <= 30_000)
      #expect(try redis.extendLease(lease, holder: "node-a", duration: .seconds(300)))
      let after = try #require(try redis.command(["PTTL", lease]).integer)
      #expect(after > 30_000)

      #expect(try !redis.releaseLease(lease, holder: "node-b"))
      #expect(try redis.get(lease) == Array("node-a".utf8))
      #expect(try redis.releaseLease(lease, holder: "node-a"))
      #expect(try redis.get(lease) == nil)
      #expect(try !redis.extendLease(lease, holder: "node-a", duration: .seconds(1)))
      #expect(try !redis.releaseLease(lease, holder: "node-a"))

      // An expired lease is free for the next holder, and the old one cannot extend it.
      #expect(try redis.acquireLease(lease, holder: "node-a", duration: .milliseconds(30)))
      #expect(await eventually(within: 5) { (try? redis.get(lease)) == .some(nil) })
      #expect(try redis.acquireLease(lease, holder: "node-b", duration: .seconds(30)))
      #expect(try !redis.extendLease(lease, holder: "node-a", duration: .seconds(30)))
      #expect(try redis.get(lease) == Array("node-b".utf8))
    }

    /// `calls` of one command in INFO commandstats (failed calls, such as NOSCRIPT, included).
    private func calls(_ redis: RedisConnection, _ command: String) throws -> Int {
      let info = try redis.command(["INFO", "commandstats"]).string ?? ""
      let prefix = "cmdstat_\(command):calls="
      guard let line = info.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix(prefix) }) else { return 0 }
      return Int(line.dropFirst(prefix.count).prefix { $0.isNumber }) ?? -1
    }
  }
}
