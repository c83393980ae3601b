import DialtoneRedis
import DialtoneTestSupport
import Testing

extension RedisTests {
  @Suite struct Commands {
    private func connect() throws -> RedisConnection { try SharedRedis.server().connect() }

    @Test func setOnlyIfAbsentSetsOnce() throws {
      let redis = try connect()
      let key = SharedRedis.key("nx")
      #expect(try redis.set(key, "first", onlyIfAbsent: true))
      #expect(try !redis.set(key, "second", onlyIfAbsent: true))
      #expect(try redis.get(key) == Array("first".utf8))
      #expect(try redis.set(key, "third"))
      #expect(try redis.get(key) == Array("third".utf8))
    }

    @Test func anExpiringValueEventuallyGoes() async throws {
      let redis = try connect()
      let key = SharedRedis.key("px")
      #expect(try redis.set(key, "v", expiresIn: .milliseconds(50), onlyIfAbsent: true))
      let ttl = try redis.command(["PTTL", key]).integer
      #expect(ttl.map { (0...50).contains($0) } == true, "\(String(describing: ttl))")
      let gone = await eventually(within: 5) { (try? redis.get(key)) == .some(nil) }
      #expect(gone)
      // Gone, so NX may set it again.
      #expect(try redis.set(key, "again", expiresIn: .seconds(60), onlyIfAbsent: true))
      // A sub-millisecond expiry is rounded up, not sent as the PX 0 that SET refuses.
      #expect(try redis.set(SharedRedis.key("tiny"), "v", expiresIn: .microseconds(10)))
    }

    @Test func pexpireSetsAnExpiryOnlyOnAnExistingKey() async throws {
      let redis = try connect()
      let key = SharedRedis.key("pexpire")
      #expect(try !redis.pexpire(key, .seconds(10)))
      try redis.set(key, "v")
      #expect(try redis.command(["PTTL", key]) == .integer(-1))
      #expect(try redis.pexpire(key, .seconds(100)))
      let ttl = try #require(try redis.command(["PTTL", key]).integer)
      #expect((1...100_000).contains(ttl))
      #expect(try redis.pexpire(key, .milliseconds(30)))
      #expect(await eventually(within: 5) { (try? redis.get(key)) == .some(nil) })
    }

    @Test func getDelAndIncr() throws {
      let redis = try connect()
      let a = SharedRedis.key("a")
      let b = SharedRedis.key("b")
      #expect(try redis.get(a) == nil)
      #expect(try redis.incr(a) == 1)
      #expect(try redis.incr(a) == 2)
      #expect(try redis.get(a) == Array("2".utf8))
      try redis.set(b, "x")
      #expect(try redis.del([a, b, SharedRedis.key("missing")]) == 2)
      #expect(try redis.get(a) == nil)
      #expect(try redis.del([a]) == 0)
    }

    @Test func aTransactionRunsItsCommandsInOrderWithEachReply() throws {
      let redis = try connect()
      let key = SharedRedis.key("tx")
      let script = RedisScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
      try redis.load([script])
      let replies = try redis.transaction([
        ["SET", key, "1"],
        RedisConnection.evalsha(script, keys: [key], arguments: ["41"]),
        ["HGET", key, "not-a-hash"],  // fails at run time: the others still ran
        ["INCR", key],
      ])
      #expect(replies.count == 4)
      #expect(replies[1] == .integer(42))
      guard case .error(let prefix, _) = replies[2] else {
        Issue.record("a wrong-type command did not fail")
        return
      }
      #expect(prefix == "WRONGTYPE")
      #expect(replies[3] == .integer(43))
      #expect(try redis.transaction([]) == [])
    }
  }
}
