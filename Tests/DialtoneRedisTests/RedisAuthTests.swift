import DialtoneRedis
import DialtoneTestSupport
import Testing

/// A Redis that requires authentication (managed services do): an ACL user and its password, or
/// a `requirepass` password, given in the URL; a wrong one is a clear error that never repeats it.
@Suite struct RedisAuthTests {
  @Test func anACLUserAndALegacyPasswordAuthenticate() async throws {
    try await ScratchRedis.with { server in
      let admin = try server.connect()
      try admin.command(["ACL", "SETUSER", "node1", "on", ">p@ss:w/rd", "~*", "&*", "+@all"])

      let user = try RedisConnection(url: "redis://node1:p%40ss%3Aw%2Frd@127.0.0.1:\(server.port)/2")
      #expect(try user.command(["ACL", "WHOAMI"]) == .bulk(Array("node1".utf8)))
      try user.command(["SET", "k", "v"])  // in database 2, selected after AUTH
      #expect(try admin.command(["SELECT", "2"]) == .status("OK"))
      #expect(try admin.command(["GET", "k"]) == .bulk(Array("v".utf8)))

      let wrong = "redis://node1:not-the-password@127.0.0.1:\(server.port)"
      do {
        _ = try RedisConnection(url: wrong)
        Issue.record("a wrong password was accepted")
      } catch {
        let text = "\(error)"
        #expect(text.contains("AUTH as node1") && !text.contains("not-the-password"), "\(text)")
      }

      try admin.command(["CONFIG", "SET", "requirepass", "legacy-secret"])
      let legacy = try RedisConnection(url: "redis://:legacy-secret@127.0.0.1:\(server.port)")
      #expect(try legacy.command(["PING"]) == .status("PONG"))
      let anonymous = try RedisConnection(url: "redis://127.0.0.1:\(server.port)")
      #expect(throws: RedisError.self) { try anonymous.command(["PING"]) }
    }
  }

  @Test func aConfigurationNeverShowsItsPassword() throws {
    let url = "redis://node1:s3cret@cache.internal:6380/1"
    let configuration = try RedisConfiguration(url: url)
    #expect(configuration.username == "node1" && configuration.password == "s3cret")
    #expect("\(configuration)" == "redis://node1:***@cache.internal:6380/1")
    #expect(RedisConfiguration.redacted(url) == "redis://node1:***@cache.internal:6380/1")
    #expect(RedisConfiguration.redacted("redis://:s3cret@h") == "redis://:***@h")
    #expect(RedisConfiguration.redacted("redis://h:1/0") == "redis://h:1/0")
    do {
      _ = try RedisConfiguration(url: "redis://node1:s3cret@h:99999")
      Issue.record("a bad port was accepted")
    } catch {
      #expect(!"\(error)".contains("s3cret"))
    }
  }
}
