import DialtoneRedis
import Testing

@Suite struct RedisConfigurationTests {
  @Test func parsesHostPortAndDatabase() throws {
    #expect(try RedisConfiguration(url: "redis://cache.internal") == RedisConfiguration(host: "cache.internal"))
    let full = try RedisConfiguration(url: "redis://10.0.0.5:6380/3")
    #expect(full.host == "10.0.0.5")
    #expect(full.port == 6380)
    #expect(full.database == 3)
    let ipv6 = try RedisConfiguration(url: "redis://[::1]:7000")
    #expect(ipv6.host == "::1")
    #expect(ipv6.port == 7000)
    #expect(try RedisConfiguration(url: "redis://[::1]").port == 6379)
    #expect(try RedisConfiguration(url: "redis://h:1/").database == 0)
  }

  @Test(arguments: [
    "http://h:1", "redis://", "redis://:6379", "redis://h:0", "redis://h:70000", "redis://h:x", "redis://h/-1",
    "redis://h/db", "redis://user@h:1", "redis://u:%zz@h",
  ])
  func refusesMalformedURLs(_ url: String) {
    #expect(throws: RedisError.self) { try RedisConfiguration(url: url) }
  }
}
