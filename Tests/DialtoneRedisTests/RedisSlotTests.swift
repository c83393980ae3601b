import DialtoneRedis
import DialtoneTLS
import Testing

@Suite struct RedisSlotTests {
  @Test func slotsMatchTheClusterSpecification() {
    // The specification's CRC16 check value, and slots redis-cli's CLUSTER KEYSLOT gives.
    #expect(RedisSlot.of("123456789") == 12739)
    #expect(RedisSlot.of("foo") == 12182)
    #expect(RedisSlot.of("bar") == 5061)
    #expect(RedisSlot.of("") == 0)
  }

  @Test func aHashTagDecidesTheSlot() {
    #expect(RedisSlot.of("{user1000}.following") == RedisSlot.of("{user1000}.followers"))
    #expect(RedisSlot.of("{user1000}.following") == RedisSlot.of("user1000"))
    #expect(RedisSlot.of("dt:session:{s1}:meta") == RedisSlot.of("dt:session:{s1}:log"))
    // Only the first {…} counts, an empty one means no tag, and an unclosed one is no tag.
    #expect(RedisSlot.of("foo{bar}{zap}") == RedisSlot.of("bar"))
    #expect(RedisSlot.of("foo{}{bar}") == RedisSlot.of("foo{}{bar}"))
    #expect(RedisSlot.of("foo{}{bar}") != RedisSlot.of("bar"))
    #expect(RedisSlot.of("foo{{bar}}zap") == RedisSlot.of("{bar"))
    #expect(RedisSlot.of("foo{bar") != RedisSlot.of("bar"))
  }

  @Test func clusterURLsListTheirSeeds() throws {
    let listed = try RedisConfiguration(url: "redis://:secret@10.0.0.1:7000,10.0.0.2:7001")
    #expect(listed.clusterSeeds == [.init(host: "10.0.0.1", port: 7000), .init(host: "10.0.0.2", port: 7001)])
    #expect(listed.password == "secret")
    let one = try RedisConfiguration(url: "redis-cluster://cache:7000")
    #expect(one.clusterSeeds == [.init(host: "cache", port: 7000)])
    let secure = try RedisConfiguration(url: "rediss-cluster://a:1,[::1]:2?ca-file=/ca.pem")
    #expect(secure.clusterSeeds == [.init(host: "a", port: 1), .init(host: "::1", port: 2)])
    #expect(secure.tls?.caFile == "/ca.pem")
    #expect("\(secure)" == "rediss-cluster://a:1,[::1]:2")
    #expect(try RedisConfiguration(url: "redis://one:6379").clusterSeeds == nil)
    #expect(throws: RedisError.self) { try RedisConfiguration(url: "redis-cluster://a:1,b:2/3") }
    #expect(throws: RedisError.self) { try RedisConfiguration(url: "redis-cluster://a:1,") }
  }
}
